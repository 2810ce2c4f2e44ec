#include "services/mfu/report_check.h"

#include <limits>

#include "gtest/gtest.h"

namespace goodput::mfu {
namespace {

constexpr char kH100[] = "NVIDIA H100 80GB HBM3";

v1::MfuReport GoodReport() {
  v1::MfuReport r;
  r.set_report_id("r-1");
  r.mutable_job()->set_cluster("eos");
  r.mutable_job()->set_job_id("42");
  r.mutable_interval()->mutable_start_time()->set_seconds(1'700'000'000);
  r.mutable_interval()->mutable_end_time()->set_seconds(1'700'000'060);
  r.set_model_tflops_per_gpu(400);
  r.set_precision(v1::PRECISION_BF16);
  return r;
}

TEST(CheckReport, AcceptsAWellFormedReport) { EXPECT_FALSE(CheckReport(GoodReport())); }

TEST(StatedGpuCount, IsTheCountOfTheWholeJobFormsAndZeroForPerGpuForms) {
  v1::MfuReport r;
  r.mutable_total_throughput()->set_gpu_count(7);
  EXPECT_EQ(StatedGpuCount(r), 7);
  r.mutable_step_flops()->set_gpu_count(256);
  EXPECT_EQ(StatedGpuCount(r), 256);
  r.mutable_step_flops()->set_gpu_count(0);
  EXPECT_EQ(StatedGpuCount(r), 0);
  r.set_model_tflops_per_gpu(400);
  EXPECT_EQ(StatedGpuCount(r), 0);
  r.set_mfu(0.4);
  EXPECT_EQ(StatedGpuCount(r), 0);
}

TEST(CheckReport, RefusesNegativeTflopsNamingFieldAndValue) {
  v1::MfuReport r = GoodReport();
  r.set_model_tflops_per_gpu(-3.5);
  std::optional<v1::Refusal> refusal = CheckReport(r);
  ASSERT_TRUE(refusal);
  EXPECT_EQ(refusal->field(), "model_tflops_per_gpu");
  EXPECT_EQ(refusal->value(), "-3.5");
  EXPECT_EQ(refusal->code(), v1::REFUSAL_CODE_OUT_OF_RANGE);
  EXPECT_EQ(refusal->item_id(), "r-1");
  EXPECT_NE(refusal->message().find("model_tflops_per_gpu=-3.5"), std::string::npos);
}

TEST(CheckReport, RefusesPrecisionSharesNotSummingToOne) {
  v1::MfuReport r = GoodReport();
  auto* a = r.add_precision_mix();
  a->set_precision(v1::PRECISION_BF16);
  a->set_flops_share(0.5);
  auto* b = r.add_precision_mix();
  b->set_precision(v1::PRECISION_FP8);
  b->set_flops_share(0.3);
  std::optional<v1::Refusal> refusal = CheckReport(r);
  ASSERT_TRUE(refusal);
  EXPECT_EQ(refusal->field(), "precision_mix");
  EXPECT_EQ(refusal->value(), "sum 0.8");
}

TEST(CheckReport, RefusesUnknownPrecisions) {
  v1::MfuReport r = GoodReport();
  r.set_precision(static_cast<v1::Precision>(42));
  std::optional<v1::Refusal> refusal = CheckReport(r);
  ASSERT_TRUE(refusal);
  EXPECT_EQ(refusal->field(), "precision");
  EXPECT_EQ(refusal->value(), "42");
  EXPECT_EQ(refusal->code(), v1::REFUSAL_CODE_UNKNOWN_VALUE);

  v1::MfuReport mix = GoodReport();
  mix.add_precision_mix()->set_flops_share(1.0);  // PRECISION_UNSPECIFIED
  refusal = CheckReport(mix);
  ASSERT_TRUE(refusal);
  EXPECT_EQ(refusal->field(), "precision_mix[0].precision");
}

TEST(CheckReport, RefusesMissingJobKeyMeasurementAndId) {
  v1::MfuReport r = GoodReport();
  r.mutable_job()->clear_job_id();
  ASSERT_TRUE(CheckReport(r));
  EXPECT_EQ(CheckReport(r)->field(), "job.job_id");

  r = GoodReport();
  r.clear_job();
  EXPECT_EQ(CheckReport(r)->field(), "job.cluster");

  r = GoodReport();
  r.clear_model_tflops_per_gpu();
  EXPECT_EQ(CheckReport(r)->field(), "measurement");
  EXPECT_EQ(CheckReport(r)->code(), v1::REFUSAL_CODE_MISSING_FIELD);

  r = GoodReport();
  r.clear_report_id();
  EXPECT_EQ(CheckReport(r)->field(), "report_id");
}

TEST(CheckReport, RefusesUnsafeJobIdsAndOversizedTextNamingTheField) {
  v1::MfuReport r = GoodReport();
  r.mutable_job()->set_job_id("-42");
  ASSERT_TRUE(CheckReport(r));
  EXPECT_EQ(CheckReport(r)->field(), "job.job_id");
  EXPECT_EQ(CheckReport(r)->code(), v1::REFUSAL_CODE_MALFORMED);
  EXPECT_EQ(CheckReport(r)->message(),
            "report \"r-1\": job.job_id=\"-42\" starts with '-', which a command would read as "
            "an option; a job id may not");

  r = GoodReport();
  r.set_framework(std::string(kMaxReportTextBytes + 1, 'f'));
  ASSERT_TRUE(CheckReport(r));
  EXPECT_EQ(CheckReport(r)->field(), "framework");

  r = GoodReport();
  r.set_flops_formula(std::string("6ND\0", 4));
  ASSERT_TRUE(CheckReport(r));
  EXPECT_EQ(CheckReport(r)->field(), "flops_formula");

  r = GoodReport();
  for (int i = 0; i <= kMaxReportLabels; ++i) (*r.mutable_labels())[std::to_string(i)] = "v";
  ASSERT_TRUE(CheckReport(r));
  EXPECT_EQ(CheckReport(r)->field(), "labels");

  r = GoodReport();
  (*r.mutable_labels())["model"] = std::string(api::kMaxLabelValueBytes + 1, 'm');
  ASSERT_TRUE(CheckReport(r));
  EXPECT_EQ(CheckReport(r)->field(), "labels[model]");

  r = GoodReport();  // markup is text: the dashboard escapes it
  r.set_framework("<script>alert(1)</script>");
  EXPECT_FALSE(CheckReport(r));
}

TEST(CheckReport, RefusesAnIntervalEndingBeforeItStarts) {
  v1::MfuReport r = GoodReport();
  r.mutable_interval()->mutable_end_time()->set_seconds(1'699'999'999);
  std::optional<v1::Refusal> refusal = CheckReport(r);
  ASSERT_TRUE(refusal);
  EXPECT_EQ(refusal->field(), "interval.end_time");
  EXPECT_EQ(refusal->code(), v1::REFUSAL_CODE_INCONSISTENT);
}

TEST(CheckReport, RefusesNonFiniteAndOutOfRangeMfu) {
  v1::MfuReport r = GoodReport();
  r.set_mfu(std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(CheckReport(r)->code(), v1::REFUSAL_CODE_NOT_FINITE);
  r.set_mfu(54.0);  // percent instead of fraction
  EXPECT_EQ(CheckReport(r)->field(), "mfu");
  EXPECT_EQ(CheckReport(r)->code(), v1::REFUSAL_CODE_OUT_OF_RANGE);
  r.set_mfu(1.2);  // overcount evidence is kept
  EXPECT_FALSE(CheckReport(r));
}

TEST(ComputeAppMfu, UsesTheDensePeakOfTheJobsGpuModel) {
  absl::StatusOr<AppMfu> app = ComputeAppMfu(GoodReport(), kH100, 8);
  ASSERT_TRUE(app.ok()) << app.status();
  EXPECT_NEAR(app->app_mfu, 400.0 / 989.42976, 1e-9);
  ASSERT_TRUE(app->peak_tflops);
  EXPECT_NEAR(*app->peak_tflops, 989.42976, 1e-9);
}

TEST(ComputeAppMfu, PerStepFlopsUseTheAllocatedGpuCountWhenNoneIsGiven) {
  v1::MfuReport r = GoodReport();
  r.mutable_step_flops()->set_flops_per_step(8 * 400e12);
  r.mutable_step_flops()->set_step_time_s(1.0);
  absl::StatusOr<AppMfu> app = ComputeAppMfu(r, kH100, 8);
  ASSERT_TRUE(app.ok()) << app.status();
  EXPECT_NEAR(app->app_mfu, 400.0 / 989.42976, 1e-9);
  EXPECT_EQ(ComputeAppMfu(r, kH100, 0).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(ComputeAppMfu, WaitsForTheGpuModelUnlessTheFrameworkGaveMfu) {
  EXPECT_EQ(ComputeAppMfu(GoodReport(), "", 0).status().code(), absl::StatusCode::kNotFound);
  v1::MfuReport r = GoodReport();
  r.set_mfu(0.41);
  absl::StatusOr<AppMfu> app = ComputeAppMfu(r, "", 0);
  ASSERT_TRUE(app.ok());
  EXPECT_DOUBLE_EQ(app->app_mfu, 0.41);
}

TEST(ComputeAppMfu, AnUnknownGpuModelIsNotFound) {
  EXPECT_EQ(ComputeAppMfu(GoodReport(), "NVIDIA Imaginary 9000", 8).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(ComputeAppMfu, AMixUsesTheEffectivePeak) {
  v1::MfuReport r = GoodReport();
  auto* a = r.add_precision_mix();
  a->set_precision(v1::PRECISION_BF16);
  a->set_flops_share(0.5);
  auto* b = r.add_precision_mix();
  b->set_precision(v1::PRECISION_FP8);
  b->set_flops_share(0.5);
  absl::StatusOr<AppMfu> app = ComputeAppMfu(r, kH100, 8);
  ASSERT_TRUE(app.ok()) << app.status();
  ASSERT_TRUE(app->peak_tflops);
  EXPECT_NEAR(*app->peak_tflops, 1319.2, 0.1);  // domain eq. 12
}

}  // namespace
}  // namespace goodput::mfu
