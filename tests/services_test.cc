// The four service binaries as an operator runs them: configuration errors name the key,
// every service reports SERVING with real PostgreSQL and Redis, SIGTERM ends a service
// cleanly, and bearer-token auth refuses missing and wrong-role tokens.
#include <signal.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "goodput/v1/mfu.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "tests/support/postgres_server.h"
#include "tests/support/redis_server.h"
#include "tests/support/service_process.h"
#include "tests/support/test_steps.h"

namespace goodput::testing {
namespace {

struct ServiceBinary {
  const char* name;
  const char* path;
  std::vector<std::string> grpc_services;
};

const std::vector<ServiceBinary>& AllServices() {
  static const auto* services = new std::vector<ServiceBinary>{
      {"ingest", "services/ingest/goodput-ingest",
       {"goodput.v1.JobService", "goodput.v1.IngestService"}},
      {"ofu", "services/ofu/goodput-ofu", {"goodput.v1.OfuService"}},
      {"mfu", "services/mfu/goodput-mfu", {"goodput.v1.MfuService"}},
      {"alerting", "services/alerting/goodput-alerting", {"goodput.v1.AlertService"}},
  };
  return *services;
}

// The serving status of `service` on `channel`, or the RPC error's code name.
std::string HealthOf(const std::shared_ptr<grpc::Channel>& channel, const std::string& service) {
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  grpc::Status status = stub->Check(&ctx, request, &response);
  if (!status.ok()) return absl::StrCat("error ", status.error_code());
  return grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status());
}

// Real PostgreSQL (with a `goodput` database) and Redis for a test, and the YAML that points a
// service at them.
class WithServers : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(StartPostgres(&pg_));
    ASSERT_NO_FATAL_FAILURE(StartRedis(&redis_));
  }

  std::string Yaml(const std::string& extra = "") const {
    return absl::StrCat("postgres:\n  dsn: \"", pg_->Dsn("goodput"), "\"\nredis:\n  host: ",
                        redis_->host(), "\n  port: ", redis_->port(),
                        "\nlog:\n  format: text\n", extra);
  }

  std::unique_ptr<PostgresServer> pg_;
  std::unique_ptr<RedisServer> redis_;
};

TEST(ServiceBinaries, RefuseABadConfigValueNamingTheKeyAndValue) {
  for (const ServiceBinary& service : AllServices()) {
    SCOPED_TRACE(service.name);
    absl::StatusOr<ProgramResult> result = RunProgram(
        {BuiltBinary(service.path).string()},
        {{"GOODPUT_POSTGRES__DSN", "host=127.0.0.1 dbname=x"}, {"GOODPUT_GRPC__PORT", "seven"}});
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->exit.exit_code, 2) << result->output;
    EXPECT_NE(result->output.find("grpc.port"), std::string::npos) << result->output;
    EXPECT_NE(result->output.find("seven"), std::string::npos) << result->output;
  }
}

TEST(ServiceBinaries, RefuseAnOutOfRangePortFromTheConfigFile) {
  absl::StatusOr<std::unique_ptr<ServiceProcess>> ofu = ServiceProcess::Start(
      {.binary = BuiltBinary("services/ofu/goodput-ofu"),
       .config_yaml = "postgres:\n  dsn: \"host=127.0.0.1 dbname=x\"\nhttp:\n  port: 70000\n"});
  ASSERT_FALSE(ofu.ok());
  EXPECT_NE(ofu.status().message().find("http.port"), std::string::npos) << ofu.status();
  EXPECT_NE(ofu.status().message().find("70000"), std::string::npos) << ofu.status();
}

TEST(ServiceBinaries, RefuseABadGpuCatalogOverrideNamingTheEntryAndField) {
  absl::StatusOr<std::unique_ptr<ServiceProcess>> ofu = ServiceProcess::Start(
      {.binary = BuiltBinary("services/ofu/goodput-ofu"),
       .config_yaml = "postgres:\n  dsn: \"host=127.0.0.1 port=1 dbname=x\"\n"
                      "gpu_catalog:\n  overrides:\n    - name: \"NVIDIA H100 80GB HBM3\"\n"
                      "      tensor_max_clock_mhz: -5\n"});
  ASSERT_FALSE(ofu.ok());
  EXPECT_NE(ofu.status().message().find("gpu_catalog.overrides[0].tensor_max_clock_mhz"),
            std::string::npos)
      << ofu.status();
}

TEST(ServiceBinaries, RefuseToStartWithoutAPostgresDsn) {
  absl::StatusOr<ProgramResult> result = RunProgram({BuiltBinary("services/mfu/goodput-mfu")});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->exit.exit_code, 2);
  EXPECT_NE(result->output.find("postgres.dsn"), std::string::npos) << result->output;
}

