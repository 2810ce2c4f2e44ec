#include "services/mfu/reconcile.h"

#include <vector>

#include "gtest/gtest.h"

namespace goodput::mfu {
namespace {

constexpr int64_t kUs = 1000000;

std::vector<WindowInput> Windows(int n, double ofu) {
  std::vector<WindowInput> w;
  for (int i = 0; i < n; ++i) {
    w.push_back({.start_us = i * 60 * kUs,
                 .end_us = (i + 1) * 60 * kUs,
                 .ofu = ofu,
                 .ofu_ci95_low = ofu - 0.002,
                 .ofu_ci95_high = ofu + 0.002,
                 .gpu_coverage = 1.0,
                 .gpus_allocated = 8});
  }
  return w;
}

ReportInput Report(int64_t start_s, int64_t end_s, double mfu) {
  return {.start_us = start_s * kUs,
          .end_us = end_s * kUs,
          .app_mfu = mfu,
          .precision_mix = {{4, 1.0}},
          .peak_tflops = 989.4};
}

TEST(Reconcile, AppMfuIsOverlapWeightedOverExactlyTheWindow) {
  // Window [0, 60): a report at 0.40 covering [0, 30) and one at 0.20 covering [30, 90).
  std::vector<ReportInput> reports = {Report(0, 30, 0.40), Report(30, 90, 0.20)};
  absl::StatusOr<JobReconciliation> r = Reconcile(Windows(2, 0.25), reports);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->points.size(), 2u);
  ASSERT_TRUE(r->points[0].app_mfu.has_value());
  EXPECT_NEAR(*r->points[0].app_mfu, 0.30, 1e-12);
  EXPECT_EQ(r->points[0].report_count, 2);
  EXPECT_NEAR(*r->points[0].difference_pp, 5.0, 1e-9);
  EXPECT_NEAR(*r->points[0].ratio, 1.2, 1e-12);
  // The second window is covered for [60, 90) only: half of it.
  EXPECT_NEAR(*r->points[1].app_mfu, 0.20, 1e-12);
  EXPECT_TRUE(r->points[1].paired);
}

TEST(Reconcile, ALongReportCountsInEveryWindowItSpansBesideShortOnes) {
  // One report over ten minutes at 0.30 and one-minute reports at 0.50 in the first minutes.
  std::vector<ReportInput> reports = {Report(0, 600, 0.30), Report(0, 60, 0.50),
                                      Report(60, 120, 0.50)};
  absl::StatusOr<JobReconciliation> r = Reconcile(Windows(10, 0.3), reports);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->points[0].report_count, 2);
  EXPECT_NEAR(*r->points[0].app_mfu, 0.40, 1e-12);
  EXPECT_EQ(r->points[1].report_count, 2);
  for (int i = 2; i < 10; ++i) {
    EXPECT_EQ(r->points[i].report_count, 1) << i;
    EXPECT_NEAR(*r->points[i].app_mfu, 0.30, 1e-12) << i;
  }
}

TEST(Reconcile, WindowsWithoutEnoughReportCoverageAreShownButNotJudged) {
  std::vector<ReportInput> reports = {Report(0, 10, 0.40)};
  absl::StatusOr<JobReconciliation> r = Reconcile(Windows(1, 0.25), reports);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->points[0].app_mfu.has_value());
  EXPECT_FALSE(r->points[0].paired);
  EXPECT_EQ(r->divergence.job.verdict, detect::Verdict::kInsufficientEvidence);
}

TEST(Reconcile, ThePapersMoeCaseIsAnOvercountWithTheLatentProjectionCause) {
  std::vector<ReportInput> reports;
  for (int i = 0; i < 30; ++i) reports.push_back(Report(i * 60, (i + 1) * 60, 0.5427));
  absl::StatusOr<JobReconciliation> r = Reconcile(Windows(30, 0.2558), reports);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->divergence.job.verdict, detect::Verdict::kAppFlopsOvercount);
  EXPECT_NEAR(r->divergence.job.ratio, 2.12, 0.01);
  ASSERT_FALSE(r->divergence.job.causes.empty());
  EXPECT_EQ(r->divergence.job.causes[0].cause, detect::Cause::kLatentProjectionMoe);
  EXPECT_EQ(r->points[5].verdict, detect::Verdict::kAppFlopsOvercount);
}

// A job of 7 ranks on 8 GPUs, one idle: the framework states its throughput over its 7 GPUs
// (40% MFU there), OFU over the 8 is 35%. Compared over the same 8 GPUs they agree; the
// same figure per GPU of the job (no count stated) reads as an overcount of 8/7.
TEST(Reconcile, AReportOverFewerGpusThanTheJobIsComparedOverTheAllocationAsOfuIs) {
  std::vector<ReportInput> reports;
  for (int i = 0; i < 30; ++i) {
    reports.push_back(Report(i * 60, (i + 1) * 60, 0.40));
    reports.back().gpu_count = 7;
  }
  absl::StatusOr<JobReconciliation> r = Reconcile(Windows(30, 0.35), reports);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(*r->points[0].app_mfu, 0.35, 1e-12);
  EXPECT_NEAR(*r->points[0].ratio, 1.0, 1e-12);
  EXPECT_EQ(r->divergence.job.verdict, detect::Verdict::kConsistent);

  for (ReportInput& report : reports) report.gpu_count = 0;
  r = Reconcile(Windows(30, 0.35), reports);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(*r->points[0].ratio, 8.0 / 7.0, 1e-12);
  EXPECT_EQ(r->divergence.job.verdict, detect::Verdict::kAppFlopsOvercount);

  // A count at or above the allocation (or an allocation not known) changes nothing.
  for (ReportInput& report : reports) report.gpu_count = 8;
  r = Reconcile(Windows(30, 0.40), reports);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(*r->points[0].ratio, 1.0, 1e-12);
}

TEST(Reconcile, WarmupWindowsAreNotJudged) {
  std::vector<WindowInput> windows = Windows(3, 0.25);
  windows[0].warmup = true;
  std::vector<ReportInput> reports = {Report(0, 180, 0.25)};
  absl::StatusOr<JobReconciliation> r = Reconcile(windows, reports);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->points[0].paired);
  EXPECT_TRUE(r->points[1].paired);
}

TEST(Reconcile, APrecisionMixChangeIsASwitch) {
  std::vector<ReportInput> reports = {Report(0, 60, 0.3), Report(60, 120, 0.3),
                                      Report(120, 180, 0.25)};
  reports[2].precision_mix = {{4, 0.5}, {5, 0.5}};
  reports[2].peak_tflops = 1319.2;
  absl::StatusOr<JobReconciliation> r = Reconcile(Windows(3, 0.3), reports);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->switches.size(), 1u);
  EXPECT_EQ(r->switches[0].time_us, 120 * kUs);
  EXPECT_EQ(r->switches[0].before.size(), 1u);
  EXPECT_EQ(r->switches[0].after.size(), 2u);
  EXPECT_NEAR(*r->switches[0].peak_tflops_after, 1319.2, 1e-9);
}

}  // namespace
}  // namespace goodput::mfu
