#include "tools/dashboard/signin.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/random.h>

#include <algorithm>
#include <array>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "nlohmann/json.hpp"

namespace goodput::dashboard {
namespace {

constexpr char kCookie[] = "goodput_session";
constexpr char kJson[] = "application/json; charset=utf-8";

thread_local std::optional<Viewer> t_viewer;
thread_local std::function<bool()> t_still_signed_in;

// The login page: a form posting the token; no script, so any Content-Security-Policy holds.
std::string LoginPage(absl::string_view message) {
  return absl::StrCat(
      "<!doctype html><html><head><meta charset=\"utf-8\"><title>goodput: sign in</title>"
      "</head><body><h1>goodput</h1>",
      message.empty() ? "" : absl::StrCat("<p role=\"alert\">", message, "</p>"),
      "<form method=\"post\" action=\"/login\"><label>Token <input type=\"password\" "
      "name=\"token\" autocomplete=\"current-password\" autofocus></label> "
      "<button type=\"submit\">Sign in</button></form></body></html>\n");
}

// application/x-www-form-urlencoded value of `name` in `body`, decoded.
std::string FormValue(absl::string_view body, absl::string_view name) {
  for (absl::string_view pair : absl::StrSplit(body, '&')) {
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(pair, absl::MaxSplits('=', 1));
    if (kv.first != name) continue;
    std::string out;
    for (size_t i = 0; i < kv.second.size(); ++i) {
      char c = kv.second[i];
      if (c == '+') {
        out.push_back(' ');
      } else if (c == '%' && i + 2 < kv.second.size() && absl::ascii_isxdigit(kv.second[i + 1]) &&
                 absl::ascii_isxdigit(kv.second[i + 2])) {
        out += absl::HexStringToBytes(kv.second.substr(i + 1, 2));
        i += 2;
      } else {
        out.push_back(c);
      }
    }
    return out;
  }
  return "";
}

// The value of cookie `name` in a Cookie header.
std::string CookieValue(absl::string_view header, absl::string_view name) {
  for (absl::string_view part : absl::StrSplit(header, ';')) {
    part = absl::StripAsciiWhitespace(part);
    if (absl::ConsumePrefix(&part, name) && absl::ConsumePrefix(&part, "=")) {
      return std::string(part);
    }
  }
  return "";
}

// A header value as it may appear in a message: printable ASCII, at most 100 characters.
std::string Printable(absl::string_view text) {
  std::string out;
  for (char c : text.substr(0, 100)) out.push_back(c >= 0x20 && c < 0x7f ? c : '?');
  return out;
}

// The host of a Host header or an origin's authority, lower case, without port, brackets or
// trailing dot ("Dash.Example.:8443" -> "dash.example", "[::1]:7300" -> "::1"); empty when
// it is not one.
std::string HostName(absl::string_view authority) {
  authority = absl::StripAsciiWhitespace(authority);
  std::string host;
  if (absl::ConsumePrefix(&authority, "[")) {
    const size_t close = authority.find(']');
    if (close == absl::string_view::npos) return "";
    const absl::string_view rest = authority.substr(close + 1);
    if (!rest.empty() && rest.front() != ':') return "";
    host = std::string(authority.substr(0, close));
  } else {
    const size_t colon = authority.find(':');
    if (colon != absl::string_view::npos &&
        authority.find(':', colon + 1) != absl::string_view::npos) {
      return "";  // an IPv6 address must be in brackets
    }
    host = std::string(authority.substr(0, colon));
  }
  absl::AsciiStrToLower(&host);
  while (!host.empty() && host.back() == '.') host.pop_back();
  return host;
}

// A host name or address as configured ("[::1]", "Dash.Example."), as HostName gives it.
std::string NormalHost(absl::string_view host) {
  host = absl::StripSuffix(absl::StripPrefix(absl::StripAsciiWhitespace(host), "["), "]");
  std::string out = absl::AsciiStrToLower(host);
  while (!out.empty() && out.back() == '.') out.pop_back();
  return out;
}

// The authority of a Host header or origin without the scheme's default port.
std::string Authority(absl::string_view authority, absl::string_view scheme) {
  std::string out = absl::AsciiStrToLower(absl::StripAsciiWhitespace(authority));
  const absl::string_view default_port = scheme == "https" ? ":443" : ":80";
  if (absl::EndsWith(out, default_port)) out.resize(out.size() - default_port.size());
  return out;
}

void SendJsonError(httplib::Response& response, int status, const std::string& message) {
  response.status = status;
  response.set_header("Cache-Control", "no-store");
  if (status == 401) response.set_header("WWW-Authenticate", "Bearer");
  response.set_content(nlohmann::json{{"error", message}}.dump() + "\n", kJson);
}

}  // namespace

std::vector<std::string> DefaultAllowedHosts(const std::string& listen_host) {
  std::vector<std::string> out = {"localhost", "localhost.localdomain", "127.0.0.1", "::1"};
  const std::string listen = NormalHost(listen_host);
  if (!listen.empty() && listen != "0.0.0.0" && listen != "::") {
    out.push_back(listen);
    return out;
  }
  // Every address of every interface: the addresses a wildcard listener is reached on.
  ifaddrs* addresses = nullptr;
  if (getifaddrs(&addresses) != 0) return out;
  for (ifaddrs* a = addresses; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr) continue;
    char text[INET6_ADDRSTRLEN] = {0};
    if (a->ifa_addr->sa_family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, text,
                sizeof(text));
    } else if (a->ifa_addr->sa_family == AF_INET6) {
      inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(a->ifa_addr)->sin6_addr, text,
                sizeof(text));
    }
    if (text[0] != '\0' && std::find(out.begin(), out.end(), text) == out.end()) {
      out.push_back(text);
    }
  }
  freeifaddrs(addresses);
  return out;
}

