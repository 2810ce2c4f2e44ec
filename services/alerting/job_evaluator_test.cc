#include "services/alerting/job_evaluator.h"

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/alerting/alert_lifecycle.h"
#include "services/detect/state_codec.h"

namespace goodput::alerting {
namespace {

constexpr int64_t kStart = 1'790'000'000;

// One-minute windows of an 8-GPU job: warm-up ramp, checkpoints every 30 minutes, `shape` on
// top; GPU n0/3 a straggler throughout.
std::vector<JobWindow> Windows(int minutes, const std::function<double(int)>& shape) {
  std::vector<JobWindow> out;
  for (int m = 0; m < minutes; ++m) {
    const double ramp = m < 8 ? 0.1 + 0.9 * m / 8.0 : 1.0;
    const double checkpoint = (m % 30) >= 26 ? 0.05 : 1.0;
    JobWindow w;
    w.window.start_s = kStart + m * 60;
    w.window.end_s = w.window.start_s + 60;
    w.window.ofu = 0.5 * ramp * checkpoint * (1.0 + 0.02 * std::sin(m * 1.3)) * shape(m);
    w.warmup = m < 8;
    w.gpus_allocated = w.gpus_reporting = 8;
    w.gpu_ofu_median = w.window.ofu;
    w.stragglers.push_back({"n0/3/", w.window.ofu * 0.6, 0.6});
    out.push_back(w);
  }
  return out;
}

// A 40-minute drop to 40% that recovers: inside one 30-window burst it starts and is
// confirmed; it ends in the next.
double DropAndRecover(int m) { return m >= 100 && m < 140 ? 0.4 : 1.0; }

struct Seen {
  std::vector<Finding> ended;
  std::vector<Finding> holding;
};

// Feeds `windows` `per_batch` at a time and collects what ended and what holds at the end.
Seen Feed(const std::vector<JobWindow>& windows, size_t per_batch) {
  JobEvaluator ev({}, {});
  Seen seen;
  for (size_t i = 0; i < windows.size(); i += per_batch) {
    for (size_t j = i; j < std::min(windows.size(), i + per_batch); ++j) ev.AddWindow(windows[j]);
    for (Finding& f : ev.TakeEnded()) seen.ended.push_back(std::move(f));
  }
  seen.holding = ev.current();
  return seen;
}

std::string Describe(const std::vector<Finding>& fs) {
  std::string out;
  for (const Finding& f : fs) {
    absl::StrAppend(&out, KindName(f.kind), "/", f.detail, " onset ", f.onset_s - kStart,
                    " end ", f.condition_end_s ? *f.condition_end_s - kStart : -1, "; ");
  }
  return out;
}

TEST(JobEvaluator, ADropThatRecoversIsFoundTheSameLiveAndInBursts) {
  const std::vector<JobWindow> windows = Windows(200, DropAndRecover);
  const Seen live = Feed(windows, 1);
  ASSERT_EQ(live.ended.size(), 1u) << Describe(live.ended);
  const Finding& drop = live.ended[0];
  EXPECT_EQ(drop.kind, Kind::kRegressionInJob);
  EXPECT_NEAR(static_cast<double>(drop.onset_s - kStart), 100 * 60, 120);
  ASSERT_TRUE(drop.condition_end_s.has_value());
  EXPECT_GT(*drop.condition_end_s, kStart + 140 * 60);
  EXPECT_LT(*drop.condition_end_s, kStart + 160 * 60);
  EXPECT_NEAR(*drop.factor, 2.5, 0.2);
  for (size_t burst : {size_t{30}, size_t{200}}) {
    const Seen b = Feed(windows, burst);
    EXPECT_EQ(Describe(b.ended), Describe(live.ended)) << "bursts of " << burst;
    EXPECT_EQ(Describe(b.holding), Describe(live.holding)) << "bursts of " << burst;
  }
}

TEST(JobEvaluator, AnIdleGpuIsIdleOnlyNotAlsoAStraggler) {
  std::vector<JobWindow> windows = Windows(60, [](int) { return 1.0; });
  for (JobWindow& w : windows) {
    w.stragglers.push_back({"n0/7/", 0, 0});  // what ofu named before idle GPUs were left out
    w.idle_gpus.push_back("n0/7/");
  }
  JobEvaluator ev({}, {});
  for (const JobWindow& w : windows) ev.AddWindow(w);
  int idle = 0;
  for (const Finding& f : ev.current()) {
    if (f.kind == Kind::kIdleGpus) {
      ++idle;
      EXPECT_EQ(f.gpus, std::vector<std::string>{"n0/7/"});
    }
    if (f.kind == Kind::kStraggler) {
      EXPECT_EQ(f.detail, "n0/3/");
    }
  }
  EXPECT_EQ(idle, 1);
}

TEST(JobEvaluator, ARestoredCheckpointGoesOnExactlyAsTheOriginal) {
  const std::vector<JobWindow> windows = Windows(240, DropAndRecover);
  JobEvaluator whole({}, {});
  JobEvaluator first({}, {});
  for (size_t i = 0; i < windows.size(); ++i) {
    whole.AddWindow(windows[i]);
    if (i < 120) first.AddWindow(windows[i]);
  }
  std::vector<Finding> ended_whole = whole.TakeEnded();
  first.TakeEnded();
  const std::string checkpoint = first.Checkpoint();
  absl::StatusOr<std::unique_ptr<JobEvaluator>> restored = JobEvaluator::Restore({}, checkpoint);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(Describe((*restored)->current()), Describe(first.current()));
  for (size_t i = 120; i < windows.size(); ++i) (*restored)->AddWindow(windows[i]);
  std::vector<Finding> ended_restored = (*restored)->TakeEnded();
  // The drop ended after the checkpoint: the restored state reports it as the whole run did.
  ASSERT_EQ(ended_restored.size(), 1u);
  EXPECT_EQ(Describe(ended_restored), Describe(ended_whole));
  EXPECT_EQ(Describe((*restored)->current()), Describe(whole.current()));
  EXPECT_EQ((*restored)->steady().median_ofu, whole.steady().median_ofu);
  EXPECT_EQ((*restored)->Checkpoint(), whole.Checkpoint());

  EXPECT_EQ(JobEvaluator::Restore({}, "not a checkpoint").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(JobEvaluator::Restore({}, checkpoint.substr(0, checkpoint.size() / 2)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// An inference service slower per token from minute 150 to 200 (vLLM-like counters, 8 GPUs):
// checkpointed before the slowdown is seen, while it is open, and after it closed, the
// restored evaluator goes on as the one that saw every window.
TEST(JobEvaluator, AServicesPerTokenStateSurvivesACheckpoint) {
  std::vector<JobWindow> windows = Windows(260, [](int) { return 0.4; });
  for (size_t m = 0; m < windows.size(); ++m) {
    JobWindow& w = windows[m];
    w.stragglers.clear();
    w.tokens_per_s = w.window.ofu * 20000;
    w.activity.gr_engine_mean = w.window.ofu * (m >= 150 && m < 200 ? 5.0 : 2.0);
  }
  JobEvaluator whole({}, {});
  whole.SetServing(true);
  for (const JobWindow& w : windows) whole.AddWindow(w);
  const std::vector<Finding> ended_whole = whole.TakeEnded();
  ASSERT_EQ(ended_whole.size(), 1u) << Describe(ended_whole);
  EXPECT_EQ(ended_whole[0].detector, "serving/busy_gpu_seconds_per_token");
  EXPECT_EQ(ended_whole[0].onset_s, kStart + 150 * 60);
  for (size_t at : {size_t{152}, size_t{170}, size_t{230}}) {
    JobEvaluator first({}, {});
    first.SetServing(true);
    for (size_t i = 0; i < at; ++i) first.AddWindow(windows[i]);
    std::vector<Finding> ended = first.TakeEnded();
    absl::StatusOr<std::unique_ptr<JobEvaluator>> restored =
        JobEvaluator::Restore({}, first.Checkpoint());
    ASSERT_TRUE(restored.ok()) << restored.status();
    (*restored)->SetServing(true);  // the engine sets it from the job's row on every pass
    EXPECT_EQ(Describe((*restored)->current()), Describe(first.current())) << at;
    for (size_t i = at; i < windows.size(); ++i) (*restored)->AddWindow(windows[i]);
    for (Finding& f : (*restored)->TakeEnded()) ended.push_back(std::move(f));
    EXPECT_EQ(Describe(ended), Describe(ended_whole)) << at;
    ASSERT_EQ(ended.size(), 1u) << at;
    EXPECT_EQ(*ended[0].factor, *ended_whole[0].factor) << at;
    EXPECT_EQ((*restored)->Checkpoint(), whole.Checkpoint()) << at;
  }
}

// A checkpoint row is read back from storage: whatever it holds is an error to rebuild from,
// never a crash.
TEST(JobEvaluator, ACheckpointNestedAMillionLevelsDeepIsRefusedNotACrash) {
  const std::string deep = std::string(1'000'000, '\x81') + '\x80';
  absl::StatusOr<std::unique_ptr<JobEvaluator>> restored = JobEvaluator::Restore({}, deep);
  ASSERT_EQ(restored.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(restored.status().message()), ::testing::HasSubstr("max_depth"));
}

TEST(JobEvaluator, ACheckpointWithValuesNoJobHasIsRefused) {
  JobEvaluator ev({}, {});
  for (const JobWindow& w : Windows(20, [](int) { return 1.0; })) ev.AddWindow(w);
  absl::StatusOr<nlohmann::json> j = detect::StateCodec::DecodeCbor(ev.Checkpoint());
  ASSERT_TRUE(j.ok()) << j.status();
  for (const auto& [key, value, expected] :
       {std::tuple{"gpus_allocated", nlohmann::json(2'000'000'000),
                   "gpus_allocated=2000000000 is outside [0, 1048576]"},
        std::tuple{"window_len", nlohmann::json(0), "window_len=0 is outside"},
        std::tuple{"last_end", nlohmann::json(INT64_MAX),
                   "last_end=9223372036854775807 is outside"},
        std::tuple{"version", nlohmann::json::array({1}), "version array is not 1"}}) {
    nlohmann::json bad = *j;
    bad[key] = value;
    absl::StatusOr<std::unique_ptr<JobEvaluator>> restored =
        JobEvaluator::Restore({}, detect::StateCodec::EncodeCbor(bad));
    ASSERT_EQ(restored.status().code(), absl::StatusCode::kInvalidArgument) << key;
    EXPECT_THAT(std::string(restored.status().message()), ::testing::HasSubstr(expected)) << key;
  }
}

TEST(JobEvaluator, APrecisionSwitchAmongEvaluatedWindowsAsksForAReplay) {
  JobEvaluator ev({}, {});
  for (const JobWindow& w : Windows(30, [](int) { return 1.0; })) ev.AddWindow(w);
  EXPECT_TRUE(ev.needs_replay({kStart + 10 * 60, 400, 800}));
  EXPECT_FALSE(ev.needs_replay({kStart + 30 * 60, 400, 800}));
}

Finding Drop(int64_t onset_min, std::optional<int64_t> end_min = std::nullopt) {
  Finding f;
  f.kind = Kind::kRegressionInJob;
  f.onset_s = kStart + onset_min * 60;
  if (end_min) f.condition_end_s = kStart + *end_min * 60;
  return f;
}

std::string Actions(const std::vector<Decision>& ds) {
  std::string out;
  for (const Decision& d : ds) {
    static constexpr const char* kNames[] = {"open", "update", "resolve", "record"};
    absl::StrAppend(&out, kNames[static_cast<int>(d.action)], d.alert_id ? absl::StrCat("#", d.alert_id) : "",
                    d.found_after_job_end ? "(after end)" : "", " ");
  }
  return out;
}

TEST(AlertLifecycle, DecisionsFollowTheFindingsInWindowOrder) {
  const std::set<Kind> all(std::begin(kAllKinds), std::end(kAllKinds));
  const std::string fp = Fingerprint(Kind::kRegressionInJob, "eos", "7");
  const OpenAlertRef open{.id = 4, .fingerprint = fp, .kind = Kind::kRegressionInJob};
  // Holding in a running job: opens, or updates its open alert.
  EXPECT_EQ(Actions(DecideLifecycle("eos", "7", {.job_active = true, .kinds = all, .holding = {Drop(10)}}, {})),
            "open ");
  EXPECT_EQ(Actions(DecideLifecycle("eos", "7", {.job_active = true, .kinds = all, .holding = {Drop(10)}}, {open})),
            "update#4 ");
  // Ended: resolves its alert; without one (started and ended in one burst) it is recorded.
  EXPECT_EQ(Actions(DecideLifecycle("eos", "7", {.job_active = true, .kinds = all, .ended = {Drop(10, 50)}}, {open})),
            "resolve#4 ");
  EXPECT_EQ(Actions(DecideLifecycle("eos", "7", {.job_active = true, .kinds = all, .ended = {Drop(10, 50)}}, {})),
            "record ");
  // Ended and started again in the same windows: the old alert resolves, a new one opens.
  EXPECT_EQ(Actions(DecideLifecycle("eos", "7",
                                    {.job_active = true, .kinds = all, .holding = {Drop(90)}, .ended = {Drop(10, 50)}},
                                    {open})),
            "resolve#4 open ");
  // After the job's end nothing opens: found then, it is recorded resolved.
  EXPECT_EQ(Actions(DecideLifecycle("eos", "7", {.job_active = false, .kinds = all, .holding = {Drop(10)}}, {})),
            "record(after end) ");
  EXPECT_EQ(Actions(DecideLifecycle("eos", "7", {.job_active = false, .kinds = all, .holding = {Drop(10)}}, {open})),
            "resolve#4 ");
  // An open alert whose condition is gone resolves; kinds not decided are left alone.
  EXPECT_EQ(Actions(DecideLifecycle("eos", "7", {.job_active = true, .kinds = all}, {open})), "resolve#4 ");
  EXPECT_EQ(Actions(DecideLifecycle("eos", "7", {.job_active = true, .kinds = {Kind::kTelemetryStopped}}, {open})),
            "");
}

}  // namespace
}  // namespace goodput::alerting
