#include "services/platform/service_main.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor.pb.h"
#include "google/protobuf/message.h"
#include "services/platform/auth.h"
#include "services/platform/install_paths.h"
#include "services/platform/migrations.h"
#include "services/platform/scope.h"
#include "services/platform/tls.h"

namespace goodput::platform {
namespace {

struct CommandLine {
  std::optional<std::string> config_path;
  bool migrate = false;
  std::string migrations_dir;
  std::string ready_file;
  bool help = false;
};

absl::StatusOr<CommandLine> ParseCommandLine(int argc, char** argv) {
  CommandLine cl;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](absl::string_view flag) -> absl::StatusOr<std::string> {
      std::string prefix = absl::StrCat(flag, "=");
      if (absl::StartsWith(arg, prefix)) return arg.substr(prefix.size());
      if (i + 1 >= argc) return absl::InvalidArgumentError(absl::StrCat(flag, " needs a value"));
      return std::string(argv[++i]);
    };
    auto is = [&](absl::string_view flag) {
      return arg == flag || absl::StartsWith(arg, absl::StrCat(flag, "="));
    };
    if (arg == "--help" || arg == "-h") {
      cl.help = true;
    } else if (arg == "--migrate") {
      cl.migrate = true;
    } else if (is("--config")) {
      absl::StatusOr<std::string> v = value("--config");
      if (!v.ok()) return v.status();
      cl.config_path = *v;
    } else if (is("--migrations-dir")) {
      absl::StatusOr<std::string> v = value("--migrations-dir");
      if (!v.ok()) return v.status();
      cl.migrations_dir = *v;
    } else if (is("--ready-file")) {
      absl::StatusOr<std::string> v = value("--ready-file");
      if (!v.ok()) return v.status();
      cl.ready_file = *v;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown argument '", arg, "'"));
    }
  }
  return cl;
}

void PrintUsage(const ServiceSpec& spec) {
  std::cout << "usage: " << spec.name
            << " [--config FILE] [--migrate] [--migrations-dir DIR] [--ready-file FILE]\n\n"
            << "Configuration comes from FILE (YAML) with GOODPUT_* environment overrides\n"
            << "(GOODPUT_POSTGRES__DSN overrides postgres.dsn). Without --config the embedded\n"
            << "defaults are used. --migrate applies pending database migrations first.\n";
}

// Writes `text` to `path` atomically (write a sibling, then rename), so a reader polling for
// the file never sees half of it.
absl::Status WriteFileAtomically(const std::string& path, const std::string& text) {
  std::string tmp = absl::StrCat(path, ".tmp.", getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    if (!out.good()) return absl::InternalError(absl::StrCat("cannot write ", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("cannot rename ", tmp, " to ", path));
  }
  return absl::OkStatus();
}

// Applies the roles every RPC declares with the `goodput.v1.allowed_roles` method option
// (see proto/goodput/v1/common.proto) and the scope platform's table gives it (scope.h,
// kScopeTable) to `policy`. Reading the option through the descriptor pool keeps one table
// of who may call what: the API definition. A method that declares no roles is left to the
// operator role alone; one without a scope refuses every scoped token.
absl::Status ApplyDeclaredRoles(const std::vector<std::string>& service_names,
                                AuthPolicy& policy) {
  namespace pb = google::protobuf;
  const pb::DescriptorPool* pool = pb::DescriptorPool::generated_pool();
  const pb::FieldDescriptor* ext = pool->FindExtensionByName("goodput.v1.allowed_roles");
  for (const std::string& name : service_names) {
    const pb::ServiceDescriptor* service = pool->FindServiceByName(name);
    if (service == nullptr) {
      return absl::InternalError(absl::StrCat("no descriptor for service ", name));
    }
    for (int m = 0; m < service->method_count(); ++m) {
      const pb::MethodDescriptor* method = service->method(m);
      std::vector<Role> roles;
      if (ext != nullptr) {
        const pb::Message& options = method->options();
        const pb::Reflection* reflection = options.GetReflection();
        int count = reflection->FieldSize(options, ext);
        for (int i = 0; i < count; ++i) {
          std::string enum_name = reflection->GetRepeatedEnum(options, ext, i)->name();
          std::string role_name = absl::AsciiStrToLower(
              absl::StartsWith(enum_name, "ROLE_") ? enum_name.substr(5) : enum_name);
          absl::StatusOr<Role> role = ParseRole(role_name);
          if (role.ok()) roles.push_back(*role);
        }
      }
      const std::string full_name = absl::StrCat("/", name, "/", method->name());
      policy.AllowMethod(full_name, std::move(roles), DeclaredScope(full_name));
    }
  }
  return absl::OkStatus();
}

int Fail(const ServiceSpec& spec, int code, absl::string_view what) {
  std::cerr << spec.name << ": " << what << "\n";
  return code;
}

}  // namespace

