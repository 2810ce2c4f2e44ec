// Silent GPUs, hung jobs and jobs that went idle (job_detectors.h: ClassifyActivity,
// JobEvaluator's silent_gpu, hung and job_idle findings), on synthetic one-minute windows of an
// 8-GPU job on two hosts.
#include <cmath>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "services/alerting/alert_messages.h"
#include "services/alerting/job_detectors.h"
#include "services/alerting/job_evaluator.h"

namespace goodput::alerting {
namespace {

constexpr int64_t kStart = 1'790'000'000;

// What the GPUs did in one minute.
struct Minute {
  double tensor = 0.5;  // every GPU's tensor activity
  double sm = 0.8;
  std::optional<double> gr = 0.95;  // unset: the exporter does not publish GR_ENGINE_ACTIVE
  std::vector<SilentGpuObs> silent;
};

Minute Computing() { return {}; }
Minute Checkpoint() { return {.tensor = 0, .sm = 0.01, .gr = 0.02, .silent = {}}; }
Minute Spinning() { return {.tensor = 0, .sm = 0.12, .gr = 0.99, .silent = {}}; }
Minute Idle() { return {.tensor = 0, .sm = 0, .gr = 0, .silent = {}}; }
// Forward passes only: little tensor work, busy SMs.
Minute Evaluation() { return {.tensor = 0.03, .sm = 0.6, .gr = 0.9, .silent = {}}; }

JobWindow Window(int m, const Minute& x) {
  JobWindow w;
  w.window.start_s = kStart + m * 60;
  w.window.end_s = w.window.start_s + 60;
  const double ramp = m < 8 ? 0.1 + 0.9 * m / 8.0 : 1.0;
  w.window.ofu = x.tensor * ramp;
  w.warmup = m < 8;
  w.gpus_allocated = 8;
  w.gpus_reporting = 8 - static_cast<int>(x.silent.size());
  w.window.gpu_coverage = w.gpus_reporting / 8.0;
  w.gpu_ofu_median = w.window.ofu;
  w.silent_gpus = x.silent;
  w.activity = {.gr_engine_mean = x.gr,
                .sm_mean = x.sm,
                .tensor_max = x.tensor * ramp,
                .sm_max = x.sm,
                .gr_engine_max = x.gr};
  if (!x.silent.empty()) w.flags = (1u << 4) | (1u << 6);  // gap, low coverage (as ofu sets)
  return w;
}

// Feeds `minutes` windows, minute m as `shape(m)`; returns the evaluator.
std::unique_ptr<JobEvaluator> Feed(int minutes, const std::function<Minute(int)>& shape,
                                   const DetectorOptions& options = {}) {
  auto ev = std::make_unique<JobEvaluator>(options, std::vector<EarlierJob>{});
  for (int m = 0; m < minutes; ++m) ev->AddWindow(Window(m, shape(m)));
  return ev;
}

std::vector<const Finding*> OfKind(const JobEvaluator& ev, Kind kind) {
  std::vector<const Finding*> out;
  for (const Finding& f : ev.current()) {
    if (f.kind == kind) out.push_back(&f);
  }
  return out;
}

std::string Kinds(const JobEvaluator& ev) {
  std::string out;
  for (const Finding& f : ev.current()) absl::StrAppend(&out, KindName(f.kind), "/", f.detail, " ");
  return out;
}

TEST(ClassifyActivity, TellsComputingSpinningStoppedAndIdleApart) {
  const DetectorOptions o;
  EXPECT_EQ(ClassifyActivity(Window(20, Computing()), o), Activity::kComputing);
  EXPECT_EQ(ClassifyActivity(Window(20, Evaluation()), o), Activity::kComputing);
  EXPECT_EQ(ClassifyActivity(Window(20, Spinning()), o), Activity::kHung);
  EXPECT_EQ(ClassifyActivity(Window(20, Idle()), o), Activity::kIdle);
  // Tensor and SM ~0 with some GR-engine activity: stopped, not idle.
  EXPECT_EQ(ClassifyActivity(Window(20, {.tensor = 0, .sm = 0.01, .gr = 0.3, .silent = {}}), o),
            Activity::kHung);
  // CUDA-core work without tensor pipes: SMs busy, computing.
  EXPECT_EQ(ClassifyActivity(Window(20, {.tensor = 0, .sm = 0.7, .gr = 0.9, .silent = {}}), o),
            Activity::kComputing);
}

TEST(ClassifyActivity, MissingFieldsNarrowWhatCanBeTold) {
  const DetectorOptions o;
  // Without GR engine: tensor and SM ~0 is hung (an empty GPU looks the same), never idle.
  JobWindow no_gr = Window(20, {.tensor = 0, .sm = 0, .gr = std::nullopt, .silent = {}});
  EXPECT_EQ(ClassifyActivity(no_gr, o), Activity::kHung);
  // Without SM activity: GR ~0 is still idle; tensor 0 with GR busy cannot be judged.
  JobWindow no_sm = Window(20, Idle());
  no_sm.activity.sm_max.reset();
  no_sm.activity.sm_mean.reset();
  EXPECT_EQ(ClassifyActivity(no_sm, o), Activity::kIdle);
  JobWindow spin_no_sm = Window(20, Spinning());
  spin_no_sm.activity.sm_max.reset();
  EXPECT_EQ(ClassifyActivity(spin_no_sm, o), Activity::kUnknown);
  // Untrusted counters (profiling stuck) and windows without a reporting GPU say nothing.
  JobWindow stuck = Window(20, Idle());
  stuck.flags |= 1u << 12;
  EXPECT_EQ(ClassifyActivity(stuck, o), Activity::kUnknown);
  JobWindow none = Window(20, Idle());
  none.gpus_reporting = 0;
  EXPECT_EQ(ClassifyActivity(none, o), Activity::kUnknown);
}

TEST(HungJob, ASpinningCollectiveForTenMinutesIsHungNotARegression) {
  // Computes for an hour, then every GPU spins in a collective for 40 minutes.
  auto ev = Feed(100, [](int m) { return m < 60 ? Computing() : Spinning(); });
  const auto hung = OfKind(*ev, Kind::kHung);
  ASSERT_EQ(hung.size(), 1u) << Kinds(*ev);
  EXPECT_EQ(hung[0]->onset_s, kStart + 60 * 60);
  EXPECT_TRUE(hung[0]->spinning);
  EXPECT_EQ(hung[0]->detector, "activity/spinning");
  EXPECT_EQ(hung[0]->stopped_windows, 40);
  EXPECT_TRUE(OfKind(*ev, Kind::kRegressionInJob).empty()) << Kinds(*ev);
  EXPECT_TRUE(OfKind(*ev, Kind::kIdleGpus).empty()) << Kinds(*ev);
  EXPECT_TRUE(OfKind(*ev, Kind::kJobIdle).empty()) << Kinds(*ev);

  const Message msg = Describe(*hung[0], {.cluster = "eos", .job_id = "4711", .now_s = kStart});
  EXPECT_NE(msg.summary.find("every GPU spinning"), std::string::npos) << msg.summary;
  EXPECT_NE(msg.description.find("collective"), std::string::npos) << msg.description;
}

TEST(HungJob, HungFromTheConfiguredTimeOnAndResolvedWhenItComputesAgain) {
  DetectorOptions o;
  // Nine minutes of spinning: not yet.
  EXPECT_TRUE(
      OfKind(*Feed(69, [](int m) { return m < 60 ? Computing() : Spinning(); }), Kind::kHung)
          .empty());
  // Ten: hung.
  EXPECT_EQ(OfKind(*Feed(70, [](int m) { return m < 60 ? Computing() : Spinning(); }), Kind::kHung)
                .size(),
            1u);
  // A configured 20 minutes.
  o.hung_after_s = 1200;
  EXPECT_TRUE(OfKind(*Feed(
                         75, [](int m) { return m < 60 ? Computing() : Spinning(); }, o),
                     Kind::kHung)
                  .empty());
  // Computing again ends it, with its end time.
  auto ev = std::make_unique<JobEvaluator>(DetectorOptions{}, std::vector<EarlierJob>{});
  for (int m = 0; m < 80; ++m) ev->AddWindow(Window(m, m < 60 ? Computing() : Spinning()));
  ev->TakeEnded();
  ev->AddWindow(Window(80, Computing()));
  const std::vector<Finding> ended = ev->TakeEnded();
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0].kind, Kind::kHung);
  EXPECT_EQ(*ended[0].condition_end_s, kStart + 80 * 60);
  EXPECT_TRUE(OfKind(*ev, Kind::kHung).empty());
}

