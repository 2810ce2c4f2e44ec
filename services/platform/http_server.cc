#include "services/platform/http_server.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace goodput::platform {
namespace {

// The probe listener answers two cheap GETs: a few threads, no bodies.
HttpLimits ProbeLimits(const HttpLimits& main) {
  HttpLimits limits = main;
  limits.threads = std::min(main.threads, 4);
  limits.max_queued_connections = std::min(main.max_queued_connections, 16);
  limits.max_body_bytes = 0;
  return limits;
}

}  // namespace

HttpServerOptions HttpServerOptionsFrom(const ServiceConfig& config, const AuthPolicy* auth) {
  return HttpServerOptions{
      .host = config.http_host,
      .port = config.http_port,
      .probe_port = config.http_probe_port,
      .limits = config.http_limits,
      .tls = config.tls.http ? config.tls : TlsConfig{},
      .metrics_auth = config.auth.enabled && config.auth.metrics_auth ? auth : nullptr,
      .auth = config.auth.enabled ? auth : nullptr};
}

HttpServer::HttpServer(HttpServerOptions options, const MetricsRegistry* metrics,
                       HealthCheck health)
    : options_(std::move(options)),
      metrics_(metrics),
      health_(std::move(health)),
      server_(options_.limits) {
  AddProbes(server_);
  server_.SetRequestGuard([this](const httplib::Request& request, httplib::Response& response) {
    return Guard(request, response);
  });
  if (options_.probe_port >= 0) {
    probe_ = std::make_unique<GuardedHttpServer>(ProbeLimits(options_.limits));
    AddProbes(*probe_);
  }
}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::AddProbes(httplib::Server& server) {
  if (&server == &server_) {
    routes_.push_back("GET /metrics");
    routes_.push_back("GET /healthz");
  }
  server.Get("/metrics", [this](const httplib::Request& request, httplib::Response& response) {
    if (options_.metrics_auth != nullptr &&
        !options_.metrics_auth->Identify(request.get_header_value("Authorization"))) {
      response.status = 401;
      response.set_header("WWW-Authenticate", "Bearer");
      response.set_content(
          "GET /metrics needs an \"Authorization: Bearer <token>\" header with a known token "
          "(auth.metrics)\n",
          "text/plain; charset=utf-8");
      return;
    }
    response.set_content(metrics_ != nullptr ? metrics_->Exposition() : std::string(),
                         std::string(kPrometheusContentType));
  });
  server.Get("/healthz", [this](const httplib::Request&, httplib::Response& response) {
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

void HttpServer::Get(const std::string& pattern, Handler handler) {
  routes_.push_back(absl::StrCat("GET ", pattern));
  registered_.emplace_back("GET", pattern);
  server_.Get(pattern, std::move(handler));
}

void HttpServer::Post(const std::string& pattern, Handler handler) {
  routes_.push_back(absl::StrCat("POST ", pattern));
  registered_.emplace_back("POST", pattern);
  server_.Post(pattern, std::move(handler));
}

void HttpServer::Post(const std::string& pattern, Handler handler, BodyLimit limit) {
  server_.SetBodyLimit(pattern, limit.max_bytes, std::move(limit.config_key));
  Post(pattern, std::move(handler));
}

void HttpServer::RequireToken(std::string method, const std::string& pattern, TokenCheck check) {
  token_routes_.push_back({std::move(method), std::regex(pattern), std::move(check)});
}

bool HttpServer::Guard(const httplib::Request& request, httplib::Response& response) const {
  if (options_.auth != nullptr) {
    // httplib serves HEAD with the GET handlers.
    const std::string& method = request.method == "HEAD" ? "GET" : request.method;
    for (const TokenRoute& route : token_routes_) {
      if (route.method != method || !std::regex_match(request.path, route.pattern)) continue;
      HttpRefusal refusal;
      if (CheckHttp(*options_.auth, route.check.policy_route,
                    request.get_header_value("Authorization"), &refusal)
              .ok()) {
        break;
      }
      if (route.check.answer) {
        route.check.answer(refusal, response);
      } else {
        response.status = refusal.status;
        if (refusal.status == 401) response.set_header("WWW-Authenticate", "Bearer");
        response.set_content(refusal.message + "\n", "text/plain; charset=utf-8");
      }
      return true;
    }
  }
  return guard_ && guard_(request, response);
}

absl::Status HttpServer::Start() {
  // Routes the policy gives roles to by their own name are checked as RequireToken ones.
  if (options_.auth != nullptr) {
    for (const auto& [method, pattern] : registered_) {
      const std::string name = absl::StrCat(method, " ", pattern);
      if (!options_.auth->Governs(name)) continue;
      const bool named =
          std::any_of(token_routes_.begin(), token_routes_.end(),
                      [&](const TokenRoute& route) { return route.check.policy_route == name; });
      if (!named) RequireToken(method, pattern, {.policy_route = name});
    }
  }
  if (options_.tls.serves_tls()) {
    absl::StatusOr<std::shared_ptr<HttpsContext>> https = HttpsContext::Create(options_.tls);
    if (!https.ok()) return https.status();
    server_.ServeTls(*https);
    if (probe_ != nullptr) probe_->ServeTls(*https);
  }
  absl::StatusOr<int> port = server_.Start(options_.host, options_.port);
  if (!port.ok()) return port.status();
  port_ = *port;
  if (probe_ != nullptr) {
    absl::StatusOr<int> probe_port = probe_->Start(options_.host, options_.probe_port);
    if (!probe_port.ok()) {
      server_.Shutdown();
      return absl::UnavailableError(
          absl::StrCat(probe_port.status().message(), " (http.probe_port)"));
    }
    probe_port_ = *probe_port;
  }
  return absl::OkStatus();
}

void HttpServer::Stop() {
  if (probe_ != nullptr) probe_->Shutdown();
  server_.Shutdown();
}

}  // namespace goodput::platform
