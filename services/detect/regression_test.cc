#include "services/detect/regression.h"

#include <cmath>
#include <functional>
#include <vector>

#include "gtest/gtest.h"

namespace goodput::detect {
namespace {

// A job's OFU over one-minute windows: 8 minutes of warm-up ramp to `level`, then `shape`
// (minute -> multiplier) on top, with a small deterministic wobble.
std::vector<OfuWindow> Job(
    int minutes, double level, const std::function<double(int)>& shape = [](int) { return 1.0; }) {
  std::vector<OfuWindow> w;
  for (int m = 0; m < minutes; ++m) {
    const double ramp = m < 8 ? 0.1 + 0.9 * m / 8.0 : 1.0;
    const double wobble = 1.0 + 0.02 * std::sin(m * 1.3);
    OfuWindow x;
    x.start_s = m * 60;
    x.end_s = (m + 1) * 60;
    x.ofu = level * ramp * wobble * shape(m);
    w.push_back(x);
  }
  return w;
}

std::vector<RegressionEvent> Detect(const std::vector<OfuWindow>& windows,
                                    RegressionOptions options = {}) {
  InJobRegressionDetector d(options);
  std::vector<RegressionEvent> events;
  for (const OfuWindow& w : windows) {
    if (auto e = d.Add(w)) events.push_back(*e);
  }
  return events;
}

// Checkpoint every 30 minutes: 4 minutes at ~2% OFU.
double Checkpoints(int m) { return (m % 30) >= 26 ? 0.05 : 1.0; }

TEST(InJobRegression, SteadyJobWithWarmupDoesNotFire) {
  EXPECT_TRUE(Detect(Job(600, 0.45)).empty());
}

TEST(InJobRegression, CheckpointDipsAndShortStallsDoNotFire) {
  auto shape = [](int m) {
    if (m >= 214 && m < 220) return 0.0;  // six-minute stall
    return Checkpoints(m);
  };
  EXPECT_TRUE(Detect(Job(600, 0.45, shape)).empty());
}

TEST(InJobRegression, EvaluationPassBackToBackWithACheckpointDoesNotFire) {
  // Hourly evaluation (6 minutes at 40% of steady) right before a 5-minute checkpoint: nine
  // low minutes in a row, but not a change of the job's speed.
  auto shape = [](int m) {
    const int phase = m % 60;
    if (phase >= 30 && phase < 36) return 0.4;
    if (phase >= 36 && phase < 41) return 0.02;
    return 1.0;
  };
  EXPECT_TRUE(Detect(Job(600, 0.45, shape)).empty());
}

// A job's OFU over one-minute windows from a shape in seconds (second -> multiplier), so
// that phases can start anywhere inside a window, as they do on real fleets.
std::vector<OfuWindow> JobBySecond(int minutes, double level,
                                   const std::function<double(int64_t)>& shape) {
  std::vector<OfuWindow> w = Job(minutes, level);
  for (int m = 8; m < minutes; ++m) {
    double sum = 0;
    for (int64_t t = m * 60; t < (m + 1) * 60; ++t) sum += shape(t);
    w[static_cast<size_t>(m)].ofu *= sum / 60;
  }
  return w;
}

TEST(InJobRegression, BackToBackEvaluationPassesDoNotFire) {
  // Two evaluation passes at half speed, 3 and 4 minutes, with one normal minute between:
  // seven slow minutes out of eight, wherever they fall against the window boundaries, and
  // whether or not a checkpoint follows.
  for (int64_t offset = 0; offset < 60; offset += 5) {
    for (const double depth : {0.5, 0.4, 0.6}) {
      for (const bool checkpoint : {false, true}) {
        const int64_t at = 120 * 60 + offset;
        auto shape = [&](int64_t t) {
          if (t >= at && t < at + 180) return depth;
          if (t >= at + 240 && t < at + 480) return depth;
          if (checkpoint && t >= at + 480 && t < at + 720) return 0.02;
          return 1.0;
        };
        EXPECT_TRUE(Detect(JobBySecond(300, 0.45, shape)).empty())
            << "offset " << offset << " s, depth " << depth << ", checkpoint " << checkpoint;
      }
    }
  }
}

TEST(InJobRegression, TenMinuteDropsAreFoundWhereverTheyStart) {
  for (int64_t offset = 0; offset < 60; offset += 5) {
    for (const double factor : {1.5, 2.0, 3.0}) {
      const int64_t at = 120 * 60 + offset;
      auto shape = [&](int64_t t) { return t >= at && t < at + 600 ? 1 / factor : 1.0; };
      std::vector<RegressionEvent> events = Detect(JobBySecond(300, 0.45, shape));
      ASSERT_FALSE(events.empty()) << "offset " << offset << " s, factor " << factor;
      EXPECT_TRUE(events[0].is_regression());
      EXPECT_NEAR(static_cast<double>(events[0].onset_s), static_cast<double>(at), 120);
    }
  }
}

TEST(InJobRegression, AJobThatStopsComputingIsReportedAsStalled) {
  auto events = Detect(Job(400, 0.45, [](int m) { return m >= 150 && m < 300 ? 0.001 : 1.0; }));
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].kind, RegressionEvent::Kind::kRecovery);
  EXPECT_EQ(events[1].onset_s, 300 * 60);
  EXPECT_TRUE(events[0].stalled);
  EXPECT_TRUE(events[0].is_regression());
  EXPECT_LE(events[0].detected_s - 150 * 60, 21 * 60);
}