TEST(HungJob, WithoutGrEngineStoppedSmsAreHungAndTheMessageSaysIdleLooksTheSame) {
  auto ev = Feed(80, [](int m) {
    Minute x = m < 60 ? Computing() : Idle();
    x.gr.reset();
    return x;
  });
  const auto hung = OfKind(*ev, Kind::kHung);
  ASSERT_EQ(hung.size(), 1u) << Kinds(*ev);
  EXPECT_FALSE(hung[0]->spinning);
  EXPECT_TRUE(OfKind(*ev, Kind::kJobIdle).empty());
  const Message msg = Describe(*hung[0], {.cluster = "eos", .job_id = "4711", .now_s = kStart});
  EXPECT_NE(msg.description.find("GR-engine activity is not reported"), std::string::npos)
      << msg.description;
}

TEST(HungJob, CheckpointDipsAndEvaluationPassesAreNothing) {
  // Six-minute checkpoints every 30 minutes and 15-minute evaluation passes every hour, for
  // four hours.
  auto ev = Feed(240, [](int m) {
    if (m % 60 >= 40 && m % 60 < 55) return Evaluation();
    if (m % 30 >= 24) return Checkpoint();
    return Computing();
  });
  EXPECT_TRUE(OfKind(*ev, Kind::kHung).empty()) << Kinds(*ev);
  EXPECT_TRUE(OfKind(*ev, Kind::kJobIdle).empty()) << Kinds(*ev);
  for (const Finding& f : ev->TakeEnded()) {
    EXPECT_NE(f.kind, Kind::kHung);
    EXPECT_NE(f.kind, Kind::kJobIdle);
  }
}

