// The SDKs reporting into a running goodput-mfu: what a training job reports with the C++
// client or the Python package lands and shows up in the job's reconciliation next to the
// OFU of the same windows.
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "goodput/v1/mfu.grpc.pb.h"
#include "gtest/gtest.h"
#include "sdk/cpp/reporter.h"
#include "tests/support/postgres_server.h"
#include "tests/support/sdk_python.h"
#include "tests/support/service_process.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_steps.h"

namespace goodput::testing {
namespace {

namespace v1 = ::goodput::v1;

class MfuSdk : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(StartPostgres(&pg_));
    ASSERT_NO_FATAL_FAILURE(StartMigratedService("services/mfu/goodput-mfu", *pg_, &mfu_));
    stub_ = v1::MfuService::NewStub(mfu_->Channel());
  }

  // Registers the job and pushes `n` one-minute OFU windows of 0.40 from `start_s`, as ofu
  // would.
  void JobWithWindows(const std::string& job_id, int64_t start_s, int n) {
    ASSERT_TRUE(
        pg_->Execute("goodput", absl::StrCat("INSERT INTO jobs (cluster, job_id, gpu_model, "
                                             "gpu_count) VALUES ('eos', '",
                                             job_id, "', '", kH100, "', 8)"))
            .ok());
    v1::PushOfuWindowsRequest req;
    req.mutable_position()->set_producer_id(absl::StrCat("ofu-", job_id));
    req.mutable_position()->set_sequence(1);
    for (int i = 0; i < n; ++i) {
      v1::OfuWindow* w = req.add_windows();
      w->mutable_job()->set_cluster("eos");
      w->mutable_job()->set_job_id(job_id);
      w->mutable_start_time()->set_seconds(start_s + 60 * i);
      w->mutable_end_time()->set_seconds(start_s + 60 * (i + 1));
      w->set_window_s(60);
      w->set_gpu_model(kH100);
      w->set_ofu(0.40);
      w->set_ofu_ci95_low(0.399);
      w->set_ofu_ci95_high(0.401);
      w->set_gpus_allocated(8);
      w->set_gpus_reporting(8);
      w->set_gpu_coverage(1.0);
    }
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline());
    v1::PushOfuWindowsResponse resp;
    grpc::Status s = stub_->PushOfuWindows(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    ASSERT_EQ(resp.ack().watermark_sequence(), 1);
  }

  v1::GetReconciliationResponse Reconciliation(const std::string& job_id) {
    v1::GetReconciliationRequest req;
    req.mutable_job()->set_cluster("eos");
    req.mutable_job()->set_job_id(job_id);
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline());
    v1::GetReconciliationResponse resp;
    grpc::Status s = stub_->GetReconciliation(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp;
  }

  std::unique_ptr<PostgresServer> pg_;
  std::unique_ptr<ServiceProcess> mfu_;
  std::unique_ptr<v1::MfuService::Stub> stub_;
};

TEST_F(MfuSdk, CppReporterFiguresAppearInTheReconciliation) {
  constexpr int64_t kStart = 1'780'000'020;
  JobWithWindows("cpp-1", kStart, 12);
  absl::StatusOr<std::unique_ptr<sdk::Reporter>> reporter =
      sdk::Reporter::Create({.endpoint = mfu_->grpc_address(),
                             .cluster = "eos",
                             .job_id = "cpp-1",
                             .framework = "cpp-sdk-test",
                             .flush_interval = absl::Milliseconds(50)});
  ASSERT_TRUE(reporter.ok()) << reporter.status();
  const double tflops = 0.41 * kH100Bf16PeakTflops;
  for (int i = 0; i < 12; ++i) {
    // Figures logged per minute, replayed with their own times.
    ASSERT_TRUE((*reporter)->Report({.tflops_per_gpu = tflops,
                                     .step = i * 100,
                                     .precision = v1::PRECISION_BF16,
                                     .interval_s = 60.0,
                                     .end_time = absl::FromUnixSeconds(kStart + 60 * (i + 1))}));
  }
  ASSERT_TRUE((*reporter)->Flush(absl::Seconds(30)));
  EXPECT_EQ((*reporter)->Stats().sent, 12);

  v1::GetReconciliationResponse rec = Reconciliation("cpp-1");
  ASSERT_EQ(rec.points_size(), 12);
  for (const v1::ReconciliationPoint& p : rec.points()) {
    ASSERT_TRUE(p.has_app_mfu());
    EXPECT_NEAR(p.app_mfu(), 0.41, 1e-9);
    EXPECT_NEAR(p.difference_pp(), 1.0, 1e-6);
    EXPECT_EQ(p.report_count(), 1);
  }
  EXPECT_EQ(rec.framework(), "cpp-sdk-test");
  EXPECT_EQ(rec.verdict().verdict(), v1::VERDICT_CONSISTENT) << rec.verdict().reason();
}

