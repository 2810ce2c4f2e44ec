// gRPC server bootstrap shared by every service: health checking, reflection, bearer-token auth
// (auth.h), TLS and mTLS with certificates reloaded on change (tls.h), request metrics, a listening port (0 = any free port, the actual one reported), and
// graceful shutdown on SIGTERM/SIGINT: health turns NOT_SERVING, no new calls are accepted,
// in-flight calls get up to the drain timeout to finish, then the rest are cancelled.
//
//   GrpcServer server(GrpcServerOptionsFrom(config, logger, &metrics, policy));
//   server.AddService(&job_service, goodput::v1::JobService::service_full_name());
//   if (absl::Status s = server.Start(); !s.ok()) { ...exit 1... }
//   logger.Info("listening", {{"grpc_port", server.port()}});
//   server.RunUntilShutdown();   // returns after SIGTERM/SIGINT and the drain
//   return 0;
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/grpcpp.h"
#include "services/platform/auth.h"
#include "services/platform/config.h"
#include "services/platform/logging.h"
#include "services/platform/metrics.h"
#include "services/platform/signals.h"

namespace goodput::platform {

struct GrpcServerOptions {
  std::string host = "0.0.0.0";
  int port = 0;  // 0 = any free port; GrpcServer::port() tells which
  absl::Duration drain_timeout = absl::Seconds(10);
  // Bearer-token auth; null = every call is let through (local runs).
  std::shared_ptr<const AuthPolicy> auth;
  // TLS (and mTLS with a client CA) when tls.serves_tls(); plaintext otherwise (tls.h).
  TlsConfig tls = {};
  // When set, records goodput_grpc_requests_total{method,code} and
  // goodput_grpc_request_duration_seconds{method}. Must outlive the server.
  MetricsRegistry* metrics = nullptr;
  Logger logger;
  // Install SIGTERM/SIGINT handling at Start() (one server per process may do this).
  bool handle_signals = true;
  // Report SERVING as soon as Start() succeeds; false = the caller calls SetServing(true).
  bool serving_on_start = true;
  int max_receive_message_bytes = 0;  // 0 = gRPC's default (4 MiB)
};

// Options from the common config keys (grpc.host, grpc.port, shutdown.drain_timeout_s, tls.*).
GrpcServerOptions GrpcServerOptionsFrom(const ServiceConfig& config, Logger logger,
                                        MetricsRegistry* metrics,
                                        std::shared_ptr<const AuthPolicy> auth);

class GrpcServer {
 public:
  explicit GrpcServer(GrpcServerOptions options);
  // Shuts down (with the drain) if still running.
  ~GrpcServer();
  GrpcServer(const GrpcServer&) = delete;
  GrpcServer& operator=(const GrpcServer&) = delete;

  // Registers a generated service (sync, async or callback API) under its full name
  // ("goodput.v1.JobService"), which is also its health-checking name. Before Start().
  void AddService(grpc::Service* service, std::string full_name);
  // Full names of the services registered with AddService, in registration order.
  std::vector<std::string> service_names() const;
  // Registers a catch-all service for methods no registered service implements. Before Start().
  void AddGenericService(grpc::CallbackGenericService* service);
  // Extra ServerBuilder settings (channel args, resource quota). Before Start().
  void ConfigureBuilder(std::function<void(grpc::ServerBuilder&)> configure);

  // Binds and starts serving. UNAVAILABLE naming the address when it cannot listen;
  // FAILED_PRECONDITION when signals are to be handled but another watcher is installed.
  absl::Status Start();
  // The bound port (after Start()).
  int port() const { return port_; }

  // Health of every registered service and of the server as a whole ("").
  void SetServing(bool serving);
  bool serving() const;

  // Blocks until SIGTERM/SIGINT (when handled) or RequestShutdown(), then Shutdown().
  void RunUntilShutdown();
  // Wakes RunUntilShutdown() from any thread; safe to call before it runs.
  void RequestShutdown();
  // NOT_SERVING, stop accepting, wait up to the drain timeout for in-flight calls, cancel the
  // rest. Idempotent; returns once the server has stopped.
  void Shutdown();

  grpc::Server* server() { return server_.get(); }
  // A channel to this server that bypasses the network (tests, same-process clients).
  std::shared_ptr<grpc::Channel> InProcessChannel();

 private:
  GrpcServerOptions options_;
  std::vector<std::pair<grpc::Service*, std::string>> services_;
  std::vector<grpc::CallbackGenericService*> generic_services_;
  std::vector<std::function<void(grpc::ServerBuilder&)>> configure_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<SignalWatcher> signals_;
  int port_ = 0;

  mutable absl::Mutex mu_;
  bool serving_ ABSL_GUARDED_BY(mu_) = false;
  bool shutdown_requested_ ABSL_GUARDED_BY(mu_) = false;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  absl::Mutex shutdown_mu_;  // serializes Shutdown()
};

}  // namespace goodput::platform