TEST(JobIdle, AJobThatComputedThenSatIdleIsJobIdleWhileItRuns) {
  auto ev = Feed(60 + 45, [](int m) { return m < 60 ? Computing() : Idle(); });
  const auto idle = OfKind(*ev, Kind::kJobIdle);
  ASSERT_EQ(idle.size(), 1u) << Kinds(*ev);
  EXPECT_EQ(idle[0]->onset_s, kStart + 60 * 60);
  EXPECT_EQ(idle[0]->stopped_windows, 45);
  // Not hung (no kernels), and the stall is not a regression either.
  EXPECT_TRUE(OfKind(*ev, Kind::kHung).empty()) << Kinds(*ev);
  EXPECT_TRUE(OfKind(*ev, Kind::kRegressionInJob).empty()) << Kinds(*ev);
  const Message msg = Describe(*idle[0], {.cluster = "eos", .job_id = "4711", .now_s = kStart});
  EXPECT_NE(msg.summary.find("Job idle since"), std::string::npos) << msg.summary;
  EXPECT_NE(msg.description.find("finished its work without exiting"), std::string::npos);
}

TEST(JobIdle, NotBeforeTheConfiguredTimeAndNotForAJobThatNeverComputed) {
  EXPECT_TRUE(
      OfKind(*Feed(60 + 29, [](int m) { return m < 60 ? Computing() : Idle(); }), Kind::kJobIdle)
          .empty());
  DetectorOptions o;
  o.job_idle_after_s = 600;
  EXPECT_EQ(OfKind(*Feed(
                       60 + 10, [](int m) { return m < 60 ? Computing() : Idle(); }, o),
                   Kind::kJobIdle)
                .size(),
            1u);
  // Loading for an hour without ever computing is not "went idle" (idle GPUs cover it).
  EXPECT_TRUE(OfKind(*Feed(60, [](int) { return Idle(); }), Kind::kJobIdle).empty());
}

TEST(JobIdle, StateSurvivesACheckpointMidEpisode) {
  auto ev = Feed(75, [](int m) { return m < 60 ? Computing() : Idle(); });
  absl::StatusOr<std::unique_ptr<JobEvaluator>> restored =
      JobEvaluator::Restore(DetectorOptions{}, ev->Checkpoint());
  ASSERT_TRUE(restored.ok()) << restored.status();
  for (int m = 75; m < 95; ++m) (*restored)->AddWindow(Window(m, Idle()));
  const auto idle = OfKind(**restored, Kind::kJobIdle);
  ASSERT_EQ(idle.size(), 1u) << Kinds(**restored);
  EXPECT_EQ(idle[0]->onset_s, kStart + 60 * 60);
}

