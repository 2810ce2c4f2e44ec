#include "services/platform/config.h"

#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "services/platform/auth.h"

extern char** environ;

namespace goodput::platform {
namespace {

constexpr absl::string_view kEnvPrefix = "GOODPUT_";

std::vector<std::string> SplitKey(absl::string_view key) {
  return absl::StrSplit(key, '.', absl::SkipEmpty());
}

std::string KindName(const YAML::Node& node) {
  if (node.IsMap()) return "a mapping";
  if (node.IsSequence()) return "a list";
  return "a value";
}

absl::Status BadValue(absl::string_view key, absl::string_view value, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("config key ", key, ": \"", value, "\" ", what));
}

// Returns the child of `map` named `name` (exact match), or an undefined node.
YAML::Node Child(const YAML::Node& map, absl::string_view name) {
  YAML::Node found;
  if (!map.IsMap()) return found;
  for (const auto& kv : map) {
    if (kv.first.IsScalar() && kv.first.Scalar() == name) {
      found.reset(kv.second);
      return found;
    }
  }
  return found;
}

// Applies one override, creating mappings along the path. Existing keys are matched
// case-insensitively so that upper-case environment names reach mixed-case file keys.
void ApplyOverride(YAML::Node& root, const std::vector<std::string>& path,
                   const std::string& value) {
  YAML::Node cur;
  cur.reset(root);
  for (size_t i = 0; i < path.size(); ++i) {
    std::string name = path[i];
    for (const auto& kv : cur) {
      if (kv.first.IsScalar() && absl::AsciiStrToLower(kv.first.Scalar()) == name) {
        name = kv.first.Scalar();
        break;
      }
    }
    if (i + 1 == path.size()) {
      cur[name] = value;
      return;
    }
    YAML::Node next = cur[name];
    if (!next.IsMap()) {
      cur[name] = YAML::Node(YAML::NodeType::Map);
      next.reset(cur[name]);
    }
    cur.reset(next);
  }
}

// The tls.* keys; every file named must be readable (checked again, with the contents, when
// the credentials are built: tls.h).
absl::Status ParseTlsConfig(const ConfigTree& tree, TlsConfig& tls) {
  for (auto [key, field] :
       {std::pair{"tls.cert_file", &tls.cert_file}, std::pair{"tls.key_file", &tls.key_file},
        std::pair{"tls.client_ca_file", &tls.client_ca_file},
        std::pair{"tls.ca_file", &tls.ca_file},
        std::pair{"tls.client_cert_file", &tls.client_cert_file},
        std::pair{"tls.client_key_file", &tls.client_key_file}}) {
    absl::StatusOr<std::string> path = tree.GetString(key, "");
    if (!path.ok()) return path.status();
    *field = *path;
    if (!field->empty() && !std::ifstream(*field)) {
      return BadValue(key, *field, "cannot be read");
    }
  }
  absl::StatusOr<std::string> name = tree.GetString("tls.server_name", "");
  if (!name.ok()) return name.status();
  tls.server_name = *name;
  absl::StatusOr<absl::Duration> reload = tree.GetSeconds("tls.reload_interval_s", 60);
  if (!reload.ok()) return reload.status();
  if (*reload < absl::Seconds(1)) {
    return BadValue("tls.reload_interval_s", absl::StrCat(absl::ToDoubleSeconds(*reload)),
                    "is below 1 second");
  }
  tls.reload_interval = *reload;
  absl::StatusOr<bool> http = tree.GetBool("tls.http", true);
  if (!http.ok()) return http.status();
  tls.http = *http;
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    return absl::InvalidArgumentError(
        "config keys tls.cert_file and tls.key_file: set both or neither");
  }
  if (tls.client_cert_file.empty() != tls.client_key_file.empty()) {
    return absl::InvalidArgumentError(
        "config keys tls.client_cert_file and tls.client_key_file: set both or neither");
  }
  if (!tls.client_ca_file.empty() && tls.cert_file.empty()) {
    return BadValue("tls.client_ca_file", tls.client_ca_file,
                    "needs tls.cert_file and tls.key_file (client certificates are checked only "
                    "on TLS connections)");
  }
  return absl::OkStatus();
}

}  // namespace

