// goodput-mfu with a real PostgreSQL: framework MFU reports land durably, retried reports are
// not stored twice, malformed reports are refused with reasons while good ones in the same
// stream are kept, reports of jobs that register late are attached, and the Python SDK's
// reports land.
#include <chrono>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "goodput/v1/mfu.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/postgres_server.h"
#include "tests/support/sdk_python.h"
#include "tests/support/service_process.h"
#include "tests/support/test_steps.h"

namespace goodput::testing {
namespace {

namespace v1 = ::goodput::v1;

using ::testing::HasSubstr;

constexpr int64_t kT0 = 1'780'000'000;

v1::MfuReport MakeReport(const std::string& id, const std::string& job_id, int64_t start_s,
                     double tflops_per_gpu) {
  v1::MfuReport r;
  r.set_report_id(id);
  r.mutable_job()->set_cluster("eos");
  r.mutable_job()->set_job_id(job_id);
  r.mutable_interval()->mutable_start_time()->set_seconds(start_s);
  r.mutable_interval()->mutable_end_time()->set_seconds(start_s + 60);
  r.set_model_tflops_per_gpu(tflops_per_gpu);
  r.set_precision(v1::PRECISION_BF16);
  r.set_framework("megatron-lm");
  return r;
}

class MfuReports : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(StartPostgres(&pg_));
    ASSERT_NO_FATAL_FAILURE(StartMigratedService("services/mfu/goodput-mfu", *pg_, &mfu_));
    stub_ = v1::MfuService::NewStub(mfu_->Channel());
  }

  void RegisterJob(const std::string& job_id, const std::string& gpu_model, int gpus) {
    std::string sql = absl::StrCat(
        "INSERT INTO jobs (cluster, job_id, gpu_model, start_time) VALUES ('eos', '", job_id,
        "', '", gpu_model, "', now() - interval '1 hour');");
    for (int i = 0; i < gpus; ++i) {
      absl::StrAppend(&sql, "INSERT INTO job_gpus (job, cluster, host, gpu_index, valid) "
                            "SELECT id, 'eos', 'node-", job_id, "', ", i,
                            ", tstzrange(now() - interval '1 hour', NULL) FROM jobs "
                            "WHERE cluster = 'eos' AND job_id = '", job_id, "';");
    }
    ASSERT_TRUE(pg_->Execute("goodput", sql).ok());
  }

  std::string Count(const std::string& where) {
    return QueryScalar(*pg_, absl::StrCat("SELECT count(*) FROM mfu_reports ", where));
  }

  grpc::Status Report(const v1::MfuReport& report, v1::ReportMfuResponse* response) {
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline());
    v1::ReportMfuRequest request;
    *request.mutable_report() = report;
    return stub_->ReportMfu(&ctx, request, response);
  }

  grpc::Status Stream(const std::vector<v1::StreamMfuReportsRequest>& batches,
                      v1::StreamMfuReportsResponse* response) {
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline());
    auto writer = stub_->StreamMfuReports(&ctx, response);
    for (const auto& batch : batches) {
      if (!writer->Write(batch)) break;
    }
    writer->WritesDone();
    return writer->Finish();
  }

  grpc::Status List(const v1::ListMfuReportsRequest& request, v1::ListMfuReportsResponse* page) {
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline());
    return stub_->ListMfuReports(&ctx, request, page);
  }

  std::unique_ptr<PostgresServer> pg_;
  std::unique_ptr<ServiceProcess> mfu_;
  std::unique_ptr<v1::MfuService::Stub> stub_;
};

TEST_F(MfuReports, AReportLandsWithAppMfuAgainstTheJobsGpuModel) {
  RegisterJob("100", kH100, 8);
  v1::ReportMfuResponse response;
  grpc::Status status = Report(MakeReport("a-1", "100", kT0, 400.0), &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.report_id(), "a-1");
  EXPECT_FALSE(response.duplicate());
  EXPECT_TRUE(response.job_registered());
  ASSERT_TRUE(response.has_app_mfu());
  EXPECT_NEAR(response.app_mfu(), 400.0 / kH100Bf16PeakTflops, 1e-9);
  EXPECT_NEAR(response.peak_tflops(), kH100Bf16PeakTflops, 1e-9);
  EXPECT_EQ(Count("WHERE report_id = 'a-1' AND job_id = '100'"), "1");
}