SilentGpuObs SilentSince(const std::string& gpu, int minute, bool host_silent) {
  return {gpu, kStart + minute * 60, host_silent};
}

TEST(SilentGpu, OneGpuSilentWhileItsNeighboursReportIsNamedWithItsLastSample) {
  auto ev = Feed(80, [](int m) {
    Minute x = Computing();
    if (m >= 61) x.silent = {SilentSince("n1/3/GPU-c", 60, false)};
    return x;
  });
  const auto silent = OfKind(*ev, Kind::kSilentGpu);
  ASSERT_EQ(silent.size(), 1u) << Kinds(*ev);
  EXPECT_EQ(silent[0]->detail, "n1/3/GPU-c");
  EXPECT_EQ(silent[0]->gpus, std::vector<std::string>{"n1/3/GPU-c"});
  EXPECT_TRUE(silent[0]->host.empty());
  EXPECT_EQ(silent[0]->onset_s, kStart + 60 * 60);
  // Its gaps and low coverage are that finding's, not a data-quality one.
  EXPECT_TRUE(OfKind(*ev, Kind::kDataQuality).empty()) << Kinds(*ev);
  const Message msg = Describe(*silent[0], {.cluster = "eos", .job_id = "4711", .now_s = kStart});
  EXPECT_EQ(msg.summary.rfind("GPU n1/3/GPU-c silent since ", 0), 0u) << msg.summary;
  EXPECT_NE(msg.description.find("fallen off the bus"), std::string::npos);
}

TEST(SilentGpu, AWholeHostIsOneFindingNamingTheHostAndResolvesWhenItReportsAgain) {
  const auto host_down = [](int m) {
    Minute x = Computing();
    if (m >= 61 && m < 90) {
      for (int g = 0; g < 4; ++g) {
        x.silent.push_back(SilentSince(absl::StrCat("n2/", g, "/GPU-", g), 60, true));
      }
    }
    return x;
  };
  auto ev = Feed(80, host_down);
  const auto silent = OfKind(*ev, Kind::kSilentGpu);
  ASSERT_EQ(silent.size(), 1u) << Kinds(*ev);
  EXPECT_EQ(silent[0]->detail, "n2");
  EXPECT_EQ(silent[0]->host, "n2");
  EXPECT_EQ(silent[0]->gpus.size(), 4u);
  const Message msg = Describe(*silent[0], {.cluster = "eos", .job_id = "4711", .now_s = kStart});
  EXPECT_EQ(msg.summary.rfind("Host n2 silent since ", 0), 0u) << msg.summary;

  for (int m = 80; m < 91; ++m) ev->AddWindow(Window(m, host_down(m)));
  EXPECT_TRUE(OfKind(*ev, Kind::kSilentGpu).empty()) << Kinds(*ev);
  bool ended = false;
  for (const Finding& f : ev->TakeEnded()) ended |= f.kind == Kind::kSilentGpu && f.detail == "n2";
  EXPECT_TRUE(ended);
}

TEST(SilentGpu, ShortSilencesAndWholeJobOutagesAreNotSilentGpus) {
  // Four minutes silent: below silent_gpu_after_s.
  auto brief = Feed(64, [](int m) {
    Minute x = Computing();
    if (m >= 61) x.silent = {SilentSince("n1/3/GPU-c", 60, false)};
    return x;
  });
  EXPECT_TRUE(OfKind(*brief, Kind::kSilentGpu).empty()) << Kinds(*brief);
  // A window in which nothing reported neither confirms nor clears a silent GPU.
  auto ev = Feed(70, [](int m) {
    Minute x = Computing();
    if (m >= 61) x.silent = {SilentSince("n1/3/GPU-c", 60, false)};
    return x;
  });
  JobWindow outage = Window(70, Computing());
  outage.gpus_reporting = 0;
  ev->AddWindow(outage);
  EXPECT_EQ(OfKind(*ev, Kind::kSilentGpu).size(), 1u) << Kinds(*ev);
}

}  // namespace
}  // namespace goodput::alerting