EnvironmentMap ProcessEnvironment() {
  EnvironmentMap env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    absl::string_view kv(*entry);
    size_t eq = kv.find('=');
    if (eq == absl::string_view::npos) continue;
    absl::string_view name = kv.substr(0, eq);
    if (!absl::StartsWith(name, kEnvPrefix)) continue;
    env.emplace(std::string(name), std::string(kv.substr(eq + 1)));
  }
  return env;
}

std::optional<std::string> EnvVarToKey(absl::string_view var) {
  if (!absl::ConsumePrefix(&var, kEnvPrefix) || var.empty()) return std::nullopt;
  std::vector<std::string> parts = absl::StrSplit(var, "__");
  for (std::string& part : parts) {
    if (part.empty()) return std::nullopt;
    absl::AsciiStrToLower(&part);
  }
  return absl::StrJoin(parts, ".");
}

absl::StatusOr<ConfigTree> ConfigTree::LoadString(absl::string_view yaml_text,
                                                  const EnvironmentMap& env) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml_text));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("config does not parse as YAML: line ",
                                                   e.mark.line + 1, ", column ", e.mark.column + 1,
                                                   ": ", e.msg));
  }
  if (root.IsNull() || !root.IsDefined()) root = YAML::Node(YAML::NodeType::Map);
  if (!root.IsMap()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config must be a mapping of sections at the top level, found ", KindName(root)));
  }
  for (const auto& [name, value] : env) {
    std::optional<std::string> key = EnvVarToKey(name);
    if (!key.has_value()) continue;
    ApplyOverride(root, SplitKey(*key), value);
  }
  return ConfigTree(root);
}

absl::StatusOr<ConfigTree> ConfigTree::LoadFile(const std::string& path,
                                                const EnvironmentMap& env) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("config file \"", path, "\" cannot be read"));
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<ConfigTree> tree = LoadString(text.str(), env);
  if (!tree.ok()) {
    return absl::Status(tree.status().code(), absl::StrCat(path, ": ", tree.status().message()));
  }
  return tree;
}

std::optional<YAML::Node> ConfigTree::Find(absl::string_view key) const {
  YAML::Node cur;
  cur.reset(root_);
  for (const std::string& part : SplitKey(key)) {
    YAML::Node next = Child(cur, part);
    if (!next.IsDefined()) return std::nullopt;
    cur.reset(next);
  }
  return cur;
}

bool ConfigTree::Has(absl::string_view key) const {
  std::optional<YAML::Node> node = Find(key);
  return node.has_value() && !node->IsNull();
}

absl::StatusOr<std::optional<std::string>> ConfigTree::Scalar(absl::string_view key) const {
  std::optional<YAML::Node> node = Find(key);
  if (!node.has_value() || node->IsNull()) return std::optional<std::string>();
  if (!node->IsScalar()) {
    return absl::InvalidArgumentError(
        absl::StrCat("config key ", key, ": expected a single value, found ", KindName(*node)));
  }
  return std::optional<std::string>(node->Scalar());
}

absl::StatusOr<std::string> ConfigTree::GetString(absl::string_view key,
                                                  absl::string_view fallback) const {
  absl::StatusOr<std::optional<std::string>> value = Scalar(key);
  if (!value.ok()) return value.status();
  return value->has_value() ? **value : std::string(fallback);
}

absl::StatusOr<int64_t> ConfigTree::GetInt(absl::string_view key, int64_t fallback) const {
  absl::StatusOr<std::optional<std::string>> value = Scalar(key);
  if (!value.ok()) return value.status();
  if (!value->has_value()) return fallback;
  int64_t parsed = 0;
  if (!absl::SimpleAtoi(**value, &parsed)) return BadValue(key, **value, "is not an integer");
  return parsed;
}

absl::StatusOr<int64_t> ConfigTree::GetIntInRange(absl::string_view key, int64_t fallback,
                                                  int64_t min, int64_t max) const {
  absl::StatusOr<int64_t> value = GetInt(key, fallback);
  if (!value.ok()) return value.status();
  if (*value < min || *value > max) {
    return BadValue(key, absl::StrCat(*value), absl::StrCat("is outside [", min, ", ", max, "]"));
  }
  return value;
}