TEST_F(MfuReports, ARetriedReportIsAcknowledgedAsDuplicateAndStoredOnce) {
  RegisterJob("101", kH100, 8);
  v1::ReportMfuResponse first, second;
  ASSERT_TRUE(Report(MakeReport("dup-1", "101", kT0, 350.0), &first).ok());
  ASSERT_TRUE(Report(MakeReport("dup-1", "101", kT0, 350.0), &second).ok());
  EXPECT_FALSE(first.duplicate());
  EXPECT_TRUE(second.duplicate());

  // The same reports again in a stream, twice over: nothing more is stored.
  v1::StreamMfuReportsRequest batch;
  batch.set_batch_id("b-1");
  *batch.add_reports() = MakeReport("dup-1", "101", kT0, 350.0);
  *batch.add_reports() = MakeReport("dup-2", "101", kT0 + 60, 350.0);
  v1::StreamMfuReportsResponse response;
  ASSERT_TRUE(Stream({batch, batch}, &response).ok());
  EXPECT_EQ(response.stored_count(), 1);
  EXPECT_EQ(response.duplicate_count(), 3);
  EXPECT_EQ(response.refused_count(), 0);
  EXPECT_EQ(Count("WHERE job_id = '101'"), "2");
}

// Report ids are chosen by clients: one cluster's id must not make another cluster's real
// report a "duplicate" that is acknowledged with nothing stored.
TEST_F(MfuReports, TheSameReportIdInTwoClustersIsTwoReports) {
  RegisterJob("102", kH100, 8);
  v1::MfuReport eos = MakeReport("step-1000", "102", kT0, 350.0);
  v1::MfuReport selene = eos;
  selene.mutable_job()->set_cluster("selene");
  v1::ReportMfuResponse first, second;
  ASSERT_TRUE(Report(eos, &first).ok());
  ASSERT_TRUE(Report(selene, &second).ok());
  EXPECT_FALSE(first.duplicate());
  EXPECT_FALSE(second.duplicate());
  EXPECT_EQ(Count("WHERE report_id = 'step-1000'"), "2");
}

// Job timestamps from a clock that was never set, or a typo'd year, are refused by field.
TEST_F(MfuReports, AReportFromYear1970Or3000IsRefusedNamingTheField) {
  v1::ReportMfuResponse response;
  grpc::Status status = Report(MakeReport("epoch-1", "103", 1, 350.0), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("interval.start_time"));
  EXPECT_THAT(status.error_message(), HasSubstr("before 2000-01-01"));
  status = Report(MakeReport("y3000-1", "103", 32503680000, 350.0), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("after 2100-01-01"));
  EXPECT_EQ(Count(""), "0");
}