absl::StatusOr<std::unique_ptr<SignIn>> SignIn::Create(SignInOptions options) {
  std::unique_ptr<SignIn> signin(new SignIn(std::move(options)));
  for (std::string& host : signin->options_.allowed_hosts) {
    if (host != "*") host = NormalHost(host);
  }
  if (signin->options_.token_file.empty()) return signin;
  platform::AuthConfig config;
  config.enabled = true;
  for (absl::string_view entry :
       absl::StrSplit(signin->options_.token_file, ',', absl::SkipWhitespace())) {
    // ROLE:PATH is a file of one token a line of that role; PATH alone the scoped form.
    std::pair<absl::string_view, absl::string_view> role_path =
        absl::StrSplit(entry, absl::MaxSplits(':', 1));
    if (!role_path.second.empty() && platform::ParseRole(role_path.first).ok()) {
      config.files.push_back({std::string(role_path.second), std::string(role_path.first)});
    } else {
      config.files.push_back({std::string(entry), ""});
    }
  }
  absl::StatusOr<std::unique_ptr<platform::AuthPolicy>> policy =
      platform::AuthPolicy::Create(config);
  if (!policy.ok()) return policy.status();
  signin->policy_ = *std::move(policy);
  return signin;
}

void SignIn::Install(platform::HttpServer& http) {
  if (!enabled()) {
    if (!options_.allowed_hosts.empty()) {
      http.SetRequestGuard([this](const httplib::Request& request, httplib::Response& response) {
        return Guard(request, response);
      });
    }
    return;
  }
  http.native().Get("/login", [](const httplib::Request&, httplib::Response& response) {
    response.set_header("Cache-Control", "no-store");
    response.set_content(LoginPage(""), "text/html; charset=utf-8");
  });
  http.native().Post("/login", [this](const httplib::Request& request,
                                      httplib::Response& response) { Login(request, response); });
  http.native().Post("/logout", [this](const httplib::Request& request,
                                       httplib::Response& response) { Logout(request, response); });
  http.AddRouteName("GET /login");
  http.AddRouteName("POST /login");
  http.AddRouteName("POST /logout");
  http.SetRequestGuard([this](const httplib::Request& request, httplib::Response& response) {
    return Guard(request, response);
  });
}

namespace {

// The viewer a token's identity signs in as: an operator, or a token limited to a user or
// team; any other token is refused.
std::optional<Viewer> ViewerFor(const platform::Identity& identity, std::string* refusal) {
  if (identity.role == platform::Role::kOperator) {
    return Viewer{.user = identity.user, .is_operator = true, .scope = identity};
  }
  if (identity.OwnerScoped()) {
    return Viewer{.user = identity.user, .is_operator = false, .scope = identity};
  }
  *refusal = absl::StrCat("a ", platform::RoleName(identity.role),
                          " token without a user or team cannot sign in to the dashboard (an "
                          "operator token, or a token limited to a user or team, can)");
  return std::nullopt;
}

}  // namespace