TEST(InJobRegression, DropDuringEvaluationsIsStillFound) {
  auto shape = [](int m) {
    const double eval = (m % 60 >= 30 && m % 60 < 36) ? 0.4 : 1.0;
    return eval * (m >= 200 ? 1 / 2.0 : 1.0);
  };
  auto events = Detect(Job(400, 0.45, shape));
  ASSERT_FALSE(events.empty());
  EXPECT_TRUE(events[0].is_regression());
  EXPECT_NEAR(events[0].factor, 2.0, 0.15);
  EXPECT_GE(events[0].onset_s, 200 * 60);
  EXPECT_LE(events[0].onset_s, 206 * 60);
}

TEST(InJobRegression, SustainedDropFiresWithOnsetLevelsAndFactor) {
  auto shape = [](int m) { return (m >= 120 ? 1 / 2.5 : 1.0) * Checkpoints(m); };
  auto events = Detect(Job(400, 0.5, shape));
  ASSERT_FALSE(events.empty());
  const RegressionEvent& e = events[0];
  EXPECT_TRUE(e.is_regression());
  EXPECT_EQ(e.onset_s, 120 * 60);
  EXPECT_NEAR(e.factor, 2.5, 0.15);
  EXPECT_NEAR(e.before_ofu, 0.5, 0.02);
  EXPECT_NEAR(e.after_ofu, 0.2, 0.01);
  EXPECT_LE(e.detected_s - e.onset_s, 10 * 60);
  // One drop, one event: no repeated firing while it lasts.
  int drops = 0;
  for (const auto& x : events) drops += x.kind == RegressionEvent::Kind::kDrop ? 1 : 0;
  EXPECT_EQ(drops, 1);
}

TEST(InJobRegression, TenMinuteDropOfOnePointFiveFiresAndRecovers) {
  auto shape = [](int m) { return (m >= 150 && m < 160) ? 1 / 1.5 : 1.0; };
  auto events = Detect(Job(300, 0.4, shape));
  ASSERT_GE(events.size(), 1u);
  EXPECT_EQ(events[0].kind, RegressionEvent::Kind::kDrop);
  EXPECT_EQ(events[0].onset_s, 150 * 60);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].kind, RegressionEvent::Kind::kRecovery);
}

TEST(InJobRegression, SmallSustainedChangeDoesNotFire) {
  auto shape = [](int m) { return m >= 120 ? 0.85 : 1.0; };
  EXPECT_TRUE(Detect(Job(400, 0.4, shape)).empty());
}

TEST(InJobRegression, DropExplainedByPrecisionSwitchIsAnnotated) {
  // BF16-only -> half FP8: effective peak 989.4 -> 1319.2 (q = 1.333); the same work leaves
  // the tensor pipe idle more often, OFU and MFU fall 1.3x together.
  auto w = Job(300, 0.5, [](int m) { return m >= 150 ? 1 / 1.3 : 1.0; });
  for (auto& x : w) {
    const bool fp8 = x.start_s >= 150 * 60;
    x.effective_peak_tflops = fp8 ? 1319.2 : 989.4;
    x.app_mfu = x.ofu * 0.97;
  }
  RegressionOptions options;
  options.min_factor = 1.25;
  auto events = Detect(w, options);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_TRUE(events[0].precision_switch);
  EXPECT_FALSE(events[0].is_regression());
  EXPECT_NE(events[0].annotation.find("precision"), std::string::npos);
}

