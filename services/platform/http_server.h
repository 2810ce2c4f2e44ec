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
// change (tls.h). `/healthz` answers 200 "ok" when the health check returns OK and 503 with its message
// otherwise; `/metrics` answers the registry in text format 0.0.4. Every listener enforces
// HttpLimits (config.h, guarded_http_server.h): bodies above the limit are refused while
// reading, slow clients are cut off, and connections beyond the pool are answered 503 with
// Retry-After. With a probe port, `/healthz` and `/metrics` are also served on a listener
// of their own, so that probes and scrapes are answered while the main port is saturated.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
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
};

// Options from the common config keys (http.*; tls.* unless tls.http is false; auth.metrics
// with `auth`, which may be null).
HttpServerOptions HttpServerOptionsFrom(const ServiceConfig& config,
                                        const AuthPolicy* auth = nullptr);

// The body limit of a route, instead of http.max_body_bytes; `config_key` names it in the 413.
struct BodyLimit {
  int64_t max_bytes = 0;
  std::string config_key;
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
  // See GuardedHttpServer::SetRequestGuard (main port only; the probe port serves /healthz
  // and /metrics, which guard themselves). Before Start().
  void SetRequestGuard(GuardedHttpServer::RequestGuard guard) {
    server_.SetRequestGuard(std::move(guard));
  }
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
  // Adds /metrics and /healthz to `server`.
  void AddProbes(httplib::Server& server);

  HttpServerOptions options_;
  const MetricsRegistry* metrics_;
  HealthCheck health_;
  GuardedHttpServer server_;
  std::unique_ptr<GuardedHttpServer> probe_;
  std::vector<std::string> routes_;
  int port_ = 0;
  int probe_port_ = -1;
};

}  // namespace goodput::platform
