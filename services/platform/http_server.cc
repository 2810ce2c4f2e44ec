#include "services/platform/http_server.h"

#include <sys/socket.h>

#include "absl/strings/str_cat.h"

namespace goodput::platform {

HttpServerOptions HttpServerOptionsFrom(const ServiceConfig& config) {
  return HttpServerOptions{.host = config.http_host, .port = config.http_port};
}

HttpServer::HttpServer(HttpServerOptions options, const MetricsRegistry* metrics,
                       HealthCheck health)
    : options_(std::move(options)), metrics_(metrics), health_(std::move(health)) {
  // httplib's default also sets SO_REUSEPORT, which would let a second process share a busy
  // port silently; keep only SO_REUSEADDR (fast restarts) so that a taken port is an error.
  server_.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  server_.Get("/metrics", [this](const httplib::Request&, httplib::Response& response) {
    response.set_content(metrics_ != nullptr ? metrics_->Exposition() : std::string(),
                         std::string(kPrometheusContentType));
  });
  server_.Get("/healthz", [this](const httplib::Request&, httplib::Response& response) {
    absl::Status status = health_ ? health_() : absl::OkStatus();
    if (status.ok()) {
      response.status = 200;
      response.set_content("ok\n", "text/plain; charset=utf-8");
    } else {
      response.status = 503;
      response.set_content(absl::StrCat(status.message(), "\n"), "text/plain; charset=utf-8");
    }
  });
}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Get(const std::string& pattern, Handler handler) {
  server_.Get(pattern, std::move(handler));
}

void HttpServer::Post(const std::string& pattern, Handler handler) {
  server_.Post(pattern, std::move(handler));
}

absl::Status HttpServer::Start() {
  std::string address = absl::StrCat(options_.host, ":", options_.port);
  // bind_to_port/bind_to_any_port leave the socket listening, so connections made before the
  // serving thread runs wait in the backlog instead of failing.
  if (options_.port == 0) {
    port_ = server_.bind_to_any_port(options_.host);
    if (port_ <= 0) port_ = 0;
  } else {
    port_ = server_.bind_to_port(options_.host, options_.port) ? options_.port : 0;
  }
  if (port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen for HTTP on ", address, " (address in use or not local?)"));
  }
  thread_ = std::thread([this] { server_.listen_after_bind(); });
  // stop() only acts on a running server: wait until the thread has entered its accept loop
  // (it sets the flag first thing), so that Stop() right after Start() cannot be lost.
  while (!server_.is_running()) std::this_thread::yield();
  return absl::OkStatus();
}

void HttpServer::Stop() {
  server_.stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace goodput::platform
