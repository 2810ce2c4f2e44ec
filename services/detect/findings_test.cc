#include "services/detect/findings.h"

#include <vector>

#include "gtest/gtest.h"

namespace goodput::detect {
namespace {

TEST(GpuFindings, ReportsAnIdleGpuAndAStraggler) {
  GpuFindingsTracker tracker(8);
  for (int w = 0; w < 30; ++w) {
    std::vector<GpuWindowValue> v(8, {0.45, 0.8, true});
    v[3] = {0.0, 0.0, true};   // never used
    v[5] = {0.30, 0.8, true};  // thermally throttled
    if (w % 10 == 9) {
      for (auto& x : v) x = {0.0, 0.02, true};  // checkpoint: skipped for stragglers
      v[3] = {0.0, 0.0, true};
    }
    tracker.AddWindow(w * 60, (w + 1) * 60, v);
  }
  auto findings = tracker.Findings();
  ASSERT_EQ(findings.size(), 2u);
  EXPECT_EQ(findings[0].kind, GpuFinding::Kind::kIdle);
  EXPECT_EQ(findings[0].gpu_index, 3);
  EXPECT_EQ(findings[1].kind, GpuFinding::Kind::kStraggler);
  EXPECT_EQ(findings[1].gpu_index, 5);
  EXPECT_NEAR(findings[1].score, 0.30 / 0.45, 0.01);
}

TEST(GpuFindings, EvenJobHasNoFindings) {
  GpuFindingsTracker tracker(4);
  for (int w = 0; w < 30; ++w) {
    std::vector<GpuWindowValue> v = {
        {0.40, 0.8, true}, {0.42, 0.8, true}, {0.41, 0.8, true}, {0.39, 0.8, true}};
    tracker.AddWindow(w * 60, (w + 1) * 60, v);
  }
  EXPECT_TRUE(tracker.Findings().empty());
}

TEST(GpuFindings, TooShortToJudge) {
  GpuFindingsTracker tracker(2);
  std::vector<GpuWindowValue> v = {{0.0, 0.0, true}, {0.4, 0.8, true}};
  for (int w = 0; w < 3; ++w) tracker.AddWindow(w * 60, (w + 1) * 60, v);
  EXPECT_TRUE(tracker.Findings().empty());
}

}  // namespace
}  // namespace goodput::detect