absl::StatusOr<double> ConfigTree::GetDouble(absl::string_view key, double fallback) const {
  absl::StatusOr<std::optional<std::string>> value = Scalar(key);
  if (!value.ok()) return value.status();
  if (!value->has_value()) return fallback;
  double parsed = 0;
  if (!absl::SimpleAtod(**value, &parsed)) return BadValue(key, **value, "is not a number");
  return parsed;
}

absl::StatusOr<bool> ConfigTree::GetBool(absl::string_view key, bool fallback) const {
  absl::StatusOr<std::optional<std::string>> value = Scalar(key);
  if (!value.ok()) return value.status();
  if (!value->has_value()) return fallback;
  std::string lower = absl::AsciiStrToLower(absl::StripAsciiWhitespace(**value));
  if (lower == "true" || lower == "yes" || lower == "on" || lower == "1") return true;
  if (lower == "false" || lower == "no" || lower == "off" || lower == "0") return false;
  return BadValue(key, **value, "is not a boolean (true|false)");
}

absl::StatusOr<std::vector<std::string>> ConfigTree::GetStringList(absl::string_view key) const {
  std::optional<YAML::Node> node = Find(key);
  std::vector<std::string> out;
  if (!node.has_value() || node->IsNull()) return out;
  if (node->IsScalar()) {
    for (absl::string_view item : absl::StrSplit(node->Scalar(), ',')) {
      item = absl::StripAsciiWhitespace(item);
      if (!item.empty()) out.emplace_back(item);
    }
    return out;
  }
  if (!node->IsSequence()) {
    return absl::InvalidArgumentError(
        absl::StrCat("config key ", key, ": expected a list, found ", KindName(*node)));
  }
  for (size_t i = 0; i < node->size(); ++i) {
    const YAML::Node item = (*node)[i];
    if (!item.IsScalar()) {
      return absl::InvalidArgumentError(
          absl::StrCat("config key ", key, "[", i, "]: expected a value, found ", KindName(item)));
    }
    out.push_back(item.Scalar());
  }
  return out;
}

absl::StatusOr<absl::Duration> ConfigTree::GetSeconds(absl::string_view key,
                                                      double fallback_s) const {
  absl::StatusOr<double> seconds = GetDouble(key, fallback_s);
  if (!seconds.ok()) return seconds.status();
  if (!(*seconds >= 0)) return BadValue(key, absl::StrCat(*seconds), "is not >= 0 seconds");
  return absl::Seconds(*seconds);
}

std::vector<std::string> ConfigTree::ChildKeys(absl::string_view key) const {
  std::vector<std::string> keys;
  std::optional<YAML::Node> node = key.empty() ? std::optional<YAML::Node>(root_) : Find(key);
  if (!node.has_value() || !node->IsMap()) return keys;
  for (const auto& kv : *node) {
    if (kv.first.IsScalar()) keys.push_back(kv.first.Scalar());
  }
  return keys;
}