std::optional<Viewer> SignIn::Identify(const httplib::Request& request, std::string* refusal) {
  if (!enabled()) return Viewer{.is_operator = true};
  const std::string authorization = request.get_header_value("Authorization");
  if (!authorization.empty()) {
    std::optional<platform::Identity> identity = policy_->Identify(authorization);
    if (!identity.has_value()) {
      *refusal = "the bearer token is not a known token";
      return std::nullopt;
    }
    return ViewerFor(*identity, refusal);
  }
  const std::string session = CookieValue(request.get_header_value("Cookie"), kCookie);
  if (!session.empty()) {
    if (std::optional<Viewer> viewer = Session(session)) return viewer;
  }
  if (!options_.trusted_proxy.empty() && request.remote_addr == options_.trusted_proxy) {
    const std::string user =
        std::string(absl::StripAsciiWhitespace(request.get_header_value(options_.user_header)));
    if (!user.empty()) {
      const bool is_operator =
          std::find(options_.operator_users.begin(), options_.operator_users.end(), user) !=
          options_.operator_users.end();
      platform::Identity scope;  // an operator's
      if (!is_operator)
        scope = platform::Identity{.role = platform::Role::kScheduler, .user = user};
      return Viewer{.user = user, .is_operator = is_operator, .scope = std::move(scope)};
    }
  }
  *refusal = "sign in first: POST /login with a token, or send \"Authorization: Bearer <token>\"";
  return std::nullopt;
}

bool SignIn::RefuseHost(const httplib::Request& request, httplib::Response& response) const {
  const std::vector<std::string>& allowed = options_.allowed_hosts;
  if (allowed.empty() || request.path == "/healthz" ||
      std::find(allowed.begin(), allowed.end(), "*") != allowed.end()) {
    return false;
  }
  if (!request.has_header("Host")) {
    SendJsonError(response, 400, "the request has no Host header");
    return true;
  }
  const std::string header = request.get_header_value("Host");
  const std::string host = HostName(header);
  if (!host.empty() && std::find(allowed.begin(), allowed.end(), host) != allowed.end()) {
    return false;
  }
  // 421 Misdirected Request: a name this dashboard does not answer to (DNS rebinding).
  SendJsonError(response, 421,
                absl::StrCat("Host \"", Printable(header),
                             "\" is not a name this dashboard answers to (--allowed-hosts)"));
  return true;
}

bool SignIn::RefuseCrossSite(const httplib::Request& request, httplib::Response& response) const {
  std::string refusal;
  const std::string fetch_site = request.get_header_value("Sec-Fetch-Site");
  if (!fetch_site.empty() && fetch_site != "same-origin" && fetch_site != "none") {
    refusal = absl::StrCat(
        "sign-in from another site is refused (Sec-Fetch-Site: ", Printable(fetch_site), ")");
  } else if (request.has_header("Origin")) {
    // The dashboard's own origin is the one its pages are served from: the Host the request
    // names (checked against the allow-list), over http or https (a proxy may end TLS).
    const std::string origin = request.get_header_value("Origin");
    const size_t scheme_end = origin.find("://");
    const std::string scheme = scheme_end == std::string::npos ? "" : origin.substr(0, scheme_end);
    const bool same = (scheme == "http" || scheme == "https") &&
                      Authority(origin.substr(scheme_end + 3), scheme) ==
                          Authority(request.get_header_value("Host"), scheme);
    if (!same) {
      refusal =
          absl::StrCat("sign-in from another site is refused (Origin: ", Printable(origin), ")");
    }
  }
  if (refusal.empty()) return false;
  response.status = 403;
  response.set_content(LoginPage(refusal), "text/html; charset=utf-8");
  return true;
}

bool SignIn::Guard(const httplib::Request& request, httplib::Response& response) {
  t_viewer.reset();
  t_still_signed_in = nullptr;
  if (RefuseHost(request, response)) return true;
  if (!enabled()) return false;
  if (request.path == "/login" || request.path == "/logout" || request.path == "/healthz") {
    return false;
  }
  std::string refusal;
  std::optional<Viewer> viewer = Identify(request, &refusal);
  if (viewer.has_value()) {
    t_viewer = std::move(viewer);
    // What signed the request in, for StillSignedIn: its bearer header, its session, or a
    // trusted proxy's user header (which has nothing to re-check).
    std::string authorization = request.get_header_value("Authorization");
    std::string session = CookieValue(request.get_header_value("Cookie"), kCookie);
    const bool via_proxy =
        !options_.trusted_proxy.empty() && request.remote_addr == options_.trusted_proxy &&
        !absl::StripAsciiWhitespace(request.get_header_value(options_.user_header)).empty();
    t_still_signed_in = [this, authorization = std::move(authorization),
                         session = std::move(session),
                         via_proxy] { return StillSignedIn(authorization, session, via_proxy); };
    return false;
  }
  const bool known_token_refused = absl::StrContains(refusal, "cannot sign in");
  if (absl::StartsWith(request.path, "/api/") || request.has_header("Authorization")) {
    SendJsonError(response, known_token_refused ? 403 : 401, refusal);
  } else {
    response.status = 303;
    response.set_header("Location", "/login");
    response.set_header("Cache-Control", "no-store");
  }
  return true;
}

