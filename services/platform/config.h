// Service configuration: a YAML file plus environment overrides, read through typed accessors
// that name the offending key and value when something is wrong.
//
// Environment mapping rule: a variable `GOODPUT_<PATH>` overrides the key whose dotted path,
// upper-cased, with every `.` written as a double underscore `__`, equals <PATH>. Single
// underscores stay part of a key name:
//
//   GOODPUT_POSTGRES__DSN        -> postgres.dsn
//   GOODPUT_POSTGRES__POOL_SIZE  -> postgres.pool_size
//   GOODPUT_AUTH__TOKENS__SDK    -> auth.tokens.sdk   (lists: comma-separated)
//
// Keys are matched case-insensitively against the file's keys; an override for a key the file
// does not mention creates it (lower-case). Override values are strings and go through the same
// typed parsing as file values.
//
// Usage in a service main():
//
//   absl::StatusOr<ConfigTree> tree = ConfigTree::LoadFile(path);
//   absl::StatusOr<ServiceConfig> config = ParseServiceConfig(*tree, "goodput-ingest", {"ingest"});
//   if (!config.ok()) { std::cerr << config.status().message() << "\n"; return 2; }
//   absl::StatusOr<int64_t> batch = tree->GetInt("ingest.max_batch_samples", 10000);
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "yaml-cpp/yaml.h"

namespace goodput::platform {

// Environment variables as name -> value (only those starting with "GOODPUT_" matter).
using EnvironmentMap = std::map<std::string, std::string, std::less<>>;

// Reads the current process environment.
EnvironmentMap ProcessEnvironment();

// A parsed configuration document with environment overrides applied. Cheap to copy.
class ConfigTree {
 public:
  // Parses `yaml_text` (may be empty) and applies overrides from `env`.
  // INVALID_ARGUMENT names the line when the YAML does not parse.
  static absl::StatusOr<ConfigTree> LoadString(absl::string_view yaml_text,
                                               const EnvironmentMap& env = {});
  // Reads and parses the file at `path`; NOT_FOUND names the path when it cannot be read.
  static absl::StatusOr<ConfigTree> LoadFile(const std::string& path,
                                             const EnvironmentMap& env = ProcessEnvironment());

  // True when the dotted key exists (in the file or from the environment).
  bool Has(absl::string_view key) const;

  // Typed accessors: `fallback` when the key is absent, INVALID_ARGUMENT of the form
  // `config key grpc.port: "abc" is not an integer` when present but malformed.
  absl::StatusOr<std::string> GetString(absl::string_view key, absl::string_view fallback) const;
  absl::StatusOr<int64_t> GetInt(absl::string_view key, int64_t fallback) const;
  // Like GetInt, also refusing values outside [min, max] with the range in the message.
  absl::StatusOr<int64_t> GetIntInRange(absl::string_view key, int64_t fallback, int64_t min,
                                        int64_t max) const;
  absl::StatusOr<double> GetDouble(absl::string_view key, double fallback) const;
  // Accepts true/false, yes/no, on/off, 1/0 (any case).
  absl::StatusOr<bool> GetBool(absl::string_view key, bool fallback) const;
  // Accepts a YAML sequence of scalars or one comma-separated string; absent -> empty.
  absl::StatusOr<std::vector<std::string>> GetStringList(absl::string_view key) const;
  // A duration in seconds (`drain_timeout_s: 2.5`).
  absl::StatusOr<absl::Duration> GetSeconds(absl::string_view key, double fallback_s) const;

  // Names of the children of a mapping key ("" = top level), in file order.
  std::vector<std::string> ChildKeys(absl::string_view key) const;

  // The underlying document, for services with structured sections (lists of maps).
  const YAML::Node& root() const { return root_; }

 private:
  explicit ConfigTree(YAML::Node root) : root_(std::move(root)) {}
  std::optional<YAML::Node> Find(absl::string_view key) const;
  absl::StatusOr<std::optional<std::string>> Scalar(absl::string_view key) const;

  YAML::Node root_;
};

enum class LogFormat { kJson, kText };

struct PostgresConfig {
  std::string dsn;    // libpq connection string or URI; empty = not used by this service
  int pool_size = 4;  // connections kept open
};

struct RedisConfig {
  std::string host = "127.0.0.1";
  int port = 6379;
  std::string password;  // empty = no AUTH
  int db = 0;
};

struct LogConfig {
  std::string level = "info";  // trace|debug|info|warn|error|critical|off
  LogFormat format = LogFormat::kJson;
};

// Bearer tokens per role. Roles are scheduler, telemetry, sdk, operator, service (auth.h).
struct AuthConfig {
  // A token file, re-read when it changes: one token per line of `role`, or, with `role`
  // empty, `TOKEN ROLE [clusters=A,B] [user=NAME] [team=NAME]` lines (auth.h, ReadTokenFile).
  struct TokenFile {
    std::string path;
    std::string role;
  };
  bool enabled = false;
  // token -> role name, from auth.tokens.<role> (list) and auth.token_files.<role> (a file with
  // one token per line, '#' comments), e.g. a mounted Kubernetes secret, and auth.token_file;
  // the first `inline_tokens` come from auth.tokens, the rest as the files read at start-up.
  std::vector<std::pair<std::string, std::string>> tokens;
  size_t inline_tokens = 0;
  std::vector<TokenFile> files;
  // http.metrics_auth: /metrics needs a token too (any known token).
  bool metrics_auth = false;
};

// TLS for the service's listeners and for its calls to other goodput services (tls.h). With
// cert_file and key_file set, gRPC and HTTP serve TLS; with client_ca_file as well, gRPC
// clients must present a certificate it signed (mTLS). With ca_file set, the service's own
// gRPC clients use TLS and trust that CA, presenting client_cert_file/client_key_file (else
// cert_file/key_file) when they are set. Changed files are picked up without a restart:
// gRPC checks every reload_interval, HTTP at each new connection.
struct TlsConfig {
  std::string cert_file = {};
  std::string key_file = {};
  std::string client_ca_file = {};
  std::string ca_file = {};
  std::string client_cert_file = {};
  std::string client_key_file = {};
  std::string server_name = {};  // the name the called services' certificates must hold
  absl::Duration reload_interval = absl::Seconds(60);
  bool http = true;  // HTTPS on the HTTP listeners when cert_file is set

