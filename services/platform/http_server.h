// The HTTP side of every service: Prometheus `/metrics` and `/healthz`, plus any routes a
// service adds (remote_write receiver, dashboard) before Start().
//
//   HttpServer http(HttpServerOptionsFrom(config), &metrics,
//                   [&] { return server.serving() ? absl::OkStatus()
//                                                 : absl::UnavailableError("draining"); });
//   http.Post("/api/v1/write", HandleRemoteWrite,
//             {.max_bytes = 16 << 20, .config_key = "ingest.remote_write.max_body_bytes"});
//   if (absl::Status s = http.Start(); !s.ok()) { ...exit 1... }
//   ... http.port(), http.probe_port() ...
//   http.Stop();
//
// With tls.cert_file set every listener serves HTTPS, its certificate re-read when the files
// change (tls.h). `/healthz` answers 200 "ok" when the health check returns OK and 503 with its
// message otherwise; `/metrics` answers the registry in text format 0.0.4. Every listener enforces
// HttpLimits (config.h, guarded_http_server.h): bodies above the limit are refused while
// reading, slow clients are cut off, and connections beyond the pool are answered 503 with
// Retry-After. With a probe port, `/healthz` and `/metrics` are also served on a listener
// of their own, so that probes and scrapes are answered while the main port is saturated.
//
// With an AuthPolicy (options.auth), every route whose name ("POST /api/v1/write") the policy
// gives roles to (AllowMethod), and every route named with RequireToken, is checked from its
// headers: a request without a token the policy admits is answered 401 or 403 before its
// body is read, without "100 Continue", and its connection closed. The handler checks again
// (and takes the caller's identity); the check here is what keeps unauthenticated clients
// from costing memory.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "httplib.h"
#include "services/platform/auth.h"
#include "services/platform/config.h"
#include "services/platform/guarded_http_server.h"
#include "services/platform/metrics.h"

namespace goodput::platform {

struct HttpServerOptions {
  std::string host = "0.0.0.0";
  int port = 0;  // 0 = any free port; HttpServer::port() tells which
  // A listener of its own for /healthz and /metrics: -1 = none, 0 = any free port.
  int probe_port = -1;
  HttpLimits limits = {};
  // HTTPS on every listener when tls.serves_tls() (tls.h); plaintext otherwise.
  TlsConfig tls = {};
  // When set, /metrics answers only requests with a token it knows (any role): 401 otherwise.
  // /healthz stays open for probes. Must outlive the server.
  const AuthPolicy* metrics_auth = nullptr;
  // When set, the routes it gives roles to (and those named with RequireToken) are refused
  // from their headers without a token it admits. Must outlive the server.
  const AuthPolicy* auth = nullptr;
};

// Options from the common config keys (http.*; tls.* unless tls.http is false; `auth`, which
// may be null, when auth.enabled, for /metrics too with auth.metrics).
HttpServerOptions HttpServerOptionsFrom(const ServiceConfig& config,
                                        const AuthPolicy* auth = nullptr);

// The body limit of a route, instead of http.max_body_bytes; `config_key` names it in the 413.
struct BodyLimit {
  int64_t max_bytes = 0;
  std::string config_key;
};

// How a route's token is checked from its headers (HttpServer::RequireToken).
struct TokenCheck {
  // The policy's entry whose roles the route takes (AuthPolicy::AllowMethod): an HTTP route
  // name ("POST /api/v1/write") or a gRPC method ("/goodput.v1.JobService/RegisterJob").
  std::string policy_route;
  // Writes the refusal into the response, for a route that answers in its own format; unset:
  // the message as text/plain, with `WWW-Authenticate: Bearer` on 401.
  std::function<void(const HttpRefusal&, httplib::Response&)> answer = nullptr;
};

class HttpServer {
 public:
  // OK = healthy; otherwise the message is the reason shown by /healthz.
  using HealthCheck = std::function<absl::Status()>;
  using Handler = httplib::Server::Handler;

  // `metrics` may be null (then /metrics is empty) and must outlive the server.
  HttpServer(HttpServerOptions options, const MetricsRegistry* metrics, HealthCheck health);
  // Stops the server.
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Registers a route (httplib pattern syntax) on the main port. Before Start().
  void Get(const std::string& pattern, Handler handler);
  void Post(const std::string& pattern, Handler handler);
  void Post(const std::string& pattern, Handler handler, BodyLimit limit);
  // Requests `method` `pattern` (httplib pattern syntax, as registered) are checked against
  // options.auth's entry `check.policy_route` from their headers, before their body is read
  // (nothing is checked without options.auth). Before Start().
  void RequireToken(std::string method, const std::string& pattern, TokenCheck check);
  // See GuardedHttpServer::SetRequestGuard (main port only; the probe port serves /healthz
  // and /metrics, which guard themselves). It runs after the token checks. Before Start().
  void SetRequestGuard(GuardedHttpServer::RequestGuard guard) { guard_ = std::move(guard); }
  // The main port's server for anything else (static mounts). Before Start(). Its task queue
  // and pre-routing, error and Expect handlers carry the limits: leave them.
  httplib::Server& native() { return server_; }

  // Every route registered on the main port, as "METHOD PATTERN" ("GET /metrics",
  // "POST /api/v1/write"), in registration order; routes added through native() are not
  // listed unless named with AddRouteName().
  const std::vector<std::string>& routes() const { return routes_; }
  void AddRouteName(std::string route) { routes_.push_back(std::move(route)); }
  // True when the listeners serve HTTPS.
  bool serves_tls() const { return options_.tls.serves_tls(); }

  // Binds and starts serving on background threads. UNAVAILABLE naming the address on
  // failure, INVALID_ARGUMENT naming the file when the TLS certificate cannot be loaded.
  absl::Status Start();
  // The bound port (after Start()).
  int port() const { return port_; }
  // The probe listener's bound port (after Start()); -1 without one.
  int probe_port() const { return probe_port_; }
  // Stops accepting and joins the serving threads. Idempotent.
  void Stop();

 private:
  struct TokenRoute {
    std::string method;
    std::regex pattern;
    TokenCheck check;
  };

  // Adds /metrics and /healthz to `server`.
  void AddProbes(httplib::Server& server);
  // The main port's guard: the token checks, then guard_.
  bool Guard(const httplib::Request& request, httplib::Response& response) const;

  HttpServerOptions options_;
  const MetricsRegistry* metrics_;
  HealthCheck health_;
  GuardedHttpServer server_;
  std::unique_ptr<GuardedHttpServer> probe_;
  std::vector<std::string> routes_;
  // Routes registered with Get/Post, as (method, pattern).
  std::vector<std::pair<std::string, std::string>> registered_;
  std::vector<TokenRoute> token_routes_;
  GuardedHttpServer::RequestGuard guard_;
  int port_ = 0;
  int probe_port_ = -1;
};

}  // namespace goodput::platform
