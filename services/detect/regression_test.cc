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

// The drops and recoveries the detector reports; the transient slowdowns it records go to
// `transients` when given.
std::vector<RegressionEvent> Detect(const std::vector<OfuWindow>& windows,
                                    RegressionOptions options = {},
                                    std::vector<RegressionEvent>* transients = nullptr) {
  InJobRegressionDetector d(options);
  std::vector<RegressionEvent> events;
  for (const OfuWindow& w : windows) {
    std::optional<RegressionEvent> e = d.Add(w);
    if (!e) continue;
    if (e->kind != RegressionEvent::Kind::kTransient) {
      events.push_back(*e);
    } else if (transients != nullptr) {
      transients->push_back(*e);
    }
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

// Windows from the onset (the window holding it counts as one) to the event's detection.
double DelayWindows(const RegressionEvent& e, int64_t onset_s) {
  return static_cast<double>(e.detected_s - onset_s) / 60;
}

TEST(InJobRegression, DeepDropsAreConfirmedBeforeTheDefaultPhaseBoundWhereverTheyStart) {
  // No phase seen yet: a 2x or deeper drop could still be an unseen evaluation pass (up to 5
  // minutes, 7 windows with its edges), so it is confirmed about 7 windows after its onset, not
  // after the 8-of-10 persistence (about 11) that shallow drops wait for.
  for (int64_t offset = 0; offset < 60; offset += 5) {
    for (const double factor : {2.0, 2.5, 3.0}) {
      const int64_t at = 120 * 60 + offset;
      auto shape = [&](int64_t t) { return t >= at ? 1 / factor : 1.0; };
      std::vector<RegressionEvent> events = Detect(JobBySecond(300, 0.45, shape));
      ASSERT_FALSE(events.empty()) << "offset " << offset << " s, factor " << factor;
      EXPECT_TRUE(events[0].is_regression());
      EXPECT_TRUE(events[0].fast) << "offset " << offset << " s, factor " << factor;
      // Seven windows after the onset's own, less when that one is already low.
      EXPECT_LE(DelayWindows(events[0], at), 7.5) << "offset " << offset << ", " << factor;
      EXPECT_NEAR(events[0].factor, factor, 0.15 * factor);
    }
  }
  // A 1.5x drop keeps the persistence rule.
  auto shallow = Detect(Job(300, 0.45, [](int m) { return m >= 120 ? 1 / 1.5 : 1.0; }));
  ASSERT_FALSE(shallow.empty());
  EXPECT_FALSE(shallow[0].fast);
  EXPECT_GE(DelayWindows(shallow[0], 120 * 60), 9.0);
}

TEST(InJobRegression, AFrameworkThatMarksItsPhasesIsPagedAfterThreeWindows) {
  // The framework marks its evaluation passes (6 minutes at 40%, hourly): those windows are
  // set aside, and an unmarked 2x+ drop is confirmed 3 windows after its onset.
  for (int64_t offset = 0; offset < 60; offset += 5) {
    for (const double factor : {2.0, 2.5, 3.0}) {
      const int64_t at = 140 * 60 + offset;
      auto shape = [&](int64_t t) {
        const double eval = (t / 60) % 60 >= 30 && (t / 60) % 60 < 36 ? 0.4 : 1.0;
        return eval * (t >= at ? 1 / factor : 1.0);
      };
      std::vector<OfuWindow> windows = JobBySecond(300, 0.45, shape);
      for (OfuWindow& w : windows) {
        w.phases_marked = true;
        w.in_marked_phase = (w.start_s / 60) % 60 >= 30 && (w.start_s / 60) % 60 < 36;
      }
      std::vector<RegressionEvent> events = Detect(windows);
      ASSERT_FALSE(events.empty()) << "offset " << offset << " s, factor " << factor;
      EXPECT_TRUE(events[0].is_regression());
      // Three windows after the onset's own when that one hardly shows it, else fewer.
      EXPECT_LE(DelayWindows(events[0], at), 3.5) << "offset " << offset << ", " << factor;
      EXPECT_GE(events[0].onset_s, at - 60);
    }
  }
  // The same marked evaluation passes without a drop: nothing.
  std::vector<OfuWindow> healthy = Job(300, 0.45, [](int m) {
    return m % 60 >= 30 && m % 60 < 36 ? 0.4 : 1.0;
  });
  for (OfuWindow& w : healthy) {
    w.phases_marked = true;
    w.in_marked_phase = (w.start_s / 60) % 60 >= 30 && (w.start_s / 60) % 60 < 36;
  }
  EXPECT_TRUE(Detect(healthy).empty());
}

TEST(InJobRegression, ALongerLearnedPhaseLengthensTheWaitAndRecoveredDropsAreTransients) {
  // Hourly evaluation passes of 6 minutes at 40%: each recovers and is recorded as a
  // transient slowdown; the job has shown a 6-window phase, so a 2.5x drop waits 6 + 2.
  auto shape = [](int m) {
    const double eval = m % 60 >= 30 && m % 60 < 36 ? 0.4 : 1.0;
    return eval * (m >= 200 ? 1 / 2.5 : 1.0);
  };
  InJobRegressionDetector d;
  EXPECT_EQ(d.deep_drop_windows(), 7);
  std::vector<RegressionEvent> transients, drops;
  for (const OfuWindow& w : Job(300, 0.45, shape)) {
    if (std::optional<RegressionEvent> e = d.Add(w)) {
      (e->kind == RegressionEvent::Kind::kTransient ? transients : drops).push_back(*e);
    }
  }
  ASSERT_GE(transients.size(), 3u);
  EXPECT_EQ(transients[0].onset_s, 30 * 60);
  EXPECT_EQ(transients[0].detected_s, 36 * 60);
  EXPECT_EQ(transients[0].low_windows, 6);
  EXPECT_NEAR(transients[0].factor, 2.5, 0.1);
  EXPECT_EQ(d.longest_phase_windows(), 6);
  ASSERT_FALSE(drops.empty());
  EXPECT_TRUE(drops[0].is_regression());
  EXPECT_TRUE(drops[0].fast);
  EXPECT_EQ(drops[0].onset_s, 200 * 60);
  EXPECT_EQ(drops[0].detected_s, 208 * 60);
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