TEST(InJobRegression, DropLargerThanThePrecisionSwitchExplainsIsARegression) {
  auto w = Job(300, 0.5, [](int m) { return m >= 150 ? 1 / 2.5 : 1.0; });
  for (auto& x : w) {
    x.effective_peak_tflops = x.start_s >= 150 * 60 ? 1319.2 : 989.4;
    x.app_mfu = x.ofu * 0.97;
  }
  auto events = Detect(w);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_TRUE(events[0].is_regression());
}

TEST(InJobRegression, LowCoverageWindowsAreSkipped) {
  auto w = Job(300, 0.5);
  for (int m = 100; m < 130; ++m) {
    w[m].ofu = 0.05;
    w[m].gpu_coverage = 0.1;  // telemetry mostly missing: not evidence of a drop
  }
  EXPECT_TRUE(Detect(w).empty());
}

TEST(Warmup, AStallDuringTheRampDoesNotEndIt) {
  WarmupTracker t(5, 1.05, 1800);
  auto w = Job(40, 0.5);
  for (int m = 4; m < 7; ++m) w[m].ofu = 0.001;
  int done_at = -1;
  for (int m = 0; m < 40; ++m) {
    if (t.Add(w[m]) && done_at < 0) done_at = m;
  }
  EXPECT_GE(done_at, 8);
}

TEST(Warmup, EndsWhenTheLevelStopsRising) {
  WarmupTracker t(5, 1.05, 1800);
  auto w = Job(40, 0.5);
  int done_at = -1;
  for (int m = 0; m < 40; ++m) {
    if (t.Add(w[m]) && done_at < 0) done_at = m;
  }
  EXPECT_GE(done_at, 8);
  EXPECT_LE(done_at, 16);
}

JobSteadyState Summarize(const std::vector<OfuWindow>& w, const std::string& id) {
  SteadyStateSummarizer s;
  for (const auto& x : w) s.Add(x);
  return s.Summary(id);
}

TEST(WorkloadRegression, NewJobBadFromTheStartIsFlaggedFromItsFirstSteadyWindows) {
  WorkloadBaseline baseline;
  baseline.AddJob(Summarize(Job(240, 0.55, Checkpoints), "a"));
  baseline.AddJob(Summarize(Job(240, 0.57, Checkpoints), "b"));
  baseline.AddJob(Summarize(Job(240, 0.53, Checkpoints), "c"));
  auto level = baseline.level();
  ASSERT_TRUE(level.has_value());
  EXPECT_NEAR(level->median_ofu, 0.55, 0.01);

  NewJobComparator cmp(baseline);
  std::optional<BaselineRegression> found;
  auto bad = Job(240, 0.55 / 2.5, Checkpoints);  // TORCH_DISTRIBUTED_DEBUG=DETAIL
  for (const auto& w : bad) {
    if (auto r = cmp.Add(w)) found = r;
    if (cmp.decided()) break;
  }
  ASSERT_TRUE(found.has_value());
  EXPECT_TRUE(found->is_regression());
  EXPECT_NEAR(found->factor, 2.5, 0.15);
  EXPECT_LE(found->detected_s, 40 * 60);
  EXPECT_EQ(found->baseline_jobs, 3);
}

TEST(WorkloadRegression, NewJobAtTheUsualLevelIsNotFlagged) {
  WorkloadBaseline baseline;
  baseline.AddJob(Summarize(Job(240, 0.55), "a"));
  baseline.AddJob(Summarize(Job(240, 0.50), "b"));
  NewJobComparator cmp(baseline);
  for (const auto& w : Job(240, 0.48, Checkpoints)) EXPECT_FALSE(cmp.Add(w).has_value());
  EXPECT_TRUE(cmp.decided());
}

TEST(WorkloadRegression, NoBaselineFromOneJob) {
  WorkloadBaseline baseline;
  baseline.AddJob(Summarize(Job(240, 0.55), "a"));
  EXPECT_FALSE(baseline.level().has_value());
}

TEST(WorkloadRegression, FasterPrecisionMixIsAnnotatedNotARegression) {
  WorkloadBaseline baseline;
  for (const char* id : {"a", "b", "c"}) {
    auto w = Job(240, 0.6);
    for (auto& x : w) x.effective_peak_tflops = 989.4;
    baseline.AddJob(Summarize(w, id));
  }
  NewJobComparator cmp(baseline);
  auto w = Job(240, 0.6 / 1.32);
  std::optional<BaselineRegression> found;
  for (auto& x : w) {
    x.effective_peak_tflops = 1319.2;
    if (auto r = cmp.Add(x)) found = r;
  }
  ASSERT_TRUE(found.has_value());
  EXPECT_TRUE(found->precision_switch);
  EXPECT_FALSE(found->is_regression());
}

}  // namespace
}  // namespace goodput::detect
