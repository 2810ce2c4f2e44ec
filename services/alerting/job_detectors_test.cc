#include "services/alerting/job_detectors.h"

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace goodput::alerting {
namespace {

constexpr int64_t kStart = 1'790'000'000;

// A job's one-minute windows: an 8-minute warm-up ramp to `level`, then `shape(minute)` on
// top, with a small deterministic wobble (as the detect tests build them).
JobInput Job(
    int minutes, double level, const std::function<double(int)>& shape = [](int) { return 1.0; }) {
  JobInput in;
  for (int m = 0; m < minutes; ++m) {
    const double ramp = m < 8 ? 0.1 + 0.9 * m / 8.0 : 1.0;
    JobWindow w;
    w.window.start_s = kStart + m * 60;
    w.window.end_s = w.window.start_s + 60;
    w.window.ofu = level * ramp * (1.0 + 0.02 * std::sin(m * 1.3)) * shape(m);
    w.warmup = m < 8;
    w.gpus_allocated = w.gpus_reporting = 8;
    w.gpu_ofu_median = w.window.ofu;
    in.windows.push_back(w);
  }
  return in;
}

double Checkpoints(int m) { return (m % 30) >= 26 ? 0.05 : 1.0; }

std::vector<Kind> Kinds(const JobEvaluation& e) {
  std::vector<Kind> k;
  for (const Finding& f : e.findings) k.push_back(f.kind);
  return k;
}

TEST(JobDetectors, WarmupCheckpointsAndShortStallsFindNothing) {
  JobInput in = Job(300, 0.45, [](int m) { return m >= 114 && m < 120 ? 0.0 : Checkpoints(m); });
  JobEvaluation e = EvaluateJob(in, {});
  EXPECT_TRUE(e.findings.empty());
  EXPECT_NEAR(e.steady.median_ofu, 0.45, 0.02);
}

TEST(JobDetectors, SustainedDropIsARegressionInJobWithOnsetAndFactor) {
  JobInput in = Job(200, 0.5, [](int m) { return (m >= 120 ? 0.4 : 1.0) * Checkpoints(m); });
  JobEvaluation e = EvaluateJob(in, {});
  ASSERT_EQ(Kinds(e), std::vector<Kind>{Kind::kRegressionInJob});
  const Finding& f = e.findings[0];
  EXPECT_NEAR(*f.factor, 2.5, 0.15);
  EXPECT_NEAR(*f.before_ofu, 0.5, 0.02);
  EXPECT_EQ(f.onset_s, kStart + 120 * 60);
  EXPECT_GT(f.confidence, 0.8);
  EXPECT_LE(f.evidence_to_s - f.evidence_from_s, 60 * 60);
  // The steady state describes the job before it regressed.
  EXPECT_NEAR(e.steady.median_ofu, 0.5, 0.02);
}

TEST(JobDetectors, RecoveredJobHasNoOpenRegression) {
  JobInput in = Job(260, 0.5, [](int m) { return m >= 120 && m < 180 ? 0.4 : 1.0; });
  EXPECT_TRUE(EvaluateJob(in, {}).findings.empty());
}

TEST(JobDetectors, DropExplainedByAPrecisionSwitchIsAnnotatedNotFound) {
  // FP8 doubles the peak: OFU halves for the same work.
  JobInput in = Job(200, 0.5, [](int m) { return m >= 120 ? 0.5 : 1.0; });
  in.precision_switches.push_back({kStart + 120 * 60, 989, 1979});
  JobEvaluation e = EvaluateJob(in, {});
  EXPECT_TRUE(e.findings.empty());
  EXPECT_FALSE(e.precision_annotations.empty());
}

TEST(JobDetectors, DebugFlagJobIsFlaggedAgainstItsWorkloadFromItsFirstSteadyWindows) {
  JobInput in = Job(60, 0.22);
  for (int j = 0; j < 3; ++j) {
    EarlierJob e;
    e.job_id = "earlier-" + std::to_string(j);
    e.last_end_s = kStart - 86400 * (7 + j);
    e.steady = {.job_id = e.job_id,
                .median_ofu = 0.55 + 0.01 * j,
                .mad_ofu = 0.01,
                .steady_windows = 500,
                .effective_peak_tflops = 0};
    in.earlier_jobs.push_back(e);
  }
  JobEvaluation e = EvaluateJob(in, {});
  ASSERT_EQ(Kinds(e), std::vector<Kind>{Kind::kRegressionVsWorkload});
  const Finding& f = e.findings[0];
  EXPECT_NEAR(*f.factor, 2.5, 0.15);
  EXPECT_NEAR(*f.baseline_ofu, 0.56, 0.01);
  EXPECT_EQ(f.baseline_jobs, 3);
  EXPECT_EQ(f.baseline_job_ids.front(), "earlier-0");
  // Decided from the first steady windows: well before the hour is over.
  EXPECT_LE(f.detected_s - kStart, 35 * 60);
}

TEST(JobDetectors, UsualJobOfAWorkloadIsNotFlagged) {
  JobInput in = Job(60, 0.54);
  for (int j = 0; j < 3; ++j) {
    in.earlier_jobs.push_back({"e" + std::to_string(j),
                               kStart - 86400,
                               {.job_id = "e",
                                .median_ofu = 0.55,
                                .mad_ofu = 0.01,
                                .steady_windows = 500,
                                .effective_peak_tflops = 0}});
  }
  EXPECT_TRUE(EvaluateJob(in, {}).findings.empty());
}

TEST(JobDetectors, PersistentlyIdleGpuAndStragglerAreFound) {
  JobInput in = Job(60, 0.4);
  for (JobWindow& w : in.windows) {
    w.idle_gpus = {"n2/7/"};
    w.stragglers = {{"n1/3/", w.gpu_ofu_median * 0.6, 0.6}};
  }
  JobEvaluation e = EvaluateJob(in, {});
  ASSERT_EQ(e.findings.size(), 2u);
  const Finding* idle = nullptr;
  const Finding* slow = nullptr;
  for (const Finding& f : e.findings) (f.kind == Kind::kIdleGpus ? idle : slow) = &f;
  ASSERT_TRUE(idle && slow);
  EXPECT_EQ(idle->gpus, std::vector<std::string>{"n2/7/"});
  EXPECT_NEAR(idle->idle_gpu_hours, 1.0, 0.1);
  EXPECT_EQ(slow->kind, Kind::kStraggler);
  EXPECT_EQ(slow->detail, "n1/3/");
  EXPECT_NEAR(slow->straggler_score, 0.6, 0.05);
}

TEST(JobDetectors, AnOccasionallySlowGpuIsNoStraggler) {
  JobInput in = Job(60, 0.4);
  for (size_t i = 0; i < in.windows.size(); i += 5) {
    in.windows[i].stragglers = {{"n1/3/", 0.2, 0.5}};
  }
  EXPECT_TRUE(EvaluateJob(in, {}).findings.empty());
}

TEST(JobDetectors, DataQualityNeedsMostRecentWindowsFlagged) {
  JobInput in = Job(30, 0.4);
  for (size_t i = 22; i < 30; ++i) in.windows[i].flags = 1u << 6;  // low GPU coverage
  JobEvaluation e = EvaluateJob(in, {});
  ASSERT_EQ(Kinds(e), std::vector<Kind>{Kind::kDataQuality});
  EXPECT_EQ(e.findings[0].flagged_windows, 8);
  in.windows[29].flags = in.windows[28].flags = in.windows[27].flags = in.windows[26].flags = 0;
  in.windows[25].flags = 0;
  EXPECT_TRUE(EvaluateJob(in, {}).findings.empty());
  in.windows[25].flags = 1u << 7;  // late samples dropped: not serious
  EXPECT_TRUE(EvaluateJob(in, {}).findings.empty());
}

TEST(JobDetectors, ProfilingPausedForFifteenWindowsIsDataQualityNotARegressionOrIdleGpus) {
  // A 16-GPU job on two nodes; a user runs Nsight on node 1 for 15 minutes. DCGM pauses
  // profiling there, so node 1's GPUs give no OFU, and the profiler slows every rank, so
  // node 2's OFU falls 3x: the job's OFU collapses while its GPUs keep reporting.
  JobInput in = Job(60, 0.4);
  std::vector<std::string> node1;
  for (int g = 0; g < 8; ++g) node1.push_back(absl::StrCat("n1/", g, "/"));
  for (JobWindow& w : in.windows) w.gpus_allocated = w.gpus_reporting = 16;
  for (int m = 45; m < 60; ++m) {
    JobWindow& w = in.windows[m];
    w.flags = (1u << 11) | (1u << 6);  // profiling unavailable, low GPU coverage
    w.window.ofu /= 3;
    w.gpu_ofu_median = w.window.ofu;
    w.gpus_reporting = 8;
    w.window.gpu_coverage = 0.5;
    w.idle_gpus = node1;  // what ofu said before it told paused GPUs from idle ones
  }
  JobEvaluation e = EvaluateJob(in, {});
  ASSERT_EQ(Kinds(e), std::vector<Kind>{Kind::kDataQuality});
  EXPECT_TRUE(e.findings[0].flags & (1u << 11));
  EXPECT_EQ(e.findings[0].profiling_unavailable_gpus, 8);
  EXPECT_EQ(e.findings[0].flagged_windows, 10);

  // Unflagged, the same windows are a regression.
  for (int m = 45; m < 60; ++m) in.windows[m].flags = 1u << 6;
  EXPECT_EQ(Kinds(EvaluateJob(in, {})),
            (std::vector<Kind>{Kind::kRegressionInJob, Kind::kDataQuality}));
}

TEST(JobDetectors, GpusWhoseProfilingIsPausedThroughoutAreNotIdle) {
  // Two of 8 GPUs profiled under Nsight for the whole job: the others give its OFU.
  JobInput in = Job(30, 0.4);
  for (JobWindow& w : in.windows) {
    w.flags = 1u << 11;
    w.gpus_reporting = 6;
    w.idle_gpus = {"n1/6/", "n1/7/"};
  }
  JobEvaluation e = EvaluateJob(in, {});
  ASSERT_EQ(Kinds(e), std::vector<Kind>{Kind::kDataQuality});
  EXPECT_EQ(e.findings[0].profiling_unavailable_gpus, 2);
  for (JobWindow& w : in.windows) w.flags = 0;
  EXPECT_EQ(Kinds(EvaluateJob(in, {})), std::vector<Kind>{Kind::kIdleGpus});
}

TEST(JobDetectors, StuckCountersAtLoadAreDataQualityNotARegression) {
  // From minute 40 the counters of every GPU read 0 at 650 W: the only samples ofu still
  // takes (drawing less, between steps) read 0 too, so the job's OFU drops 20x.
  JobInput in = Job(60, 0.4);
  for (int m = 40; m < 60; ++m) {
    JobWindow& w = in.windows[m];
    w.flags = 1u << 12;
    w.window.ofu = 0.02;
    w.gpu_ofu_median = 0.02;
    w.power_w_mean = 8 * 650;
  }
  JobEvaluation e = EvaluateJob(in, {});
  ASSERT_EQ(Kinds(e), std::vector<Kind>{Kind::kDataQuality});
  EXPECT_TRUE(e.findings[0].flags & (1u << 12));
  ASSERT_TRUE(e.findings[0].stuck_power_w_per_gpu.has_value());
  EXPECT_NEAR(*e.findings[0].stuck_power_w_per_gpu, 650, 1e-9);
  for (int m = 40; m < 60; ++m) in.windows[m].flags = 0;
  EXPECT_EQ(Kinds(EvaluateJob(in, {})), std::vector<Kind>{Kind::kRegressionInJob});
}

TEST(JobDetectors, ConfidentOvercountVerdictIsADivergence) {
  JobInput in = Job(30, 0.4);
  in.divergence = DivergenceObs{.time_s = kStart + 1800,
                                .interval_start_s = kStart,
                                .interval_end_s = kStart + 1800,
                                .verdict = "app_flops_overcount",
                                .ratio = 2.1,
                                .confidence = 0.97,
                                .correction_factor = 0.48,
                                .top_cause = "latent_projection_moe",
                                .reason = ""};
  JobEvaluation e = EvaluateJob(in, {});
  ASSERT_EQ(Kinds(e), std::vector<Kind>{Kind::kDivergence});
  EXPECT_DOUBLE_EQ(*e.findings[0].factor, 2.1);
  in.divergence->verdict = "consistent";
  EXPECT_TRUE(EvaluateJob(in, {}).findings.empty());
  in.divergence->verdict = "app_flops_undercount";
  in.divergence->confidence = 0.5;
  EXPECT_TRUE(EvaluateJob(in, {}).findings.empty());
}

// An inference service (vLLM's own counters): its tokens per second and its GPUs' busy time
// follow its OFU, `tokens_per_ofu` tokens/s per unit of OFU and `busy_per_ofu` GR engine per
// unit of OFU, from minute 0 (the warm-up ramp included).
JobInput Service(int minutes, double level, const std::function<double(int)>& shape,
                 double tokens_per_ofu, const std::function<double(int)>& busy_per_ofu) {
  JobInput in = Job(minutes, level, shape);
  in.serving = true;
  for (int m = 0; m < minutes; ++m) {
    JobWindow& w = in.windows[m];
    w.tokens_per_s = w.window.ofu * tokens_per_ofu;
    w.activity.gr_engine_mean = w.window.ofu * busy_per_ofu(m);
  }
  return in;
}

// Night falls at minute 120: traffic, busy time and OFU halve together. A training run whose
// OFU halved has regressed; a service that serves half the tokens at the same cost per token
// has not.
TEST(JobDetectors, AServiceWhoseLoadHalvesAtNightHasNoRegression) {
  JobInput in = Service(
      240, 0.4, [](int m) { return m >= 120 ? 0.5 : 1.0; }, 2500, [](int) { return 2.0; });
  JobEvaluation e = EvaluateJob(in, {});
  EXPECT_TRUE(e.findings.empty()) << e.findings[0].detector;
  ASSERT_FALSE(e.precision_annotations.empty());
  EXPECT_THAT(e.precision_annotations.back(),
              ::testing::HasSubstr("OFU of the inference service fell"));
  in.serving = false;  // the same windows read as a training run
  EXPECT_EQ(Kinds(EvaluateJob(in, {})), std::vector<Kind>{Kind::kRegressionInJob});
  // A service whose engines report no tokens is read as any job.
  in.serving = true;
  for (JobWindow& w : in.windows) w.tokens_per_s.reset();
  EXPECT_EQ(Kinds(EvaluateJob(in, {})), std::vector<Kind>{Kind::kRegressionInJob});
}

// A release at minute 150 makes each token cost 2.5x the GPU time at the same traffic: OFU
// barely moves (the same FLOPs per token), the GPUs are busy 2.5x as long.
TEST(JobDetectors, AServiceSlowerPerTokenAtTheSameLoadIsARegressionInJob) {
  JobInput in = Service(
      240, 0.18, [](int) { return 1.0; }, 22000, [](int m) { return m >= 150 ? 5.0 : 2.0; });
  JobEvaluation e = EvaluateJob(in, {});
  ASSERT_EQ(Kinds(e), std::vector<Kind>{Kind::kRegressionInJob});
  const Finding& f = e.findings[0];
  EXPECT_EQ(f.detector, "serving/busy_gpu_seconds_per_token");
  ASSERT_TRUE(f.serving.has_value());
  EXPECT_NEAR(*f.factor, 2.5, 0.01);
  EXPECT_NEAR(f.serving->load_before, f.serving->load_after, 0.05 * f.serving->load_before);
  EXPECT_NEAR(f.serving->cost_after / f.serving->cost_before, 2.5, 0.01);
  EXPECT_GE(f.serving->comparable_windows, 100);
  EXPECT_EQ(f.onset_s, kStart + 150 * 60);
  EXPECT_LE(f.detected_s - f.onset_s, 10 * 60);
  // The same windows read as a training run: OFU did not move, nothing to report.
  in.serving = false;
  EXPECT_TRUE(EvaluateJob(in, {}).findings.empty());
}

// A service is not compared with its workload's earlier jobs by OFU: a quieter day is not a
// slower service.
TEST(JobDetectors, AQuietDayOfAServiceIsNotARegressionAgainstItsWorkload) {
  JobInput in = Service(
      60, 0.2, [](int) { return 1.0; }, 2500, [](int) { return 2.0; });
  for (int j = 0; j < 3; ++j) {
    EarlierJob e;
    e.job_id = "earlier-" + std::to_string(j);
    e.last_end_s = kStart - 86400 * (1 + j);
    e.steady = {.job_id = e.job_id, .median_ofu = 0.5, .mad_ofu = 0.01, .steady_windows = 500,
                .effective_peak_tflops = 0};
    in.earlier_jobs.push_back(e);
  }
  EXPECT_TRUE(EvaluateJob(in, {}).findings.empty());
  in.serving = false;
  EXPECT_EQ(Kinds(EvaluateJob(in, {})), std::vector<Kind>{Kind::kRegressionVsWorkload});
}

TEST(JobDetectors, TokenRateSpreadsEachIncreaseOverTheTimeBetweenItsSamples) {
  // 30 s scrapes of 3000 tokens each (100 tokens/s), offset 15 s from the windows.
  std::vector<TokenIncrease> inc;
  for (int k = 0; k < 8; ++k) inc.push_back({15'000 + k * 30'000, 45'000 + k * 30'000, 3000});
  // Then the engine was not scraped for 20 minutes: that increase says nothing of when.
  inc.push_back({255'000, 255'000 + 20 * 60'000, 1e6});
  TokenRate rate(inc);
  EXPECT_FALSE(rate.For(0, 10'000).has_value());     // before the first sample
  EXPECT_NEAR(*rate.For(15'000, 75'000), 100, 1e-9);  // two whole increases
  EXPECT_NEAR(*rate.For(60'000, 120'000), 100, 1e-9); // halves of three
  EXPECT_NEAR(*rate.For(240'000, 300'000), 25, 1e-9); // the last 15 s of the last one
  EXPECT_FALSE(rate.For(300'000, 360'000).has_value());  // the gap: unknown, not zero
  EXPECT_FALSE(rate.For(400'000, 400'000).has_value());  // an empty window
}

TEST(JobDetectors, TelemetryStoppedAfterTheConfiguredSilence) {
  DetectorOptions o;
  o.telemetry_stopped_after_s = 600;
  EXPECT_FALSE(TelemetryStopped(1000, 1500, o).has_value());
  std::optional<Finding> f = TelemetryStopped(1000, 1700, o);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->last_sample_s, 1000);
  EXPECT_EQ(f->kind, Kind::kTelemetryStopped);
}

}  // namespace
}  // namespace goodput::alerting
