#include "services/platform/grpc_server.h"

#include <chrono>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/support/server_interceptor.h"
#include "services/platform/tls.h"

namespace goodput::platform {
namespace {

// Counts every call by method and status code and times it, from the moment gRPC hands the
// call to the server until its status is sent.
class MetricsInterceptor final : public grpc::experimental::Interceptor {
 public:
  MetricsInterceptor(std::string method, CounterFamily* requests, HistogramFamily* latency)
      : method_(std::move(method)),
        requests_(requests),
        latency_(latency),
        start_(std::chrono::steady_clock::now()) {}

  ~MetricsInterceptor() override {
    // A call cancelled by the client may never reach PRE_SEND_STATUS.
    if (!recorded_) Record(grpc::StatusCode::CANCELLED);
  }

  // grpc::experimental::Interceptor
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS)) {
      Record(methods->GetSendStatus().error_code());
    }
    methods->Proceed();
  }

 private:
  void Record(grpc::StatusCode code) {
    recorded_ = true;
    std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start_;
    requests_->WithLabels({method_, absl::StatusCodeToString(static_cast<absl::StatusCode>(code))})
        .Increment();
    latency_->WithLabels({method_}).Observe(elapsed.count());
  }

  std::string method_;
  CounterFamily* requests_;
  HistogramFamily* latency_;
  std::chrono::steady_clock::time_point start_;
  bool recorded_ = false;
};

class MetricsInterceptorFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit MetricsInterceptorFactory(MetricsRegistry& registry)
      : requests_(&registry.AddCounter("goodput_grpc_requests_total",
                                       "gRPC calls handled, by method and status code.",
                                       {"method", "code"})),
        latency_(&registry.AddHistogram("goodput_grpc_request_duration_seconds",
                                        "gRPC call duration from arrival to status, seconds.",
                                        {"method"})) {}

  // grpc::experimental::ServerInterceptorFactoryInterface
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new MetricsInterceptor(info->method() != nullptr ? info->method() : "", requests_,
                                  latency_);
  }

 private:
  CounterFamily* requests_;
  HistogramFamily* latency_;
};

std::string ListenAddress(const std::string& host, int port) {
  bool ipv6 = host.find(':') != std::string::npos && host.front() != '[';
  return ipv6 ? absl::StrCat("[", host, "]:", port) : absl::StrCat(host, ":", port);
}

}  // namespace

GrpcServerOptions GrpcServerOptionsFrom(const ServiceConfig& config, Logger logger,
                                        MetricsRegistry* metrics,
                                        std::shared_ptr<const AuthPolicy> auth) {
  GrpcServerOptions options;
  options.host = config.grpc_host;
  options.port = config.grpc_port;
  options.drain_timeout = config.shutdown_drain_timeout;
  options.auth = config.auth.enabled ? std::move(auth) : nullptr;
  options.tls = config.tls;
  options.metrics = metrics;
  options.logger = std::move(logger);
  return options;
}

GrpcServer::GrpcServer(GrpcServerOptions options) : options_(std::move(options)) {}

GrpcServer::~GrpcServer() { Shutdown(); }

std::vector<std::string> GrpcServer::service_names() const {
  std::vector<std::string> names;
  names.reserve(services_.size());
  for (const auto& [service, name] : services_) names.push_back(name);
  return names;
}

void GrpcServer::AddService(grpc::Service* service, std::string full_name) {
  services_.emplace_back(service, std::move(full_name));
}

void GrpcServer::AddGenericService(grpc::CallbackGenericService* service) {
  generic_services_.push_back(service);
}

void GrpcServer::ConfigureBuilder(std::function<void(grpc::ServerBuilder&)> configure) {
  configure_.push_back(std::move(configure));
}

absl::Status GrpcServer::Start() {
  if (options_.handle_signals) {
    absl::StatusOr<std::unique_ptr<SignalWatcher>> watcher = SignalWatcher::Install();
    if (!watcher.ok()) return watcher.status();
    signals_ = *std::move(watcher);
  }
  // Both are process-wide switches read when a builder is created.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();

  grpc::ServerBuilder builder;
  std::string address = ListenAddress(options_.host, options_.port);
  std::shared_ptr<grpc::ServerCredentials> credentials =
      MakeServerCredentials(options_.tls, options_.auth, options_.metrics);
  builder.AddListeningPort(address, credentials, &port_);
  // gRPC shares ports by default (SO_REUSEPORT); a second instance on a taken port must fail.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  for (auto& [service, name] : services_) builder.RegisterService(service);
  for (grpc::CallbackGenericService* generic : generic_services_) {
    builder.RegisterCallbackGenericService(generic);
  }
  if (options_.max_receive_message_bytes > 0) {
    builder.SetMaxReceiveMessageSize(options_.max_receive_message_bytes);
  }
  if (options_.metrics != nullptr) {
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> factories;
    factories.push_back(std::make_unique<MetricsInterceptorFactory>(*options_.metrics));
    builder.experimental().SetInterceptorCreators(std::move(factories));
  }
  for (auto& configure : configure_) configure(builder);

  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port_ == 0) {
    server_.reset();
    return absl::UnavailableError(
        absl::StrCat("cannot listen for gRPC on ", address, " (address in use or not local?)"));
  }
  SetServing(options_.serving_on_start);
  options_.logger.Info("grpc server started",
                       {{"address", ListenAddress(options_.host, port_)},
                        {"auth", options_.auth != nullptr},
                        {"tls", options_.tls.serves_tls()},
                        {"mtls", !options_.tls.client_ca_file.empty()},
                        {"services", static_cast<int64_t>(services_.size())}});
  return absl::OkStatus();
}

void GrpcServer::SetServing(bool serving) {
  absl::MutexLock lock(&mu_);
  if (shut_down_ || server_ == nullptr) return;
  serving_ = serving;
  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  if (health == nullptr) return;
  health->SetServingStatus(serving);
  for (auto& [service, name] : services_) health->SetServingStatus(name, serving);
}

bool GrpcServer::serving() const {
  absl::MutexLock lock(&mu_);
  return serving_;
}

void GrpcServer::RequestShutdown() {
  absl::MutexLock lock(&mu_);
  shutdown_requested_ = true;
  if (signals_ != nullptr) signals_->Notify();
}

void GrpcServer::RunUntilShutdown() {
  if (signals_ != nullptr) {
    int signal_number = signals_->Wait();
    if (signal_number != 0) {
      options_.logger.Info("shutdown signal received", {{"signal", signal_number}});
    }
  } else {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&shutdown_requested_));
  }
  Shutdown();
}

void GrpcServer::Shutdown() {
  absl::MutexLock serialize(&shutdown_mu_);
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_ || server_ == nullptr) return;
    serving_ = false;
    // Probes see NOT_SERVING before the listener closes; later status changes are ignored.
    if (grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService()) {
      health->Shutdown();
    }
    shut_down_ = true;
  }
  options_.logger.Info("draining grpc server",
                       {{"drain_timeout_s", absl::ToDoubleSeconds(options_.drain_timeout)}});
  auto deadline =
      std::chrono::system_clock::now() + absl::ToChronoMilliseconds(options_.drain_timeout);
  server_->Shutdown(deadline);
  server_->Wait();
  options_.logger.Info("grpc server stopped");
}

std::shared_ptr<grpc::Channel> GrpcServer::InProcessChannel() {
  return server_->InProcessChannel(grpc::ChannelArguments());
}

}  // namespace goodput::platform