TEST_F(WithServers, EveryServiceTurnsServingAndServesMetricsAndHealthz) {
  std::vector<std::unique_ptr<ServiceProcess>> running;
  for (const ServiceBinary& service : AllServices()) {
    SCOPED_TRACE(service.name);
    // The first service applies the migrations, as `--migrate` does in the local stack.
    std::vector<std::string> args;
    if (running.empty()) {
      args = MigrateArgs();
    }
    absl::StatusOr<std::unique_ptr<ServiceProcess>> process =
        ServiceProcess::Start({.binary = BuiltBinary(service.path),
                               .config_yaml = Yaml(),
                               .extra_args = args});
    ASSERT_TRUE(process.ok()) << process.status();
    auto channel = (*process)->Channel();
    for (const std::string& name : service.grpc_services) {
      EXPECT_EQ(HealthOf(channel, name), "SERVING") << name;
    }
    EXPECT_EQ(HealthOf(channel, ""), "SERVING");

    httplib::Client http("127.0.0.1", (*process)->http_port());
    httplib::Result healthz = http.Get("/healthz");
    ASSERT_TRUE(healthz);
    EXPECT_EQ(healthz->status, 200);
    httplib::Result metrics = http.Get("/metrics");
    ASSERT_TRUE(metrics);
    EXPECT_EQ(metrics->status, 200);
    EXPECT_NE(metrics->body.find("# TYPE goodput_grpc_requests_total counter"), std::string::npos)
        << metrics->body;
    running.push_back(*std::move(process));
  }
  absl::StatusOr<std::string> applied =
      pg_->QueryValue("goodput", "SELECT count(*) FROM schema_migrations");
  ASSERT_TRUE(applied.ok()) << applied.status();
  EXPECT_NE(*applied, "0");
}

TEST_F(WithServers, SigtermStopsAServiceCleanlyWithExitCodeZero) {
  for (const ServiceBinary& service : AllServices()) {
    SCOPED_TRACE(service.name);
    absl::StatusOr<std::unique_ptr<ServiceProcess>> process = ServiceProcess::Start(
        {.binary = BuiltBinary(service.path), .config_yaml = Yaml()});
    ASSERT_TRUE(process.ok()) << process.status();
    ASSERT_TRUE((*process)->process().SignalLeader(SIGTERM).ok());
    absl::StatusOr<ExitStatus> exit = (*process)->process().Wait(absl::Seconds(30));
    ASSERT_TRUE(exit.ok()) << exit.status();
    EXPECT_EQ(exit->exit_code, 0) << exit->ToString() << "\n" << (*process)->process().LogTail();
    EXPECT_NE((*process)->process().LogTail().find("stopped"), std::string::npos);
  }
}

TEST_F(WithServers, ServesWhilePostgresIsDownAndReportsItInTheLog) {
  ASSERT_TRUE(pg_->Stop().ok());
  absl::StatusOr<std::unique_ptr<ServiceProcess>> ofu = ServiceProcess::Start(
      {.binary = BuiltBinary("services/ofu/goodput-ofu"), .config_yaml = Yaml()});
  ASSERT_TRUE(ofu.ok()) << ofu.status();
  EXPECT_EQ(HealthOf((*ofu)->Channel(), "goodput.v1.OfuService"), "SERVING");
  EXPECT_NE((*ofu)->process().LogTail().find("postgres not reachable yet"), std::string::npos);
}

// Auth on: tokens per role; the roles an RPC admits come from the API's allowed_roles option.
class WithAuth : public WithServers {
 protected:
  void SetUp() override {
    WithServers::SetUp();
    if (HasFatalFailure()) return;
    absl::StatusOr<std::unique_ptr<ServiceProcess>> mfu = ServiceProcess::Start(
        {.binary = BuiltBinary("services/mfu/goodput-mfu"),
         .config_yaml = Yaml(
             "auth:\n  enabled: true\n  tokens:\n    sdk: [sdk-token-1]\n"
             "    scheduler: [scheduler-token-1]\n    service: [service-token-1]\n")});
    ASSERT_TRUE(mfu.ok()) << mfu.status();
    mfu_ = *std::move(mfu);
  }

  grpc::Status ReportMfu(const std::string& token) {
    auto stub = goodput::v1::MfuService::NewStub(mfu_->Channel());
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    if (!token.empty()) ctx.AddMetadata("authorization", absl::StrCat("Bearer ", token));
    goodput::v1::ReportMfuRequest request;
    goodput::v1::ReportMfuResponse response;
    return stub->ReportMfu(&ctx, request, &response);
  }

  grpc::Status PushOfuWindows(const std::string& token) {
    auto stub = goodput::v1::MfuService::NewStub(mfu_->Channel());
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    ctx.AddMetadata("authorization", absl::StrCat("Bearer ", token));
    goodput::v1::PushOfuWindowsRequest request;
    goodput::v1::PushOfuWindowsResponse response;
    return stub->PushOfuWindows(&ctx, request, &response);
  }

  std::unique_ptr<ServiceProcess> mfu_;
};

bool PassedAuth(const grpc::Status& status) {
  return status.error_code() != grpc::StatusCode::UNAUTHENTICATED &&
         status.error_code() != grpc::StatusCode::PERMISSION_DENIED;
}

TEST_F(WithAuth, MissingOrUnknownTokenIsUnauthenticated) {
  EXPECT_EQ(ReportMfu("").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(ReportMfu("not-a-token").error_code(), grpc::StatusCode::UNAUTHENTICATED);
}

TEST_F(WithAuth, WrongRoleIsPermissionDenied) {
  grpc::Status status = ReportMfu("scheduler-token-1");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << status.error_message();
  EXPECT_EQ(PushOfuWindows("sdk-token-1").error_code(), grpc::StatusCode::PERMISSION_DENIED);
}

TEST_F(WithAuth, DeclaredRolesAreLetThrough) {
  grpc::Status sdk = ReportMfu("sdk-token-1");
  EXPECT_TRUE(PassedAuth(sdk)) << sdk.error_code() << " " << sdk.error_message();
  grpc::Status service = PushOfuWindows("service-token-1");
  EXPECT_TRUE(PassedAuth(service)) << service.error_code() << " " << service.error_message();
}

TEST_F(WithAuth, HealthNeedsNoToken) {
  EXPECT_EQ(HealthOf(mfu_->Channel(), "goodput.v1.MfuService"), "SERVING");
}

}  // namespace
}  // namespace goodput::testing
