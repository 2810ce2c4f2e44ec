#include "tools/dashboard/options.h"

#include <map>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace goodput::dashboard {

const char kUsage[] = R"(usage: goodput-dashboard [flags]

Serves goodput's web dashboard and its JSON API, reading the four services over gRPC.

  --listen HOST        address to listen on [$GOODPUT_DASHBOARD_HOST or 127.0.0.1]
  --port N             HTTP port, 0 for any free one [$GOODPUT_DASHBOARD_PORT or 7300]
  --ingest HOST:PORT   goodput-ingest (JobService) [$GOODPUT_INGEST_ADDR or 127.0.0.1:7101]
  --ofu HOST:PORT      goodput-ofu [$GOODPUT_OFU_ADDR or 127.0.0.1:7102]
  --mfu HOST:PORT      goodput-mfu [$GOODPUT_MFU_ADDR or 127.0.0.1:7103]
  --alerting HOST:PORT goodput-alerting [$GOODPUT_ALERTING_ADDR or 127.0.0.1:7104]
  --token TOKEN        bearer token (operator role) for the services [$GOODPUT_TOKEN]
  --static-dir DIR     the built front-end (scripts/build-web.sh)
                       [$GOODPUT_DASHBOARD_STATIC_DIR, else web/dist of the build tree
                       or, installed, /usr/share/goodput/web]
  --max-streams N      live-update streams served at once [$GOODPUT_DASHBOARD_MAX_STREAMS
                       or 64]
  --max-streams-per-client N
                       live-update streams one client address may hold (429 beyond)
                       [$GOODPUT_DASHBOARD_MAX_STREAMS_PER_CLIENT or 8]
  --tls-cert FILE, --tls-key FILE
                       serve HTTPS with this certificate and key, re-read when they change
                       [$GOODPUT_DASHBOARD_TLS_CERT, $GOODPUT_DASHBOARD_TLS_KEY]
  --token-file FILE[,ROLE:FILE...]
                       require sign-in with the tokens of FILE (TOKEN ROLE [clusters=A,B]
                       [user=NAME] [team=NAME] lines; each viewer sees its token's scope) and of
                       ROLE:FILE (one token a line) [$GOODPUT_DASHBOARD_TOKEN_FILE]
  --trusted-proxy ADDR requests from ADDR are signed in as the user its user header names
                       (SSO behind an OAuth2 proxy) [$GOODPUT_DASHBOARD_TRUSTED_PROXY]
  --proxy-user-header NAME
                       [$GOODPUT_DASHBOARD_PROXY_USER_HEADER or X-Forwarded-User]
  --operator-users A,B proxy users who see every job [$GOODPUT_DASHBOARD_OPERATOR_USERS]
  --allowed-hosts A,B  host names requests may give in their Host header (the names people
                       and proxies reach the dashboard by), besides the addresses it listens
                       on and localhost; others are refused 421. "*" allows any
                       [$GOODPUT_DASHBOARD_ALLOWED_HOSTS]
  --ready-file FILE    written once serving: "http_port=N"
The services are called over TLS when $GOODPUT_TLS_CA names their CA ($GOODPUT_TLS_CERT and
$GOODPUT_TLS_KEY for a client certificate, $GOODPUT_TLS_SERVER_NAME for their name).
  --help               this text
)";

namespace {

struct Setting {
  std::string* value;
  const char* env;
};

absl::Status ParsePort(const std::string& text, const std::string& where, int* port) {
  if (!absl::SimpleAtoi(text, port) || *port < 0 || *port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": \"", text, "\" is not a port number (0-65535)"));
  }
  return absl::OkStatus();
}

absl::Status ParseCount(const std::string& text, const std::string& where, int* count) {
  if (!absl::SimpleAtoi(text, count) || *count < 1 || *count > 4096) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": \"", text, "\" is not a whole number in [1, 4096]"));
  }
  return absl::OkStatus();
}