  bool serves_tls() const { return !cert_file.empty(); }
  bool calls_with_tls() const { return !ca_file.empty(); }
};

// What protects an HTTP listener from large bodies and from slow or numerous clients.
//
// A connection costs a thread only while a request is being served: until a request's line
// and headers are all in (and between the requests of a kept-alive connection) it waits in
// the listener's one readiness loop, costing a file descriptor and what it sent. The headers
// must arrive within `header_timeout` of the connection (or of the request's first byte on a
// kept-alive connection; else 408) and hold at most `max_header_bytes` (else 431). A listener
// holds at most `max_connections` connections, and `max_connections_per_client` of one
// source address; a connection beyond either takes the place of the one (of that client,
// for its own limit) that has waited longest for its headers, or is answered 503 with
// Retry-After when none is waiting. Once its headers are in, a request goes to one of
// `threads` connection threads, `max_queued_connections` more waiting for one (503 with
// Retry-After beyond). Its body must arrive whole within `request_timeout` of its first byte
// with no silence longer than `read_timeout` (else 408) and hold at most `max_body_bytes` as
// sent (413 on a Content-Length above it, before reading; a chunked body is cut off there).
// A kept-alive connection waits `idle_timeout` for its next request; a response not taken by
// the client for `write_timeout` is abandoned.
struct HttpLimits {
  int threads = 16;
  int max_queued_connections = 64;
  int64_t max_header_bytes = 64 << 10;
  int64_t max_body_bytes = 1 << 20;
  absl::Duration read_timeout = absl::Seconds(10);
  absl::Duration request_timeout = absl::Seconds(60);
  absl::Duration idle_timeout = absl::Seconds(5);
  absl::Duration write_timeout = absl::Seconds(10);
  absl::Duration header_timeout = absl::Seconds(10);
  int max_connections = 4096;
  int max_connections_per_client = 128;
};

// What every goodput service needs. Keys (defaults in brackets):
//   service.name [default_name]
//   grpc.host [0.0.0.0], grpc.port [0 = any free port]
//   http.host [0.0.0.0], http.port [0 = any free port]   (/metrics, /healthz, service routes)
//   http.probe_port [absent = none; 0 = any free port]    a listener of its own for /healthz
//       and /metrics, so that probes and scrapes are answered while the main port is
//       saturated (both stay on http.port too)
//   http.threads [16], http.max_queued_connections [64], http.max_header_bytes [65536],
//   http.max_body_bytes [1048576], http.read_timeout_s [10], http.request_timeout_s [60],
//   http.idle_timeout_s [5], http.write_timeout_s [10], http.header_timeout_s [10],
//   http.max_connections [4096], http.max_connections_per_client [128]   (HttpLimits; routes
//       may set their own body limit, e.g. ingest.remote_write.max_body_bytes; a route that
//       needs a token is refused 401/403 from its headers, before its body is read)
//   postgres.dsn [""], postgres.pool_size [4]
//   redis.host [127.0.0.1], redis.port [6379], redis.password [""], redis.db [0]
//   log.level [info], log.format [json]   (json|text)
//   auth.enabled [false], auth.tokens.<role>, auth.token_files.<role>, auth.token_file
//       (scoped tokens), auth.metrics [false] (/metrics needs a token when auth is on)
//   tls.cert_file, tls.key_file, tls.client_ca_file, tls.ca_file, tls.client_cert_file,
//   tls.client_key_file, tls.server_name [""], tls.reload_interval_s [60], tls.http [true]
//       (TlsConfig)
//   shutdown.drain_timeout_s [10]
//   migrations.dir [./migrations, else the installed /usr/share/goodput/migrations]   (read by
//       service_main.cc for --migrate)
struct ServiceConfig {
  std::string service_name;
  std::string grpc_host = "0.0.0.0";
  int grpc_port = 0;
  std::string http_host = "0.0.0.0";
  int http_port = 0;
  int http_probe_port = -1;  // -1: no probe listener
  HttpLimits http_limits;
  PostgresConfig postgres;
  RedisConfig redis;
  LogConfig log;
  AuthConfig auth;
  TlsConfig tls;
  absl::Duration shutdown_drain_timeout = absl::Seconds(10);
  // Non-fatal findings (unknown top-level keys) to log once the logger exists.
  std::vector<std::string> warnings;
};

// Reads and validates the common keys. `service_sections` are the service's own top-level keys;
// any other unknown top-level key becomes a warning. The first bad key is the error.
absl::StatusOr<ServiceConfig> ParseServiceConfig(
    const ConfigTree& tree, absl::string_view default_name,
    const std::vector<std::string>& service_sections = {});

// Maps an environment variable name to its dotted key ("GOODPUT_POSTGRES__DSN" ->
// "postgres.dsn"); nullopt for variables without the prefix.
std::optional<std::string> EnvVarToKey(absl::string_view var);

}  // namespace goodput::platform
