// The HTTP side of every service: Prometheus `/metrics` and `/healthz`, plus any routes a
// service adds (remote_write receiver, dashboard) before Start().
//
//   HttpServer http({.host = config.http_host, .port = config.http_port}, &metrics,
//                   [&] { return server.serving() ? absl::OkStatus()
//                                                 : absl::UnavailableError("draining"); });
//   http.Post("/api/v1/write", HandleRemoteWrite);
//   if (absl::Status s = http.Start(); !s.ok()) { ...exit 1... }
//   ... http.port() ...
//   http.Stop();
//
// `/healthz` answers 200 "ok" when the health check returns OK and 503 with its message
// otherwise; `/metrics` answers the registry in text format 0.0.4.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "httplib.h"
#include "services/platform/config.h"
#include "services/platform/metrics.h"

namespace goodput::platform {

struct HttpServerOptions {
  std::string host = "0.0.0.0";
  int port = 0;  // 0 = any free port; HttpServer::port() tells which
};

// Options from the common config keys (http.host, http.port).
HttpServerOptions HttpServerOptionsFrom(const ServiceConfig& config);

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

  // Registers a route (httplib pattern syntax). Before Start().
  void Get(const std::string& pattern, Handler handler);
  void Post(const std::string& pattern, Handler handler);
  // The underlying server for anything else (limits, timeouts, static mounts). Before Start().
  httplib::Server& native() { return server_; }

  // Binds and starts serving on a background thread. UNAVAILABLE naming the address on failure.
  absl::Status Start();
  // The bound port (after Start()).
  int port() const { return port_; }
  // Stops accepting and joins the serving thread. Idempotent.
  void Stop();

 private:
  HttpServerOptions options_;
  const MetricsRegistry* metrics_;
  HealthCheck health_;
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace goodput::platform
