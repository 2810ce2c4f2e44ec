// The one composition root shared by the four goodput services: it parses the command line,
// loads and validates the configuration, creates the logger, metrics registry, PostgreSQL pool
// and Redis client, optionally applies migrations, lets the service build its objects and
// register its gRPC services and HTTP routes, serves gRPC (health, reflection, auth) and HTTP
// (/metrics, /healthz), and shuts down gracefully on SIGTERM/SIGINT.
//
//   int main(int argc, char** argv) {
//     return goodput::platform::RunServiceMain(argc, argv, {
//         .name = "goodput-ingest",
//         .config_sections = {"ingest"},
//         .setup = [](goodput::platform::ServiceContext& ctx)
//             -> absl::StatusOr<std::shared_ptr<void>> {
//           auto service = std::make_shared<JobServiceImpl>(ctx.pg, ctx.logger);
//           ctx.grpc->AddService(service.get(), goodput::v1::JobService::service_full_name());
//           return service;  // kept alive until the server has stopped
//         }});
//   }
//
// Command line: --config FILE (YAML; absent = embedded defaults plus GOODPUT_* environment),
// --migrate (apply pending migrations before serving), --migrations-dir DIR,
// --ready-file FILE (written once serving: "grpc_port=N\nhttp_port=M\n", then
// "probe_port=P\n" when http.probe_port is set, then "http_routes=GET /metrics,..." listing
// the HTTP routes of the main port, which tests use to reach every endpoint), --help.
// Exit codes: 0 after a clean shutdown, 2 for a bad command line or configuration, 1 when a
// dependency or listener cannot be set up.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "services/platform/auth.h"
#include "services/platform/config.h"
#include "services/platform/grpc_server.h"
#include "services/platform/http_server.h"
#include "services/platform/logging.h"
#include "services/platform/metrics.h"
#include "services/platform/pg_pool.h"
#include "services/platform/redis_client.h"

namespace goodput::platform {

// What a service's setup function gets. Pointers stay valid until the process exits.
struct ServiceContext {
  const ConfigTree* config_tree = nullptr;  // for the service's own keys
  const ServiceConfig* config = nullptr;
  Logger logger;
  MetricsRegistry* metrics = nullptr;
  PgPool* pg = nullptr;        // null when postgres.dsn is empty
  RedisClient* redis = nullptr;  // null when redis.host is empty
  GrpcServer* grpc = nullptr;  // register services before setup returns
  HttpServer* http = nullptr;  // register extra routes before setup returns
  // Null when auth is off. HTTP routes that take data register who may call them
  // (AllowMethod("POST /api/v1/write", ...)) and check requests with AuthorizeHttp.
  AuthPolicy* auth = nullptr;
  // Called on shutdown once the gRPC server has drained (stop background loops here).
  std::vector<std::function<void()>>* on_shutdown = nullptr;
};

struct ServiceSpec {
  std::string name;                          // "goodput-ingest"; also the default service.name
  std::vector<std::string> config_sections;  // the service's own top-level config keys
  bool needs_postgres = true;                // refuse to start without postgres.dsn
  bool needs_redis = true;                   // refuse to start without redis.host
  // Builds the service. An error stops start-up with that message: exit 2 for
  // INVALID_ARGUMENT (a bad configuration value of the service's own keys), else exit 1.
  // The returned object owns whatever must live while serving.
  std::function<absl::StatusOr<std::shared_ptr<void>>(ServiceContext&)> setup;
};

// Runs a service to completion; returns the process exit code.
int RunServiceMain(int argc, char** argv, const ServiceSpec& spec);

}  // namespace goodput::platform