absl::Status CheckAddress(const std::string& value, const std::string& where) {
  // host:port, [v6]:port or a gRPC target such as unix:/path.
  if (value.empty() || (!absl::StrContains(value, ':'))) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": \"", value, "\" is not an address (HOST:PORT)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DashboardOptions> ParseOptions(
    const std::vector<std::string>& args, const std::function<const char*(const char*)>& getenv) {
  DashboardOptions o;
  std::string port_text;
  std::string max_streams_text;
  std::string per_client_text;
  const std::map<std::string, Setting> settings = {
      {"listen", {&o.listen_host, "GOODPUT_DASHBOARD_HOST"}},
      {"port", {&port_text, "GOODPUT_DASHBOARD_PORT"}},
      {"ingest", {&o.ingest, "GOODPUT_INGEST_ADDR"}},
      {"ofu", {&o.ofu, "GOODPUT_OFU_ADDR"}},
      {"mfu", {&o.mfu, "GOODPUT_MFU_ADDR"}},
      {"alerting", {&o.alerting, "GOODPUT_ALERTING_ADDR"}},
      {"token", {&o.token, "GOODPUT_TOKEN"}},
      {"static-dir", {&o.static_dir, "GOODPUT_DASHBOARD_STATIC_DIR"}},
      {"max-streams", {&max_streams_text, "GOODPUT_DASHBOARD_MAX_STREAMS"}},
      {"max-streams-per-client", {&per_client_text, "GOODPUT_DASHBOARD_MAX_STREAMS_PER_CLIENT"}},
      {"tls-cert", {&o.tls_cert, "GOODPUT_DASHBOARD_TLS_CERT"}},
      {"tls-key", {&o.tls_key, "GOODPUT_DASHBOARD_TLS_KEY"}},
      {"token-file", {&o.token_file, "GOODPUT_DASHBOARD_TOKEN_FILE"}},
      {"trusted-proxy", {&o.trusted_proxy, "GOODPUT_DASHBOARD_TRUSTED_PROXY"}},
      {"proxy-user-header", {&o.proxy_user_header, "GOODPUT_DASHBOARD_PROXY_USER_HEADER"}},
      {"operator-users", {&o.operator_users, "GOODPUT_DASHBOARD_OPERATOR_USERS"}},
      {"allowed-hosts", {&o.allowed_hosts, "GOODPUT_DASHBOARD_ALLOWED_HOSTS"}},
      {"ready-file", {&o.ready_file, nullptr}},
  };
  std::map<std::string, std::string> where;  // setting -> "--flag" or "$VAR", for messages
  for (const auto& [name, setting] : settings) {
    if (setting.env == nullptr) continue;
    if (const char* value = getenv(setting.env); value != nullptr && *value != '\0') {
      *setting.value = value;
      where[name] = absl::StrCat("$", setting.env);
    }
  }
  for (size_t i = 0; i < args.size(); ++i) {
    std::string arg = args[i];
    if (arg == "--help" || arg == "-h") {
      o.help = true;
      return o;
    }
    if (!absl::StartsWith(arg, "--")) {
      return absl::InvalidArgumentError(absl::StrCat("unexpected argument \"", arg, "\""));
    }
    std::string name = arg.substr(2);
    std::string value;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
    }
    auto it = settings.find(name);
    if (it == settings.end()) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name, " (see --help)"));
    }
    *it->second.value = value;
    where[name] = absl::StrCat("--", name);
  }
  if (!port_text.empty()) {
    if (absl::Status s = ParsePort(port_text, where["port"], &o.port); !s.ok()) return s;
  }
  for (auto [name, text, count] :
       {std::tuple{"max-streams", &max_streams_text, &o.max_streams},
        std::tuple{"max-streams-per-client", &per_client_text, &o.max_streams_per_client}}) {
    if (text->empty()) continue;
    const std::string label = where.count(name) ? where[name] : absl::StrCat("--", name);
    if (absl::Status s = ParseCount(*text, label, count); !s.ok()) return s;
  }
  for (const char* name : {"ingest", "ofu", "mfu", "alerting"}) {
    std::string label = where.count(name) ? where[name] : absl::StrCat("--", name);
    if (absl::Status s = CheckAddress(*settings.at(name).value, label); !s.ok()) return s;
  }
  if (o.listen_host.empty()) return absl::InvalidArgumentError("--listen: empty host");
  if (o.tls_cert.empty() != o.tls_key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key: give both or neither");
  }
  if (!o.trusted_proxy.empty() && o.token_file.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where.count("trusted-proxy") ? where["trusted-proxy"] : "--trusted-proxy",
                     ": \"", o.trusted_proxy, "\" needs --token-file (sign-in is off without it)"));
  }
  return o;
}

}  // namespace goodput::dashboard