// One catalog for every service: a model the operator added under gpu_catalog.overrides has
// its peak in goodput-mfu too (it used to answer NOT_FOUND there while ofu knew it).
TEST_F(MfuReports, AnOperatorAddedGpuModelHasItsPeakInMfu) {
  mfu_.reset();
  ASSERT_NO_FATAL_FAILURE(StartService(
      {.binary = BuiltBinary("services/mfu/goodput-mfu"),
       .config_yaml = absl::StrCat(PostgresConfigYaml(*pg_),
                                   "gpu_catalog:\n  overrides:\n"
                                   "    - name: \"NVIDIA Imaginary X1\"\n"
                                   "      base_model: \"NVIDIA H100 80GB HBM3\"\n"
                                   "      tensor_max_clock_mhz: 915\n"),
       .extra_args = MigrateArgs()},
      &mfu_));
  stub_ = v1::MfuService::NewStub(mfu_->Channel());
  RegisterJob("104", "NVIDIA Imaginary X1", 8);
  v1::ReportMfuResponse response;
  grpc::Status status = Report(MakeReport("x1-1", "104", kT0, 247.35744), &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_TRUE(response.has_app_mfu());
  EXPECT_NEAR(response.peak_tflops(), kH100Bf16PeakTflops / 2, 1e-6);  // half the clock
  EXPECT_NEAR(response.app_mfu(), 0.5, 1e-6);
}

TEST_F(MfuReports, AMalformedUnaryReportIsRefusedNamingFieldAndValue) {
  v1::MfuReport bad = MakeReport("bad-1", "102", kT0, -5.0);
  v1::ReportMfuResponse response;
  grpc::Status status = Report(bad, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("model_tflops_per_gpu=-5"), std::string::npos)
      << status.error_message();
  EXPECT_EQ(Count(""), "0");
}

TEST_F(MfuReports, AStreamKeepsGoodReportsAndRefusesMalformedOnesWithReasons) {
  RegisterJob("103", kH100, 8);
  v1::StreamMfuReportsRequest batch;
  batch.set_batch_id("mixed");
  *batch.add_reports() = MakeReport("ok-1", "103", kT0, 400.0);
  *batch.add_reports() = MakeReport("neg", "103", kT0 + 60, -1.0);  // negative TFLOP/s
  v1::MfuReport shares = MakeReport("shares", "103", kT0 + 120, 400.0);
  auto* a = shares.add_precision_mix();
  a->set_precision(v1::PRECISION_BF16);
  a->set_flops_share(0.6);
  auto* b = shares.add_precision_mix();
  b->set_precision(v1::PRECISION_FP8);
  b->set_flops_share(0.6);
  *batch.add_reports() = shares;  // shares sum to 1.2
  v1::MfuReport unknown = MakeReport("unknown-precision", "103", kT0 + 180, 400.0);
  unknown.set_precision(static_cast<v1::Precision>(99));
  *batch.add_reports() = unknown;
  v1::MfuReport backwards = MakeReport("backwards", "103", kT0 + 240, 400.0);
  backwards.mutable_interval()->mutable_end_time()->set_seconds(kT0 + 200);
  *batch.add_reports() = backwards;
  *batch.add_reports() = MakeReport("ok-2", "103", kT0 + 300, 420.0);

  v1::StreamMfuReportsResponse response;
  grpc::Status status = Stream({batch}, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.stored_count(), 2);
  EXPECT_EQ(response.refused_count(), 4);
  ASSERT_EQ(response.refusals_size(), 4);
  std::map<std::string, v1::Refusal> by_id;
  for (const v1::Refusal& r : response.refusals()) by_id[r.item_id()] = r;
  EXPECT_EQ(by_id["neg"].field(), "model_tflops_per_gpu");
  EXPECT_EQ(by_id["neg"].value(), "-1");
  EXPECT_EQ(by_id["neg"].index(), 1);
  EXPECT_EQ(by_id["neg"].batch_id(), "mixed");
  EXPECT_EQ(by_id["shares"].field(), "precision_mix");
  EXPECT_EQ(by_id["shares"].value(), "sum 1.2");
  EXPECT_EQ(by_id["unknown-precision"].field(), "precision");
  EXPECT_EQ(by_id["unknown-precision"].code(), v1::REFUSAL_CODE_UNKNOWN_VALUE);
  EXPECT_EQ(by_id["backwards"].field(), "interval.end_time");
  EXPECT_NE(by_id["neg"].message().find("mixed"), std::string::npos) << by_id["neg"].message();
  EXPECT_EQ(Count("WHERE job_id = '103'"), "2");
  EXPECT_EQ(Count("WHERE report_id IN ('ok-1', 'ok-2')"), "2");
}

TEST_F(MfuReports, ReportsOfAnUnregisteredJobAreKeptAndAttachedWhenItRegisters) {
  v1::ReportMfuResponse response;
  ASSERT_TRUE(Report(MakeReport("early-1", "104", kT0, 400.0), &response).ok());
  EXPECT_FALSE(response.job_registered());
  EXPECT_FALSE(response.has_app_mfu());

  v1::ListMfuReportsRequest unattached;
  unattached.set_unattached_only(true);
  v1::ListMfuReportsResponse page;
  ASSERT_TRUE(List(unattached, &page).ok());
  ASSERT_EQ(page.reports_size(), 1);
  EXPECT_EQ(page.reports(0).report().report_id(), "early-1");
  EXPECT_FALSE(page.reports(0).job_registered());
  EXPECT_FALSE(page.reports(0).has_app_mfu());

  RegisterJob("104", kH100, 8);
  v1::ListMfuReportsRequest of_job;
  of_job.mutable_job()->set_cluster("eos");
  of_job.mutable_job()->set_job_id("104");
  ASSERT_TRUE(List(of_job, &page).ok());
  ASSERT_EQ(page.reports_size(), 1);
  EXPECT_TRUE(page.reports(0).job_registered());
  ASSERT_TRUE(page.reports(0).has_app_mfu());
  EXPECT_NEAR(page.reports(0).app_mfu(), 400.0 / kH100Bf16PeakTflops, 1e-9);
  EXPECT_EQ(page.reports(0).report().framework(), "megatron-lm");
  // The computed figure is persisted with the report.
  EXPECT_EQ(Count("WHERE report_id = 'early-1' AND app_mfu IS NOT NULL"), "1");
  ASSERT_TRUE(List(unattached, &page).ok());
  EXPECT_EQ(page.reports_size(), 0);
}

TEST_F(MfuReports, ListingPaginatesInIntervalOrder) {
  RegisterJob("105", kH100, 8);
  v1::StreamMfuReportsRequest batch;
  batch.set_batch_id("many");
  for (int i = 24; i >= 0; --i) {
    *batch.add_reports() = MakeReport(absl::StrCat("p-", i), "105", kT0 + 60 * i, 300.0 + i);
  }
  v1::StreamMfuReportsResponse stored;
  ASSERT_TRUE(Stream({batch}, &stored).ok());
  ASSERT_EQ(stored.stored_count(), 25);

  v1::ListMfuReportsRequest request;
  request.mutable_job()->set_cluster("eos");
  request.mutable_job()->set_job_id("105");
  request.set_page_size(10);
  std::vector<std::string> seen;
  for (int pages = 0; pages < 10; ++pages) {
    v1::ListMfuReportsResponse page;
    ASSERT_TRUE(List(request, &page).ok());
    for (const auto& r : page.reports()) seen.push_back(r.report().report_id());
    if (page.next_page_token().empty()) break;
    request.set_page_token(page.next_page_token());
  }
  ASSERT_EQ(seen.size(), 25u);
  for (int i = 0; i < 25; ++i) EXPECT_EQ(seen[i], absl::StrCat("p-", i));

  // Only reports overlapping the range.
  v1::ListMfuReportsRequest ranged;
  *ranged.mutable_job() = request.job();
  ranged.mutable_time_range()->mutable_start_time()->set_seconds(kT0 + 60 * 10);
  ranged.mutable_time_range()->mutable_end_time()->set_seconds(kT0 + 60 * 12);
  v1::ListMfuReportsResponse page;
  ASSERT_TRUE(List(ranged, &page).ok());
  ASSERT_EQ(page.reports_size(), 2);
  EXPECT_EQ(page.reports(0).report().report_id(), "p-10");

  v1::ListMfuReportsRequest bad_token = request;
  bad_token.set_page_token("not a token");
  EXPECT_EQ(List(bad_token, &page).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(MfuReports, ThePythonSdkPostsReportsThatLand) {
  const std::string python = SdkPython();
  // python3-grpcio and python3-protobuf are dependencies (scripts/install-deps.sh): their
  // absence is a broken machine, not a reason to skip.
  ASSERT_FALSE(python.empty())
      << "no python3 with grpc and protobuf was found by CMake; run scripts/install-deps.sh";
  RegisterJob("py-1", kH100, 8);
  const std::string script = R"(
import sys
from goodput_sdk import Reporter
reporter = Reporter(endpoint=sys.argv[1], job="py-1", cluster="eos", framework="sdk-test",
                    flush_interval_s=0.05, batch_size=7)
for step in range(40):
    reporter.report(tflops_per_gpu=400.0, step=step, precision="bf16", interval_s=1.0)
reporter.report(tflops_per_gpu=410.0, step=40, precision_mix={"bf16": 0.5, "fp8": 0.5},
                interval_s=1.0)
flushed = reporter.flush(30)
stats = reporter.stats()
print("flushed", flushed, "sent", stats.sent, "refused", stats.refused, "failed", stats.failed)
reporter.close(5)
sys.exit(0 if flushed and stats.sent == 41 else 1)
)";
  absl::StatusOr<ProgramResult> result = RunSdkScript(python, script, mfu_->grpc_address());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->exit.exit_code, 0) << result->output;
  EXPECT_EQ(Count("WHERE job_id = 'py-1'"), "41");
  EXPECT_EQ(Count("WHERE job_id = 'py-1' AND app_mfu IS NOT NULL"), "41");

  v1::ListMfuReportsRequest request;
  request.mutable_job()->set_cluster("eos");
  request.mutable_job()->set_job_id("py-1");
  request.set_page_size(1000);
  v1::ListMfuReportsResponse page;
  ASSERT_TRUE(List(request, &page).ok());
  ASSERT_EQ(page.reports_size(), 41);
  int mixed = 0;
  for (const auto& r : page.reports()) {
    EXPECT_EQ(r.report().framework(), "sdk-test");
    EXPECT_EQ(r.report().source(), v1::MFU_REPORT_SOURCE_SDK);
    if (r.report().precision_mix_size() == 2) {
      ++mixed;
      EXPECT_NEAR(r.peak_tflops(), 1319.2, 0.1);  // P_eff of half BF16, half FP8 on H100
    }
  }
  EXPECT_EQ(mixed, 1);
}

}  // namespace
}  // namespace goodput::testing