int RunServiceMain(int argc, char** argv, const ServiceSpec& spec) {
  absl::StatusOr<CommandLine> cl = ParseCommandLine(argc, argv);
  if (!cl.ok()) {
    PrintUsage(spec);
    return Fail(spec, 2, cl.status().message());
  }
  if (cl->help) {
    PrintUsage(spec);
    return 0;
  }

  absl::StatusOr<ConfigTree> tree = cl->config_path
                                        ? ConfigTree::LoadFile(*cl->config_path)
                                        : ConfigTree::LoadString("", ProcessEnvironment());
  if (!tree.ok()) return Fail(spec, 2, tree.status().message());
  absl::StatusOr<ServiceConfig> config =
      ParseServiceConfig(*tree, spec.name, spec.config_sections);
  if (!config.ok()) return Fail(spec, 2, config.status().message());
  if (spec.needs_postgres && config->postgres.dsn.empty()) {
    return Fail(spec, 2,
                "config key postgres.dsn: \"\" is empty; this service stores its data in "
                "PostgreSQL (set it in the file or GOODPUT_POSTGRES__DSN)");
  }
  if (spec.needs_redis && config->redis.host.empty()) {
    return Fail(spec, 2, "config key redis.host: \"\" is empty; this service needs Redis");
  }

  if (absl::Status s = ValidateTlsFiles(config->tls); !s.ok()) return Fail(spec, 2, s.message());

  absl::StatusOr<Logger> logger = Logger::Create(config->log, config->service_name);
  if (!logger.ok()) return Fail(spec, 2, logger.status().message());
  SetDefaultLogger(*logger);
  for (const std::string& warning : config->warnings) logger->Warn(warning);

  MetricsRegistry metrics;

  std::unique_ptr<PgPool> pg;
  if (!config->postgres.dsn.empty()) {
    absl::StatusOr<std::unique_ptr<PgPool>> pool =
        PgPool::Create({.dsn = config->postgres.dsn,
                        .max_connections = config->postgres.pool_size,
                        .application_name = config->service_name});
    if (!pool.ok()) return Fail(spec, 2, pool.status().message());
    pg = *std::move(pool);
    if (absl::Status ping = pg->Ping(); !ping.ok()) {
      // Not fatal: the pool reconnects by itself once PostgreSQL is reachable.
      logger->Warn("postgres not reachable yet", {{"error", std::string(ping.message())}});
    }
  }

  if (cl->migrate) {
    if (!pg) return Fail(spec, 2, "--migrate needs postgres.dsn");
    std::string dir = cl->migrations_dir;
    if (dir.empty()) {
      absl::StatusOr<std::string> from_config =
          tree->GetString("migrations.dir", DefaultMigrationsDir());
      if (!from_config.ok()) return Fail(spec, 2, from_config.status().message());
      dir = *from_config;
    }
    absl::StatusOr<MigrationReport> report = ApplyMigrations(config->postgres.dsn, dir);
    if (!report.ok()) {
      return Fail(spec, 1, absl::StrCat("migrations: ", report.status().message()));
    }
    logger->Info("migrations applied", {{"applied", static_cast<int64_t>(report->applied.size())},
                                        {"dir", dir}});
  }

  std::unique_ptr<RedisClient> redis;
  if (!config->redis.host.empty()) {
    absl::StatusOr<std::unique_ptr<RedisClient>> client = RedisClient::Create(
        {.host = config->redis.host,
         .port = config->redis.port,
         .password = config->redis.password,
         .database = config->redis.db});
    if (!client.ok()) return Fail(spec, 2, client.status().message());
    redis = *std::move(client);
    if (absl::Status ping = redis->Ping(); !ping.ok()) {
      logger->Warn("redis not reachable yet", {{"error", std::string(ping.message())}});
    }
  }

  std::shared_ptr<AuthPolicy> auth;
  if (config->auth.enabled) {
    absl::StatusOr<std::unique_ptr<AuthPolicy>> policy = AuthPolicy::Create(config->auth);
    if (!policy.ok()) return Fail(spec, 2, policy.status().message());
    auth = *std::move(policy);
  }

  GrpcServer server(GrpcServerOptionsFrom(*config, *logger, &metrics, auth));
  HttpServer http(HttpServerOptionsFrom(*config, auth.get()), &metrics, [&server]() -> absl::Status {
    if (server.serving()) return absl::OkStatus();
    return absl::UnavailableError("not serving (starting or draining)");
  });

  std::vector<std::function<void()>> on_shutdown;
  ServiceContext ctx{.config_tree = &*tree,
                     .config = &*config,
                     .logger = *logger,
                     .metrics = &metrics,
                     .pg = pg.get(),
                     .redis = redis.get(),
                     .grpc = &server,
                     .http = &http,
                     .auth = auth.get(),
                     .on_shutdown = &on_shutdown};
  absl::StatusOr<std::shared_ptr<void>> owner = spec.setup(ctx);
  if (!owner.ok()) {
    // The service's own configuration keys are checked in setup: a bad one is exit code 2.
    bool bad_config = owner.status().code() == absl::StatusCode::kInvalidArgument;
    return Fail(spec, bad_config ? 2 : 1, owner.status().message());
  }

  if (auth) {
    if (absl::Status s = ApplyDeclaredRoles(server.service_names(), *auth); !s.ok()) {
      return Fail(spec, 1, s.message());
    }
    // Tokens limited to a user or team reach only the jobs they own (scope.h).
    if (pg) SetJobOwners(std::make_shared<JobOwners>(pg.get()));
  }

  if (absl::Status s = server.Start(); !s.ok()) return Fail(spec, 1, s.message());
  if (absl::Status s = http.Start(); !s.ok()) return Fail(spec, 1, s.message());
  logger->Info("serving", {{"grpc_port", server.port()},
                           {"http_port", http.port()},
                           {"probe_port", http.probe_port()},
                           {"auth", config->auth.enabled},
                           {"services", absl::StrJoin(server.service_names(), ",")}});
  if (!cl->ready_file.empty()) {
    absl::Status s = WriteFileAtomically(
        cl->ready_file,
        absl::StrCat(
            "grpc_port=", server.port(), "\nhttp_port=", http.port(), "\n",
            http.probe_port() >= 0 ? absl::StrCat("probe_port=", http.probe_port(), "\n") : "",
            "http_routes=", absl::StrJoin(http.routes(), ","), "\n"));
    if (!s.ok()) return Fail(spec, 1, s.message());
  }

  server.RunUntilShutdown();
  for (auto& hook : on_shutdown) hook();
  http.Stop();
  owner->reset();
  SetJobOwners(nullptr);
  logger->Info("stopped");
  logger->Flush();
  return 0;
}

}  // namespace goodput::platform