TEST_F(MfuSdk, PythonReporterFiguresAppearInTheReconciliation) {
  const std::string python = SdkPython();
  // python3-grpcio and python3-protobuf are dependencies (scripts/install-deps.sh): their
  // absence is a broken machine, not a reason to skip.
  ASSERT_FALSE(python.empty())
      << "no python3 with grpc and protobuf was found by CMake; run scripts/install-deps.sh";
  // The Python reporter stamps reports with the current time: windows around now.
  const int64_t now_s = absl::ToUnixSeconds(absl::Now());
  const int64_t start_s = now_s - now_s % 60 - 600;
  JobWithWindows("py-rec", start_s, 20);
  const std::string script = R"(
import sys
from goodput_sdk import Reporter
reporter = Reporter(endpoint=sys.argv[1], job="py-rec", cluster="eos", framework="py-sdk-test",
                    flush_interval_s=0.05)
for step in range(30):
    reporter.report(tflops_per_gpu=400.0, step=step, precision="bf16", interval_s=1.0)
ok = reporter.flush(30)
reporter.close(5)
sys.exit(0 if ok and reporter.stats().sent == 30 else 1)
)";
  absl::StatusOr<ProgramResult> result = RunSdkScript(python, script, mfu_->grpc_address());
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->exit.exit_code, 0) << result->output;

  v1::GetReconciliationResponse rec = Reconciliation("py-rec");
  int reports = 0;
  int with_mfu = 0;
  for (const v1::ReconciliationPoint& p : rec.points()) {
    reports += p.report_count();
    if (p.has_app_mfu()) {
      ++with_mfu;
      EXPECT_NEAR(p.app_mfu(), 400.0 / kH100Bf16PeakTflops, 1e-9);
      EXPECT_NEAR(p.ofu(), 0.40, 1e-12);
    }
  }
  // A report straddling a window boundary counts in both windows.
  EXPECT_GE(reports, 30);
  EXPECT_GE(with_mfu, 1);
  EXPECT_EQ(rec.framework(), "py-sdk-test");
}

TEST_F(MfuSdk, TheWheelInstallsIntoAFreshVenvAndReports) {
  // What a new user does: pip-install the wheel the build made, offline, into a clean venv
  // that sees the system's grpcio and protobuf, and report from a job.
  const std::string python = SdkPython();
  ASSERT_FALSE(python.empty())
      << "no python3 with grpc and protobuf was found by CMake; run scripts/install-deps.sh";
  const std::filesystem::path dist = BuiltBinary("sdk/dist");
  std::string wheel;
  if (std::filesystem::is_directory(dist)) {
    for (const auto& entry : std::filesystem::directory_iterator(dist)) {
      if (entry.path().extension() == ".whl") wheel = entry.path().string();
    }
  }
  ASSERT_FALSE(wheel.empty()) << "no wheel in " << dist
                              << ": the build makes it (target goodput_sdk_wheel; needs "
                                 "python3-pip python3-setuptools python3-wheel)";
  absl::StatusOr<TempDir> dir = TempDir::Create("goodput-venv");
  ASSERT_TRUE(dir.ok()) << dir.status();
  const std::string venv = (dir->path() / "venv").string();
  absl::StatusOr<ProgramResult> made =
      RunProgram({python, "-m", "venv", "--system-site-packages", venv}, {}, absl::Seconds(120));
  ASSERT_TRUE(made.ok()) << made.status();
  ASSERT_EQ(made->exit.exit_code, 0) << made->output;
  absl::StatusOr<ProgramResult> installed = RunProgram(
      {venv + "/bin/python", "-m", "pip", "install", "--no-index", "--no-cache-dir", wheel},
      {{"PIP_DISABLE_PIP_VERSION_CHECK", "1"}}, absl::Seconds(120));
  ASSERT_TRUE(installed.ok()) << installed.status();
  ASSERT_EQ(installed->exit.exit_code, 0) << installed->output;

  const int64_t now_s = absl::ToUnixSeconds(absl::Now());
  JobWithWindows("py-wheel", now_s - now_s % 60 - 600, 20);
  // Rank 0 of a torchrun job reports; rank 1 of the same job stays silent by default.
  const std::string script = R"(
import os, sys
import goodput_sdk
from goodput_sdk import Reporter
assert "/venv/" in goodput_sdk.__file__, goodput_sdk.__file__
rank1 = Reporter(endpoint=sys.argv[1], job="py-wheel", cluster="eos",
                 environ={"RANK": "1", "WORLD_SIZE": "2"})
assert not rank1.enabled
reporter = Reporter(endpoint=sys.argv[1], job="py-wheel", cluster="eos", framework="wheel-test",
                    flush_interval_s=0.05, environ={"RANK": "0", "WORLD_SIZE": "2"})
for step in range(10):
    reporter.report(tflops_per_gpu=400.0, step=step, precision="bf16", interval_s=1.0)
ok = reporter.flush(30)
reporter.close(5)
sys.exit(0 if ok and reporter.stats().sent == 10 else 1)
)";
  absl::StatusOr<ProgramResult> result =
      RunProgram({venv + "/bin/python", "-c", script, mfu_->grpc_address()},
                 {{"PYTHONDONTWRITEBYTECODE", "1"}}, absl::Seconds(120));
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->exit.exit_code, 0) << result->output;
  v1::GetReconciliationResponse rec = Reconciliation("py-wheel");
  int reports = 0;
  for (const v1::ReconciliationPoint& p : rec.points()) reports += p.report_count();
  EXPECT_GE(reports, 10);
  EXPECT_EQ(rec.framework(), "wheel-test");
}

}  // namespace
}  // namespace goodput::testing
