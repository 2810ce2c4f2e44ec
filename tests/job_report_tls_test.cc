// goodput-alerting's job reporter calls its producers (ofu's GetJobSummary, mfu's
// GetReconciliation) over the deployment's TLS (tls.ca_file), as every service-to-service call
// is: with ofu and mfu serving TLS only, a report that carries ofu's figures and mfu's answer
// was read through TLS channels; a plaintext client is refused by the same ofu.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "goodput/v1/ofu.grpc.pb.h"
#include "goodput/v1/report.grpc.pb.h"
#include "gtest/gtest.h"
#include "services/platform/test_pki.h"
#include "services/platform/tls.h"
#include "tests/support/free_port.h"
#include "tests/support/postgres_server.h"
#include "tests/support/redis_server.h"
#include "tests/support/service_process.h"
#include "tests/support/test_steps.h"

namespace goodput::testing {
namespace {

namespace v1 = ::goodput::v1;
using ::goodput::platform::TestPki;

constexpr int64_t kStartMs = 1'767'225'600'000;  // 2026-01-01T00:00:00Z
constexpr int kMinutes = 5;
constexpr int kGpus = 2;

std::string Ts(int64_t ms) {
  return absl::StrCat("(timestamptz 'epoch' + ", ms, " * interval '1 millisecond')");
}

TEST(JobReportTls, AlertingReadsOfuAndMfuThroughTheConfiguredTls) {
  absl::StatusOr<TestPki> pki = TestPki::Create();
  ASSERT_TRUE(pki.ok()) << pki.status();
  ASSERT_TRUE(pki->MakeCa("ca").ok());
  ASSERT_TRUE(pki->Issue("ca", "server").ok());
  std::unique_ptr<PostgresServer> pg;
  std::unique_ptr<RedisServer> redis;
  ASSERT_NO_FATAL_FAILURE(StartPostgres(&pg));
  ASSERT_NO_FATAL_FAILURE(StartRedis(&redis));
  // Every service serves TLS only and calls the others with tls.ca_file.
  const std::string common = absl::StrCat(
      PostgresConfigYaml(*pg), RedisConfigYaml(*redis), "tls:\n  cert_file: ", pki->crt("server"),
      "\n  key_file: ", pki->key("server"), "\n  ca_file: ", pki->crt("ca"), "\n");
  std::unique_ptr<ServiceProcess> mfu, alerting, ofu;
  ASSERT_NO_FATAL_FAILURE(StartService({.binary = BuiltBinary("services/mfu/goodput-mfu"),
                                        .config_yaml = common,
                                        .extra_args = MigrateArgs()},
                                       &mfu));
  absl::StatusOr<int> ofu_port = FreePort();
  ASSERT_TRUE(ofu_port.ok()) << ofu_port.status();
  ASSERT_NO_FATAL_FAILURE(StartService(
      {.binary = BuiltBinary("services/alerting/goodput-alerting"),
       .config_yaml =
           absl::StrCat(common, "alerting:\n  reports:\n    ofu_address: \"127.0.0.1:", *ofu_port,
                        "\"\n    mfu_address: \"", mfu->grpc_address(), "\"\n")},
      &alerting));
  ASSERT_NO_FATAL_FAILURE(StartService(
      {.binary = BuiltBinary("services/ofu/goodput-ofu"),
       .config_yaml = absl::StrCat(common, "grpc:\n  port: ", *ofu_port,
                                   "\nofu:\n  poll_interval_s: 0.1\n  idle_flush_s: 1\n"
                                   "  forward:\n    alerting_address: \"",
                                   alerting->grpc_address(), "\"\n")},
      &ofu));

  // An ended job with its telemetry, in one transaction.
  const int64_t end_ms = kStartMs + kMinutes * 60'000;
  std::vector<std::string> sql = {
      absl::StrCat("SELECT samples_create_partitions(", Ts(kStartMs), ", ",
                   Ts(kStartMs + 86'400'000), ")"),
      "BEGIN",
      absl::StrCat("INSERT INTO jobs (cluster, job_id, scheduler, user_name, gpu_model, state, "
                   "start_time, end_time) VALUES ('eos', '4711', 'slurm', 'alice', '",
                   kH100, "', 'completed', ", Ts(kStartMs), ", ", Ts(end_ms), ")")};
  std::vector<std::string> values;
  for (int g = 0; g < kGpus; ++g) {
    sql.push_back(absl::StrCat(
        "INSERT INTO job_gpus (job, cluster, host, gpu_index, valid) SELECT id, 'eos', 'n1', ", g,
        ", tstzrange(", Ts(kStartMs), ", ", Ts(end_ms), ") FROM jobs"));
    for (int t = 0; t < kMinutes * 60; t += 10) {
      values.push_back(
          absl::StrFormat("(%s, 'eos', 'n1', %d, '%s', (SELECT id FROM jobs), 0.4, 1755)",
                          Ts(kStartMs + t * 1000 + g * 11), g, kH100));
    }
  }
  sql.push_back(
      absl::StrCat("INSERT INTO samples (sample_time, cluster, host, gpu_index, "
                   "gpu_model, job, tensor_active, sm_clock_mhz) VALUES ",
                   absl::StrJoin(values, ",")));
  sql.push_back("COMMIT");
  ASSERT_TRUE(pg->Execute("goodput", absl::StrJoin(sql, ";\n")).ok());

  const platform::ClientTls tls{.ca_file = pki->crt("ca")};
  auto reports = v1::ReportService::NewStub(platform::MakeChannel(alerting->grpc_address(), tls));
  v1::JobReport report;
  grpc::Status last;
  ASSERT_TRUE(PollUntil(
      [&] {
        grpc::ClientContext ctx;
        v1::GetJobReportRequest request;
        request.mutable_job()->set_cluster("eos");
        request.mutable_job()->set_job_id("4711");
        v1::GetJobReportResponse response;
        last = reports->GetJobReport(&ctx, request, &response);
        report = response.report();
        return last.ok() && report.final() && report.summary().has_ofu();
      },
      absl::Seconds(90)))
      << last.error_message() << "\n"
      << report.DebugString() << "\n"
      << alerting->process().LogTail();
  // ofu's figures (GetJobSummary) and mfu's answer (GetReconciliation: a verdict, or none for
  // want of framework reports), both over TLS: a part that cannot be read holds the report.
  EXPECT_NEAR(report.summary().gpu_hours(), kGpus * kMinutes / 60.0, 0.01);
  EXPECT_TRUE(report.has_reconciliation() ||
              report.reconciliation_note() == "no framework MFU reports")
      << report.reconciliation_note();

  // The same ofu refuses a plaintext client: the reporter's channels could only be TLS.
  auto plain = v1::OfuService::NewStub(ofu->Channel());
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::GetJobSummaryRequest request;
  request.mutable_job()->set_cluster("eos");
  request.mutable_job()->set_job_id("4711");
  v1::GetJobSummaryResponse response;
  EXPECT_FALSE(plain->GetJobSummary(&ctx, request, &response).ok());
}

}  // namespace
}  // namespace goodput::testing