std::optional<Viewer> SignIn::ViewerOf(const std::string& token, std::string* refusal) const {
  std::optional<platform::Identity> identity;
  if (!token.empty()) identity = policy_->Identify(absl::StrCat("Bearer ", token));
  if (!identity.has_value()) {
    *refusal = "the token is not a known token";
    return std::nullopt;
  }
  return ViewerFor(*identity, refusal);
}

void SignIn::Login(const httplib::Request& request, httplib::Response& response) {
  response.set_header("Cache-Control", "no-store");
  if (RefuseCrossSite(request, response)) return;
  std::string token = FormValue(request.body, "token");
  std::string refusal;
  std::optional<Viewer> viewer = ViewerOf(token, &refusal);
  if (!viewer.has_value()) {
    response.status = 401;
    response.set_content(LoginPage(refusal), "text/html; charset=utf-8");
    return;
  }
  const std::string id = NewSession(*std::move(viewer), std::move(token));
  response.status = 303;
  response.set_header("Location", "/");
  response.set_header(
      "Set-Cookie", absl::StrCat(kCookie, "=", id, "; Path=/; HttpOnly; SameSite=Strict; Max-Age=",
                                 absl::ToInt64Seconds(options_.session_ttl),
                                 options_.secure_cookie ? "; Secure" : ""));
}

void SignIn::Logout(const httplib::Request& request, httplib::Response& response) {
  const std::string session = CookieValue(request.get_header_value("Cookie"), kCookie);
  if (!session.empty()) {
    absl::MutexLock lock(&mu_);
    sessions_.erase(session);
  }
  response.status = 303;
  response.set_header("Location", "/login");
  response.set_header("Set-Cookie",
                      absl::StrCat(kCookie, "=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0",
                                   options_.secure_cookie ? "; Secure" : ""));
}

std::string SignIn::NewSession(Viewer viewer, std::string token) {
  std::array<unsigned char, 32> bytes{};
  size_t filled = 0;
  while (filled < bytes.size()) {
    const ssize_t n = getrandom(bytes.data() + filled, bytes.size() - filled, 0);
    if (n > 0) filled += static_cast<size_t>(n);
  }
  std::string id = absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  const absl::Time now = options_.now();
  absl::MutexLock lock(&mu_);
  // Forget expired sessions as new ones come.
  absl::erase_if(sessions_, [now](const auto& entry) { return entry.second.expires <= now; });
  sessions_[id] = SessionEntry{std::move(viewer), now + options_.session_ttl, std::move(token)};
  return id;
}

std::optional<Viewer> SignIn::Session(const std::string& id) {
  std::string token;
  {
    absl::MutexLock lock(&mu_);
    auto it = sessions_.find(id);
    if (it == sessions_.end()) return std::nullopt;
    if (it->second.expires <= options_.now()) {
      sessions_.erase(it);
      return std::nullopt;
    }
    token = it->second.token;
  }
  // The token as the token files say now: removed or rotated, the session ends; a changed
  // role or user applies to it at once.
  std::string refusal;
  std::optional<Viewer> viewer = ViewerOf(token, &refusal);
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return std::nullopt;
  if (!viewer.has_value()) {
    sessions_.erase(it);
    return std::nullopt;
  }
  it->second.viewer = *viewer;
  return viewer;
}

bool SignIn::StillSignedIn(const std::string& authorization, const std::string& session,
                           bool via_proxy) {
  if (!authorization.empty()) {
    std::optional<platform::Identity> identity = policy_->Identify(authorization);
    return identity.has_value() &&
           (identity->role == platform::Role::kOperator || !identity->user.empty());
  }
  return (!session.empty() && Session(session).has_value()) || via_proxy;
}

std::optional<Viewer> CurrentViewer() { return t_viewer; }

std::function<bool()> ViewerStillSignedIn() {
  if (t_still_signed_in) return t_still_signed_in;
  return [] { return true; };
}

std::optional<std::string> ViewerUserScope() {
  if (!t_viewer.has_value()) return std::nullopt;
  return t_viewer->scope.UserScope();
}

std::optional<platform::Identity> ViewerScope() {
  if (!t_viewer.has_value()) return std::nullopt;
  return t_viewer->scope;
}

}  // namespace goodput::dashboard