absl::StatusOr<ServiceConfig> ParseServiceConfig(const ConfigTree& tree,
                                                 absl::string_view default_name,
                                                 const std::vector<std::string>& service_sections) {
  ServiceConfig config;
#define GOODPUT_ASSIGN_OR_RETURN(lhs, expr)       \
  {                                               \
    auto value_or = (expr);                       \
    if (!value_or.ok()) return value_or.status(); \
    lhs = *std::move(value_or);                   \
  }
  GOODPUT_ASSIGN_OR_RETURN(config.service_name, tree.GetString("service.name", default_name));
  GOODPUT_ASSIGN_OR_RETURN(config.grpc_host, tree.GetString("grpc.host", config.grpc_host));
  GOODPUT_ASSIGN_OR_RETURN(config.grpc_port, tree.GetIntInRange("grpc.port", 0, 0, 65535));
  GOODPUT_ASSIGN_OR_RETURN(config.http_host, tree.GetString("http.host", config.http_host));
  GOODPUT_ASSIGN_OR_RETURN(config.http_port, tree.GetIntInRange("http.port", 0, 0, 65535));
  if (tree.Has("http.probe_port")) {
    GOODPUT_ASSIGN_OR_RETURN(config.http_probe_port,
                             tree.GetIntInRange("http.probe_port", 0, 0, 65535));
  }
  HttpLimits& limits = config.http_limits;
  GOODPUT_ASSIGN_OR_RETURN(limits.threads,
                           tree.GetIntInRange("http.threads", limits.threads, 1, 4096));
  GOODPUT_ASSIGN_OR_RETURN(
      limits.max_queued_connections,
      tree.GetIntInRange("http.max_queued_connections", limits.max_queued_connections, 0, 1 << 16));
  GOODPUT_ASSIGN_OR_RETURN(
      limits.max_header_bytes,
      tree.GetIntInRange("http.max_header_bytes", limits.max_header_bytes, 1 << 10, 16 << 20));
  GOODPUT_ASSIGN_OR_RETURN(
      limits.max_body_bytes,
      tree.GetIntInRange("http.max_body_bytes", limits.max_body_bytes, 0, int64_t{1} << 30));
  GOODPUT_ASSIGN_OR_RETURN(
      limits.max_connections,
      tree.GetIntInRange("http.max_connections", limits.max_connections, 1, 1 << 20));
  GOODPUT_ASSIGN_OR_RETURN(limits.max_connections_per_client,
                           tree.GetIntInRange("http.max_connections_per_client",
                                              limits.max_connections_per_client, 1, 1 << 20));
  for (auto [key, field] : {std::pair{"http.read_timeout_s", &limits.read_timeout},
                            std::pair{"http.header_timeout_s", &limits.header_timeout},
                            std::pair{"http.request_timeout_s", &limits.request_timeout},
                            std::pair{"http.idle_timeout_s", &limits.idle_timeout},
                            std::pair{"http.write_timeout_s", &limits.write_timeout}}) {
    GOODPUT_ASSIGN_OR_RETURN(*field, tree.GetSeconds(key, absl::ToDoubleSeconds(*field)));
    if (*field < absl::Milliseconds(1)) {
      return BadValue(key, absl::StrCat(absl::ToDoubleSeconds(*field)), "is not a duration > 0");
    }
  }
  GOODPUT_ASSIGN_OR_RETURN(config.postgres.dsn, tree.GetString("postgres.dsn", ""));
  GOODPUT_ASSIGN_OR_RETURN(config.postgres.pool_size,
                           tree.GetIntInRange("postgres.pool_size", 4, 1, 1024));
  GOODPUT_ASSIGN_OR_RETURN(config.redis.host, tree.GetString("redis.host", config.redis.host));
  GOODPUT_ASSIGN_OR_RETURN(config.redis.port, tree.GetIntInRange("redis.port", 6379, 1, 65535));
  GOODPUT_ASSIGN_OR_RETURN(config.redis.password, tree.GetString("redis.password", ""));
  GOODPUT_ASSIGN_OR_RETURN(config.redis.db, tree.GetIntInRange("redis.db", 0, 0, 65535));
  GOODPUT_ASSIGN_OR_RETURN(config.log.level, tree.GetString("log.level", "info"));
  std::string format;
  GOODPUT_ASSIGN_OR_RETURN(format, tree.GetString("log.format", "json"));
  GOODPUT_ASSIGN_OR_RETURN(config.auth.enabled, tree.GetBool("auth.enabled", false));
  GOODPUT_ASSIGN_OR_RETURN(config.shutdown_drain_timeout,
                           tree.GetSeconds("shutdown.drain_timeout_s", 10));
#undef GOODPUT_ASSIGN_OR_RETURN

  if (config.service_name.empty()) return BadValue("service.name", "", "must not be empty");
  if (config.http_probe_port > 0 && config.http_probe_port == config.http_port) {
    return BadValue("http.probe_port", absl::StrCat(config.http_probe_port),
                    "is also http.port; the probe listener needs a port of its own");
  }
  static const std::set<std::string, std::less<>> kLevels = {"trace", "debug",    "info", "warn",
                                                             "error", "critical", "off"};
  config.log.level = absl::AsciiStrToLower(config.log.level);
  if (!kLevels.contains(config.log.level)) {
    return BadValue("log.level", config.log.level,
                    "is not one of trace|debug|info|warn|error|critical|off");
  }
  if (format == "json") {
    config.log.format = LogFormat::kJson;
  } else if (format == "text") {
    config.log.format = LogFormat::kText;
  } else {
    return BadValue("log.format", format, "is not one of json|text");
  }

  // Tokens: inline lists and files, per role, and the scoped token file. Token values never
  // appear in messages.
  auto add_token = [&config](const std::string& key, std::string token,
                             const std::string& role) -> absl::Status {
    for (const auto& [existing, existing_role] : config.auth.tokens) {
      if (existing == token && existing_role != role) {
        return absl::InvalidArgumentError(absl::StrCat(
            "config key ", key, ": a token is also configured for role ", existing_role));
      }
    }
    config.auth.tokens.emplace_back(std::move(token), role);
    return absl::OkStatus();
  };
  for (absl::string_view section : {"auth.tokens", "auth.token_files"}) {
    for (const std::string& role : tree.ChildKeys(section)) {
      std::string key = absl::StrCat(section, ".", role);
      absl::StatusOr<Role> parsed_role = ParseRole(role);
      if (!parsed_role.ok()) {
        return BadValue(key, role,
                        absl::StrCat("is not a role (", absl::StrJoin(kRoleNames, ", "), ")"));
      }
      if (section == "auth.tokens") {
        absl::StatusOr<std::vector<std::string>> tokens = tree.GetStringList(key);
        if (!tokens.ok()) return tokens.status();
        for (std::string& token : *tokens) {
          if (absl::Status s = add_token(key, std::move(token), role); !s.ok()) return s;
        }
        config.auth.inline_tokens = config.auth.tokens.size();
        continue;
      }
      absl::StatusOr<std::string> path = tree.GetString(key, "");
      if (!path.ok()) return path.status();
      absl::StatusOr<std::vector<TokenGrant>> grants = ReadTokenFile(*path, *parsed_role);
      if (!grants.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("config key ", key, ": ", grants.status().message()));
      }
      for (TokenGrant& grant : *grants) {
        if (absl::Status s = add_token(key, std::move(grant.token), role); !s.ok()) return s;
      }
      config.auth.files.push_back({*path, role});
    }
  }
  if (tree.Has("auth.token_file")) {
    absl::StatusOr<std::string> path = tree.GetString("auth.token_file", "");
    if (!path.ok()) return path.status();
    absl::StatusOr<std::vector<TokenGrant>> grants = ReadTokenFile(*path, std::nullopt);
    if (!grants.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("config key auth.token_file: ", grants.status().message()));
    }
    for (TokenGrant& grant : *grants) {
      std::string role(RoleName(grant.identity.role));
      if (absl::Status s = add_token("auth.token_file", std::move(grant.token), role); !s.ok()) {
        return s;
      }
    }
    config.auth.files.push_back({*path, ""});
  }
  {
    absl::StatusOr<bool> metrics_auth = tree.GetBool("auth.metrics", false);
    if (!metrics_auth.ok()) return metrics_auth.status();
    config.auth.metrics_auth = *metrics_auth;
  }
  if (absl::Status s = ParseTlsConfig(tree, config.tls); !s.ok()) return s;
  if (config.auth.enabled && config.auth.tokens.empty()) {
    return absl::InvalidArgumentError(
        "config key auth.enabled: \"true\" but no tokens are configured under auth.tokens, "
        "auth.token_files or auth.token_file");
  }

  std::set<std::string, std::less<>> known = {"service", "grpc", "http", "postgres", "redis",
                                              "log",     "auth", "tls",  "shutdown", "migrations"};
  known.insert(service_sections.begin(), service_sections.end());
  for (const std::string& key : tree.ChildKeys("")) {
    if (!known.contains(key)) {
      config.warnings.push_back(absl::StrCat(
          "unknown config key \"", key, "\" is ignored (known: ", absl::StrJoin(known, ", "), ")"));
    }
  }
  return config;
}

}  // namespace goodput::platform
