#include "services/ofu/window_engine.h"

#include <map>
#include <set>
#include <ranges>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace goodput::ofu {
namespace {

using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::SizeIs;

constexpr char kH100[] = "NVIDIA H100 80GB HBM3";
constexpr int64_t kT0 = 1'767'225'600'000;  // a minute boundary

JobInfo Job(int gpus = 1) { return {.job = 7, .gpu_model = kH100, .gpus_allocated = gpus}; }

Sample S(std::string gpu, int64_t t_ms, double tensor, double clock = 1830) {
  Sample s;
  s.gpu = std::move(gpu);
  s.timestamp_ms = t_ms;
  s.tensor_active = tensor;
  s.sm_clock_mhz = clock;
  s.gr_engine_active = tensor > 0 ? 0.9 : 0.0;
  return s;
}

std::vector<WindowResult> JobLevel(std::vector<WindowResult> all) {
  std::vector<WindowResult> out;
  for (WindowResult& r : all) {
    if (r.gpu.empty()) out.push_back(std::move(r));
  }
  return out;
}

TEST(WindowStart, AlignsToTheEpochIncludingNegativeTimes) {
  EXPECT_EQ(WindowStart(kT0 + 59'999, 60'000), kT0);
  EXPECT_EQ(WindowStart(kT0 + 60'000, 60'000), kT0 + 60'000);
  EXPECT_EQ(WindowStart(-1, 60'000), -60'000);
}

TEST(WindowEngine, AMigInstanceCountsItsShareOfTheGpuInFleetFigures) {
  // Two 1g.10gb instances of one H100 (16 of 132 SMs each) held by one job, and one GPU that
  // sent nothing: the window stands for 2 x 16/132 + 1 GPUs. OFU stays the instances' own.
  WindowEngine engine(&core::GpuCatalog::BuiltIn(), {});
  for (int i = 0; i < 7; ++i) {
    for (const char* gpu : {"n1//GPU-a/mig1", "n1//GPU-a/mig2"}) {
      Sample s = S(gpu, kT0 + i * 10'000, 0.5);
      s.mig_profile = "1g.10gb";
      engine.Add(Job(3), s, 0);
    }
  }
  engine.Advance();
  std::vector<WindowResult> all = engine.TakeResults();
  std::vector<WindowResult> w = JobLevel(all);
  ASSERT_THAT(w, SizeIs(1));
  EXPECT_NEAR(*w[0].ofu, 0.5, 1e-9);
  EXPECT_NEAR(w[0].gpu_equivalents, 2 * 16.0 / 132 + 1, 1e-12);
  EXPECT_EQ(w[0].flags & kFlagSharedGpu, 0u);
  for (const WindowResult& r : all) {
    if (!r.gpu.empty()) {
      EXPECT_NEAR(r.gpu_equivalents, 16.0 / 132, 1e-12) << r.gpu;
    }
  }
}

TEST(WindowEngine, ATimeSlicedGpuIsFlaggedAndCountedOncePerSharingJob) {
  // One GPU time-sliced between three pods (jobs): each job's window stands for a third.
  WindowEngine engine(&core::GpuCatalog::BuiltIn(), {});
  for (int i = 0; i < 7; ++i) {
    Sample s = S("n1/0/GPU-a", kT0 + i * 10'000, 0.5);
    s.shared_by = 3;
    engine.Add(Job(), s, 0);
  }
  engine.Advance();
  std::vector<WindowResult> all = engine.TakeResults();
  ASSERT_THAT(all, SizeIs(2));
  for (const WindowResult& r : all) {
    EXPECT_NEAR(r.gpu_equivalents, 1.0 / 3, 1e-12);
    EXPECT_NE(r.flags & kFlagSharedGpu, 0u);
  }
  // A profile the MIG table does not hold counts as a whole GPU rather than a guess.
  WindowEngine other(&core::GpuCatalog::BuiltIn(), {});
  for (int i = 0; i < 7; ++i) {
    Sample s = S("n1//GPU-b/mig1", kT0 + i * 10'000, 0.5);
    s.mig_profile = "5g.99gb";
    other.Add(Job(), s, 0);
  }
  other.Advance();
  std::vector<WindowResult> unknown = JobLevel(other.TakeResults());
  ASSERT_THAT(unknown, SizeIs(1));
  EXPECT_EQ(unknown[0].gpu_equivalents, 1.0);
}

TEST(WindowEngine, EmitsAWindowOnceEventTimeReachesItsEndAndFinalizesAfterLateness) {
  WindowEngine engine(&core::GpuCatalog::BuiltIn(), {});
  for (int i = 0; i < 6; ++i) engine.Add(Job(), S("g0", kT0 + i * 10'000, 0.5), 0);
  engine.Advance();
  EXPECT_THAT(engine.TakeResults(), SizeIs(0));  // window still open

  engine.Add(Job(), S("g0", kT0 + 60'000, 0.5), 0);
  engine.Advance();
  std::vector<WindowResult> w = JobLevel(engine.TakeResults());
  ASSERT_THAT(w, SizeIs(1));
  EXPECT_EQ(w[0].start_ms, kT0);
  EXPECT_EQ(w[0].sample_count, 6);
  EXPECT_NEAR(*w[0].ofu, 0.5, 1e-9);
  EXPECT_FALSE(w[0].finalized);

  engine.Add(Job(), S("g0", kT0 + 180'000, 0.5), 0);  // end + 120 s lateness passed
  engine.Advance();
  w = JobLevel(engine.TakeResults());
  ASSERT_GE(w.size(), 1u);
  EXPECT_EQ(w[0].start_ms, kT0);
  EXPECT_TRUE(w[0].finalized);
}

TEST(WindowEngine, OfuUsesTheTensorMaxClockNotTheSmBoostClock) {
  WindowEngine engine(&core::GpuCatalog::BuiltIn(), {});
  for (int i = 0; i < 6; ++i) engine.Add(Job(), S("g0", kT0 + i * 10'000, 0.6, 1500), 0);
  engine.FlushJob(7);
  std::vector<WindowResult> w = JobLevel(engine.TakeResults());
  ASSERT_THAT(w, SizeIs(1));
  EXPECT_NEAR(*w[0].ofu, 0.6 * 1500 / 1830.0, 1e-6);
  EXPECT_TRUE(w[0].finalized);
}

TEST(WindowEngine, LateSampleWithinLatenessRevisesItsWindow) {
  WindowEngine engine(&core::GpuCatalog::BuiltIn(), {});
  for (int i = 0; i < 5; ++i) engine.Add(Job(), S("g0", kT0 + i * 10'000, 0.4), 0);
  engine.Add(Job(), S("g0", kT0 + 70'000, 0.4), 0);
  engine.Advance();
  ASSERT_EQ(JobLevel(engine.TakeResults())[0].sample_count, 5);

  engine.Add(Job(), S("g0", kT0 + 50'000, 1.0), 0);  // late but within lateness
  engine.Advance();
  std::vector<WindowResult> w = JobLevel(engine.TakeResults());
  ASSERT_THAT(w, SizeIs(1));
  EXPECT_EQ(w[0].sample_count, 6);
  EXPECT_NEAR(*w[0].ofu, (5 * 0.4 + 1.0) / 6, 1e-6);
  EXPECT_THAT(engine.TakeLateCounts(), SizeIs(0));
}

TEST(WindowEngine, SampleForAFinalWindowIsCountedLateAndLeftOut) {
  WindowEngine engine(&core::GpuCatalog::BuiltIn(), {});
  engine.Add(Job(), S("g0", kT0, 0.4), 0);
  engine.Add(Job(), S("g0", kT0 + 300'000, 0.4), 0);
  engine.Advance();
  engine.TakeResults();
  EXPECT_EQ(engine.Add(Job(), S("g0", kT0 + 5'000, 0.9), 0), AddOutcome::kLate);
  EXPECT_EQ(engine.Add(Job(), S("g0", kT0 + 6'000, 0.9), 0), AddOutcome::kLate);
  EXPECT_THAT(engine.TakeLateCounts(), ElementsAre(AllOf(Field(&LateCount::window_start_ms, kT0),
                                                         Field(&LateCount::count, 2))));
  engine.Advance();
  EXPECT_THAT(engine.TakeResults(), SizeIs(0));
}

TEST(WindowEngine, CoverageCountsGpusReportingAgainstGpusAllocated) {
  WindowEngine engine(&core::GpuCatalog::BuiltIn(), {});
  for (int i = 0; i < 6; ++i) {
    engine.Add(Job(4), S("g0", kT0 + i * 10'000, 0.5), 0);
    engine.Add(Job(4), S("g1", kT0 + i * 10'000, 0.3), 0);
  }
  engine.FlushJob(7);
  std::vector<WindowResult> all = engine.TakeResults();
  std::vector<WindowResult> w = JobLevel(all);
  ASSERT_THAT(w, SizeIs(1));
  EXPECT_EQ(w[0].gpus_reporting, 2);
  EXPECT_EQ(w[0].gpus_allocated, 4);
  EXPECT_DOUBLE_EQ(w[0].gpu_coverage, 0.5);
  EXPECT_TRUE(w[0].flags & kFlagLowGpuCoverage);
  EXPECT_NEAR(*w[0].gpu_ofu_min, 0.3, 1e-6);
  EXPECT_NEAR(*w[0].gpu_ofu_max, 0.5, 1e-6);
  EXPECT_NEAR(*w[0].ofu, 0.4, 1e-6);
  EXPECT_EQ(all.size(), 3u);  // job + two GPUs
}

TEST(WindowEngine, FindsIdleGpusAndStragglers) {
  WindowEngine engine(&core::GpuCatalog::BuiltIn(), {});
  for (int i = 0; i < 6; ++i) {
    for (int g = 0; g < 4; ++g)
      engine.Add(Job(5), S("g" + std::to_string(g), kT0 + i * 10'000, 0.5), 0);
    engine.Add(Job(5), S("slow", kT0 + i * 10'000, 0.2), 0);
    engine.Add(Job(5), S("idle", kT0 + i * 10'000, 0.0), 0);
  }
  engine.FlushJob(7);
  std::vector<WindowResult> w = JobLevel(engine.TakeResults());
  ASSERT_THAT(w, SizeIs(1));
  EXPECT_THAT(w[0].idle_gpus, ElementsAre("idle"));
  // The idle GPU is idle only: the stragglers are scored among the GPUs that compute.
  ASSERT_THAT(w[0].stragglers, SizeIs(1));
  EXPECT_EQ(w[0].stragglers[0].gpu, "slow");
  EXPECT_NEAR(w[0].stragglers[0].score, 0.4, 1e-6);
  ASSERT_TRUE(w[0].spatial_imbalance.has_value());
  EXPECT_GT(*w[0].spatial_imbalance, 0.2);
}

TEST(WindowEngine, EnergySpansTheWindowBoundaryFromThePreviousReading) {
  WindowEngine engine(&core::GpuCatalog::BuiltIn(), {});
  for (int i = 0; i < 13; ++i) {
    Sample s = S("g0", kT0 + i * 10'000, 0.5);
    s.energy_mj = 700.0 * 10.0 * 1000.0 * i;  // 700 W
    engine.Add(Job(), s, 0);
  }
  engine.FlushJob(7);
  std::vector<WindowResult> w = JobLevel(engine.TakeResults());
  ASSERT_THAT(w, SizeIs(3));
  EXPECT_NEAR(*w[1].energy_j, 700.0 * 60, 1e-6);  // 6 intervals of 10 s
}

// A GPU without the energy counter but with board power: its energy is power x time, and its
// window and the job's are marked estimated; the GPU with the counter is measured.
TEST(WindowEngine, EnergyOfAGpuWithoutTheCounterIsItsBoardPowerOverTheWindowMarkedEstimated) {
  WindowEngine engine(&core::GpuCatalog::BuiltIn(), {});
  for (int i = 0; i < 19; ++i) {
    Sample a = S("counted", kT0 + i * 10'000, 0.5);
    a.energy_mj = 700.0 * 10.0 * 1000.0 * i;  // 700 W
    a.power_w = 700;
    engine.Add(Job(), a, 0);
    Sample b = S("powered", kT0 + i * 10'000 + 1, 0.5);
    b.power_w = i % 2 == 0 ? 300 : 500;  // 400 W on average over each window
    engine.Add(Job(), b, 0);
  }
  engine.FlushJob(7);
  std::vector<WindowResult> results = engine.TakeResults();
  std::vector<WindowResult> w = JobLevel(results);
  ASSERT_THAT(w, SizeIs(4));
  ASSERT_TRUE(w[1].energy_j.has_value());
  EXPECT_NEAR(*w[1].energy_j, 700.0 * 60 + 400.0 * 60, 1e-6);
  EXPECT_TRUE(w[1].flags & kFlagEnergyEstimated);
  int estimated_gpus = 0;
  for (const WindowResult& r : results) {
    if (r.gpu.empty() || r.start_ms != w[1].start_ms) continue;
    if (r.flags & kFlagEnergyEstimated) {
      ++estimated_gpus;
      EXPECT_EQ(r.gpu, "powered");
      EXPECT_NEAR(*r.energy_j, 400.0 * 60, 1e-6);
    } else {
      EXPECT_NEAR(*r.energy_j, 700.0 * 60, 1e-6);
    }
  }
  EXPECT_EQ(estimated_gpus, 1);
}

TEST(WindowEngine, UnknownGpuModelIsFlaggedWithoutOfu) {
  WindowEngine engine(&core::GpuCatalog::BuiltIn(), {});
  JobInfo info = Job();
  info.gpu_model = "Imaginary GPU 9000";
  engine.Add(info, S("g0", kT0, 0.5), 0);
  engine.FlushJob(7);
  std::vector<WindowResult> w = JobLevel(engine.TakeResults());
  ASSERT_THAT(w, SizeIs(1));
  EXPECT_FALSE(w[0].ofu.has_value());
  EXPECT_TRUE(w[0].flags & kFlagUnknownGpuModel);
}

TEST(WindowEngine, IdleJobIsFlushedByArrivalTime) {
  EngineOptions options;
  options.idle_flush_ms = 1000;
  WindowEngine engine(&core::GpuCatalog::BuiltIn(), options);
  engine.Add(Job(), S("g0", kT0, 0.5), /*arrival_ms=*/100);
  engine.Advance(500);
  EXPECT_THAT(engine.TakeResults(), SizeIs(0));
  engine.Advance(1100);
  std::vector<WindowResult> w = JobLevel(engine.TakeResults());
  ASSERT_THAT(w, SizeIs(1));
  EXPECT_TRUE(w[0].finalized);
  EXPECT_FALSE(engine.Knows(7));
}

// The final version of each window, by (start, GPU): the last one emitted for it, of the
// windows whose job-level window is final. A per-GPU window is emitted again at finalization
// only if finalizing changed it; otherwise its last emission is its final version.
std::map<std::pair<int64_t, std::string>, WindowResult> Finals(
    const std::vector<WindowResult>& all) {
  std::set<std::pair<int64_t, int64_t>> final_job_windows;
  for (const WindowResult& r : all) {
    if (r.gpu.empty() && r.finalized) final_job_windows.emplace(r.job, r.start_ms);
  }
  std::map<std::pair<int64_t, std::string>, WindowResult> m;
  for (const WindowResult& r : all) {
    if (final_job_windows.contains({r.job, r.start_ms})) m[{r.start_ms, r.gpu}] = r;
  }
  return m;
}

TEST(WindowEngine, RestoringOpenWindowsReproducesTheUninterruptedResult) {
  auto feed = [](WindowEngine& e, int from, int to) {
    for (int i = from; i < to; ++i) {
      for (int g = 0; g < 3; ++g) {
        e.Add(Job(3), S("g" + std::to_string(g), kT0 + i * 10'000, 0.1 * g + 0.01 * (i % 7)), 0);
      }
      e.Advance();
    }
  };
  WindowEngine straight(&core::GpuCatalog::BuiltIn(), {});
  feed(straight, 0, 60);
  straight.FlushJob(7);
  std::vector<WindowResult> expected = straight.TakeResults();

  WindowEngine first(&core::GpuCatalog::BuiltIn(), {});
  feed(first, 0, 31);
  std::vector<WindowResult> got = first.TakeResults();
  std::vector<JobProgress> progress = first.TakeProgress();
  ASSERT_THAT(progress, SizeIs(1));
  // A new engine restores the samples of the windows that were not final.
  WindowEngine second(&core::GpuCatalog::BuiltIn(), {});
  JobInfo info = Job(3);
  info.final_before_ms = progress[0].final_before_ms;
  info.max_event_ms = progress[0].max_event_ms;
  for (int i = 0; i < 31; ++i) {
    for (int g = 0; g < 3; ++g) {
      second.Restore(info, S("g" + std::to_string(g), kT0 + i * 10'000, 0.1 * g + 0.01 * (i % 7)));
    }
  }
  second.RestoreDone(7);
  feed(second, 31, 60);
  second.FlushJob(7);
  for (WindowResult& r : second.TakeResults()) got.push_back(std::move(r));

  // Compare the final version of each window.
  auto a = Finals(expected), b = Finals(got);
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [key, r] : a) {
    ASSERT_TRUE(b.contains(key));
    EXPECT_EQ(b[key].sample_count, r.sample_count);
    EXPECT_DOUBLE_EQ(b[key].ofu.value_or(-1), r.ofu.value_or(-1));
  }
}

TEST(WindowEngine, AMinuteScrapeIsSparseEvenWithOneSamplePerWindow) {
  WindowEngine engine(&core::GpuCatalog::BuiltIn(), {});
  for (int i = 0; i < 10; ++i) {
    engine.Add(Job(), S("g0", kT0 + 30'000 + i * 60'000, 0.5), 0);
    engine.Advance();
  }
  engine.FlushJob(7);
  std::vector<WindowResult> w = JobLevel(engine.TakeResults());
  ASSERT_GE(w.size(), 10u);
  for (const WindowResult& r : Finals(w) | std::views::values) {
    EXPECT_EQ(r.sample_count, 1);
    // The first window has no earlier sample to tell the interval by.
    EXPECT_EQ(static_cast<bool>(r.flags & kFlagSparseSampling), r.start_ms > kT0) << r.start_ms;
    EXPECT_FALSE(r.flags & kFlagGap) << r.start_ms;
  }
}

TEST(WindowEngine, TenSecondSamplingIsNeitherSparseNorGappy) {
  WindowEngine engine(&core::GpuCatalog::BuiltIn(), {});
  for (int i = 0; i < 60; ++i) {
    engine.Add(Job(2), S("g0", kT0 + 5'000 + i * 10'000, 0.5), 0);
    engine.Add(Job(2), S("g1", kT0 + 7'000 + i * 10'000, 0.5), 0);
    engine.Advance();
  }
  engine.FlushJob(7);
  for (const auto& [key, r] : Finals(engine.TakeResults())) {
    EXPECT_EQ(r.flags & (kFlagSparseSampling | kFlagGap | kFlagLowGpuCoverage), 0u)
        << key.first << " " << key.second;
  }
}

TEST(WindowEngine, ATenMinuteSilenceLeavesGapWindowsWithZeroCoverage) {
  // Two GPUs sampled every 10 s for 5 minutes, silent for 10, then 5 minutes more.
  WindowEngine engine(&core::GpuCatalog::BuiltIn(), {});
  for (int i = 0; i < 120; ++i) {
    const int64_t t = kT0 + i * 10'000;
    if (t >= kT0 + 300'000 && t < kT0 + 900'000) continue;
    engine.Add(Job(2), S("g0", t, 0.5), 0);
    engine.Add(Job(2), S("g1", t, 0.5), 0);
    engine.Advance();
  }
  engine.FlushJob(7);
  std::map<std::pair<int64_t, std::string>, WindowResult> finals =
      Finals(JobLevel(engine.TakeResults()));
  ASSERT_EQ(finals.size(), 20u);  // every minute of the job has its window
  for (const auto& [key, r] : finals) {
    const int64_t start = key.first;
    const bool silent = start >= kT0 + 300'000 && start < kT0 + 900'000;
    // The silence began at the end of the 5th minute and ended at the start of the 16th.
    const bool touched = start >= kT0 + 240'000 && start <= kT0 + 900'000;
    EXPECT_EQ(static_cast<bool>(r.flags & kFlagGap), touched) << (start - kT0);
    EXPECT_EQ(r.gpus_allocated, 2);
    if (silent) {
      EXPECT_EQ(r.sample_count, 0);
      EXPECT_FALSE(r.ofu.has_value());
      EXPECT_EQ(r.gpu_coverage, 0);
      EXPECT_TRUE(r.flags & kFlagLowGpuCoverage);
    } else {
      EXPECT_EQ(r.sample_count, 12);
      EXPECT_EQ(r.gpu_coverage, 1);
    }
  }
}

TEST(WindowEngine, AGpuSilentWhileItsJobReportsIsAGap) {
  WindowEngine engine(&core::GpuCatalog::BuiltIn(), {});
  for (int i = 0; i < 60; ++i) {
    const int64_t t = kT0 + i * 10'000;
    engine.Add(Job(2), S("g0", t, 0.5), 0);
    if (t < kT0 + 120'000 || t >= kT0 + 480'000) engine.Add(Job(2), S("g1", t, 0.5), 0);
    engine.Advance();
  }
  engine.FlushJob(7);
  for (const auto& [key, r] : Finals(JobLevel(engine.TakeResults()))) {
    const int64_t start = key.first;
    EXPECT_EQ(static_cast<bool>(r.flags & kFlagGap),
              start >= kT0 + 60'000 && start <= kT0 + 480'000)
        << (start - kT0);
    if (start >= kT0 + 120'000 && start < kT0 + 480'000) {
      EXPECT_EQ(r.gpus_reporting, 1);
      EXPECT_EQ(r.gpus_allocated, 2);
    }
  }
}

TEST(WindowEngine, TheEndOfAJobIsNotAGap) {
  WindowEngine engine(&core::GpuCatalog::BuiltIn(), {});
  for (int i = 0; i < 20; ++i) {  // the last sample 10 s into the fourth minute
    engine.Add(Job(), S("g0", kT0 + i * 10'000, 0.5), 0);
    engine.Advance();
  }
  engine.FlushJob(7);
  std::vector<WindowResult> w = JobLevel(engine.TakeResults());
  ASSERT_EQ(Finals(w).size(), 4u);
  for (const WindowResult& r : w) EXPECT_FALSE(r.flags & kFlagGap) << (r.start_ms - kT0);
}

TEST(WindowEngine, AJobBackAfterAFlushHasItsSilenceReportedAsGapWindows) {
  EngineOptions options;
  options.idle_flush_ms = 300'000;
  WindowEngine engine(&core::GpuCatalog::BuiltIn(), options);
  for (int i = 0; i < 12; ++i) {
    engine.Add(Job(), S("g0", kT0 + i * 10'000, 0.5), /*arrival_ms=*/kT0 + i * 10'000);
  }
  engine.Advance(kT0 + 600'000);  // idle: flushed
  ASSERT_FALSE(engine.Knows(7));
  engine.TakeResults();
  std::vector<JobProgress> progress = engine.TakeProgress();
  ASSERT_THAT(progress, SizeIs(1));

  // Back 10 minutes later, reloaded with its persisted progress.
  JobInfo info = Job();
  info.final_before_ms = progress[0].final_before_ms;
  info.max_event_ms = progress[0].max_event_ms;
  for (int i = 0; i < 12; ++i) {
    const int64_t t = kT0 + 720'000 + i * 10'000;
    engine.Add(info, S("g0", t, 0.5), t);
  }
  engine.FlushJob(7);
  std::map<std::pair<int64_t, std::string>, WindowResult> finals =
      Finals(JobLevel(engine.TakeResults()));
  ASSERT_EQ(finals.size(), 12u);  // minutes 2 to 13
  for (const auto& [key, r] : finals) {
    const int64_t start = key.first;
    EXPECT_EQ(static_cast<bool>(r.flags & kFlagGap), start <= kT0 + 720'000) << (start - kT0);
    EXPECT_EQ(r.sample_count, start < kT0 + 720'000 ? 0 : 6) << (start - kT0);
  }
}

TEST(WindowEngine, RestoringKeepsTheSamplingHistoryAndTheGapWindows) {
  // One GPU scraped every minute, silent for 10 minutes in the middle.
  std::vector<Sample> samples;
  for (int i = 0; i < 40; ++i) {
    if (i >= 10 && i < 20) continue;
    samples.push_back(S("g0", kT0 + 20'000 + i * 60'000, 0.5));
  }
  WindowEngine straight(&core::GpuCatalog::BuiltIn(), {});
  for (const Sample& x : samples) {
    straight.Add(Job(), x, 0);
    straight.Advance();
  }
  straight.FlushJob(7);
  const auto expected = Finals(straight.TakeResults());

  for (size_t cut : {size_t{10}, size_t{11}, size_t{15}}) {
    WindowEngine first(&core::GpuCatalog::BuiltIn(), {});
    std::vector<WindowResult> got;
    for (size_t i = 0; i < cut; ++i) {
      first.Add(Job(), samples[i], 0);
      first.Advance();
    }
    got = first.TakeResults();
    std::vector<JobProgress> progress = first.TakeProgress();
    ASSERT_THAT(progress, SizeIs(1));
    // What the store hands back: the open windows and the lookback before them, or before the
    // last sample ahead of them.
    WindowEngine second(&core::GpuCatalog::BuiltIn(), {});
    JobInfo info = Job();
    info.final_before_ms = progress[0].final_before_ms;
    info.max_event_ms = progress[0].max_event_ms;
    int64_t last_before = info.final_before_ms;
    for (size_t i = 0; i < cut; ++i) {
      if (samples[i].timestamp_ms < info.final_before_ms) last_before = samples[i].timestamp_ms;
    }
    const int64_t from =
        std::min(info.final_before_ms, last_before) - RestoreLookbackMs(second.options());
    for (size_t i = 0; i < cut; ++i) {
      if (samples[i].timestamp_ms >= from) second.Restore(info, samples[i]);
    }
    second.RestoreDone(7);
    for (size_t i = cut; i < samples.size(); ++i) {
      second.Add(Job(), samples[i], 0);
      second.Advance();
    }
    second.FlushJob(7);
    for (WindowResult& r : second.TakeResults()) got.push_back(std::move(r));
    const auto restored = Finals(got);
    ASSERT_EQ(restored.size(), expected.size()) << "cut " << cut;
    for (const auto& [key, r] : expected) {
      ASSERT_TRUE(restored.contains(key)) << (key.first - kT0) << " cut " << cut;
      EXPECT_EQ(restored.at(key).flags, r.flags) << (key.first - kT0) << " cut " << cut;
      EXPECT_EQ(restored.at(key).sample_count, r.sample_count);
    }
  }
}

// A GPU whose DCGM profiling is paused (a user runs Nsight): the profiling fields vanish
// while clock, power and memory go on.
Sample Paused(std::string gpu, int64_t t_ms) {
  Sample s;
  s.gpu = std::move(gpu);
  s.timestamp_ms = t_ms;
  s.sm_clock_mhz = 1980;
  s.power_w = 650;
  s.fb_used_mib = 60'000;
  return s;
}

// Tensor and GR-engine activity 0 at `power_w` and `clock_mhz`.
Sample Zero(std::string gpu, int64_t t_ms, double power_w, double clock_mhz = 1980) {
  Sample s = S(std::move(gpu), t_ms, 0.0, clock_mhz);
  s.power_w = power_w;
  return s;
}

TEST(WindowEngine, PausedProfilingIsFlaggedGivesNoOfuAndIsNotIdle) {
  // Two H100s computing; from minute 3 on, g1's profiling is paused for 5 minutes.
  WindowEngine engine(&core::GpuCatalog::BuiltIn(), {});
  for (int i = 0; i < 60; ++i) {
    const int64_t t = kT0 + i * 10'000;
    engine.Add(Job(2), S("g0", t, 0.5), 0);
    const bool paused = t >= kT0 + 180'000 && t < kT0 + 480'000;
    engine.Add(Job(2), paused ? Paused("g1", t) : S("g1", t, 0.5), 0);
    engine.Advance();
  }
  engine.FlushJob(7);
  const auto finals = Finals(engine.TakeResults());
  ASSERT_EQ(finals.size(), 30u);  // 10 windows x (job, g0, g1)
  for (const auto& [key, r] : finals) {
    const auto& [start, gpu] = key;
    const bool paused = start >= kT0 + 180'000 && start < kT0 + 480'000;
    SCOPED_TRACE(absl::StrCat(start - kT0, " ", gpu));
    // g1 kept reporting: not a gap, not sparse.
    EXPECT_FALSE(r.flags & (kFlagGap | kFlagSparseSampling));
    if (gpu == "g0") {
      EXPECT_FALSE(r.flags & kFlagProfilingUnavailable);
      continue;
    }
    EXPECT_EQ(static_cast<bool>(r.flags & kFlagProfilingUnavailable), paused);
    EXPECT_FALSE(r.flags & kFlagProfilingCounterStuck);
    if (gpu == "g1") {
      EXPECT_EQ(r.ofu.has_value(), !paused);
      continue;
    }
    // The job: OFU from g0 alone while g1 is paused; g1 is neither idle nor a straggler.
    ASSERT_TRUE(r.ofu.has_value());
    EXPECT_NEAR(*r.ofu, 0.5, 1e-6);
    EXPECT_EQ(r.gpus_reporting, paused ? 1 : 2);
    EXPECT_THAT(r.idle_gpus, SizeIs(0));
    EXPECT_THAT(r.stragglers, SizeIs(0));
    EXPECT_NE(r.roofline, Roofline::kIdle);
  }
}

TEST(WindowEngine, AJobWhoseProfilingIsPausedOnEveryGpuHasNoOfuAndNoIdleGpus) {
  WindowEngine engine(&core::GpuCatalog::BuiltIn(), {});
  for (int i = 0; i < 6; ++i) {
    engine.Add(Job(2), Paused("g0", kT0 + i * 10'000), 0);
    Sample blank;  // as tests/data/dcgm/h100_profiling_blank.prom: power and memory only
    blank.gpu = "g1";
    blank.timestamp_ms = kT0 + i * 10'000;
    blank.power_w = 69.437;
    blank.fb_used_mib = 0;
    engine.Add(Job(2), blank, 0);
  }
  engine.FlushJob(7);
  std::vector<WindowResult> w = JobLevel(engine.TakeResults());
  ASSERT_THAT(w, SizeIs(1));
  EXPECT_FALSE(w[0].ofu.has_value());
  EXPECT_EQ(w[0].gpus_reporting, 0);
  EXPECT_TRUE(w[0].flags & kFlagProfilingUnavailable);
  EXPECT_THAT(w[0].idle_gpus, SizeIs(0));
  EXPECT_THAT(w[0].stragglers, SizeIs(0));
}

TEST(WindowEngine, ZeroCountersAtNearTdpAndBoostClockAreStuckNotIdle) {
  // H100 SXM: 700 W board power, 1980 MHz boost. g1 reads 0 at 650 W and 1980 MHz.
  WindowEngine engine(&core::GpuCatalog::BuiltIn(), {});
  for (int i = 0; i < 6; ++i) {
    engine.Add(Job(2), S("g0", kT0 + i * 10'000, 0.5), 0);
    engine.Add(Job(2), Zero("g1", kT0 + i * 10'000, 650), 0);
  }
  engine.FlushJob(7);
  const auto finals = Finals(engine.TakeResults());
  ASSERT_EQ(finals.size(), 3u);
  const WindowResult& job = finals.at({kT0, ""});
  const WindowResult& g1 = finals.at({kT0, "g1"});
  EXPECT_TRUE(job.flags & kFlagProfilingCounterStuck);
  EXPECT_FALSE(job.flags & kFlagProfilingUnavailable);
  EXPECT_TRUE(g1.flags & kFlagProfilingCounterStuck);
  EXPECT_FALSE(finals.at({kT0, "g0"}).flags & kFlagProfilingCounterStuck);
  // No OFU from the stuck samples: the job's is g0's, not (0.5 + 0) / 2.
  EXPECT_FALSE(g1.ofu.has_value());
  ASSERT_TRUE(job.ofu.has_value());
  EXPECT_NEAR(*job.ofu, 0.5, 1e-6);
  EXPECT_THAT(job.idle_gpus, SizeIs(0));
  EXPECT_THAT(job.stragglers, SizeIs(0));
  EXPECT_NE(g1.roofline, Roofline::kIdle);
  EXPECT_FALSE(job.flags & (kFlagGap | kFlagSparseSampling));
}

TEST(WindowEngine, AnIdleGpuIsStillIdleAndNotStuck) {
  // Each case: power and clock of a GPU reading 0, whether it is judged stuck.
  struct Case {
    const char* what;
    std::string model;
    double power_w, clock_mhz;
    EngineOptions options;
    bool stuck;
  };
  EngineOptions strict;
  strict.stuck_min_power_fraction = 0.95;
  const std::vector<Case> cases = {
      {"idle at 70 W", kH100, 70, 1980, {}, false},
      {"at boost clock, power below 60% of 700 W", kH100, 419, 1980, {}, false},
      {"at 650 W below 90% of the 1980 MHz boost", kH100, 650, 1781, {}, false},
      {"at 650 W with a stricter power share", kH100, 650, 1980, strict, false},
      {"a model without a board power", "NVIDIA H800", 650, 1980, {}, false},
      {"at 60% of board power and 90% of boost", kH100, 420, 1782, {}, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    WindowEngine engine(&core::GpuCatalog::BuiltIn(), c.options);
    JobInfo info = Job(2);
    info.gpu_model = c.model;
    for (int i = 0; i < 6; ++i) {
      engine.Add(info, S("g0", kT0 + i * 10'000, 0.5), 0);
      engine.Add(info, Zero("idle", kT0 + i * 10'000, c.power_w, c.clock_mhz), 0);
    }
    engine.FlushJob(7);
    std::vector<WindowResult> w = JobLevel(engine.TakeResults());
    ASSERT_THAT(w, SizeIs(1));
    EXPECT_EQ(static_cast<bool>(w[0].flags & kFlagProfilingCounterStuck), c.stuck);
    EXPECT_FALSE(w[0].flags & kFlagProfilingUnavailable);
    if (c.stuck) {
      EXPECT_THAT(w[0].idle_gpus, SizeIs(0));
    } else {
      EXPECT_THAT(w[0].idle_gpus, ElementsAre("idle"));
      ASSERT_TRUE(w[0].ofu.has_value());
      EXPECT_NEAR(*w[0].ofu, 0.25, 1e-6);  // the idle GPU's zeros count
    }
  }
}

TEST(WindowEngine, AnIdleMigInstanceOnABusyGpuIsIdleNotStuck) {
  // A MIG instance reports the whole GPU's power and clock: 650 W at 1980 MHz from the other
  // instances' work says nothing of its own counters.
  WindowEngine engine(&core::GpuCatalog::BuiltIn(), {});
  for (int i = 0; i < 6; ++i) {
    for (const char* gpu : {"n1//GPU-a/mig1", "n1//GPU-a/mig2"}) {
      Sample s = std::string(gpu).ends_with("mig1") ? S(gpu, kT0 + i * 10'000, 0.5)
                                                    : Zero(gpu, kT0 + i * 10'000, 650);
      s.power_w = 650;
      s.mig_profile = "1g.10gb";
      engine.Add(Job(2), s, 0);
    }
  }
  engine.FlushJob(7);
  std::vector<WindowResult> w = JobLevel(engine.TakeResults());
  ASSERT_THAT(w, SizeIs(1));
  EXPECT_FALSE(w[0].flags & kFlagProfilingCounterStuck);
  EXPECT_THAT(w[0].idle_gpus, ElementsAre("n1//GPU-a/mig2"));
}

TEST(WindowEngine, MemoryPerActiveGpuStaysUnderTwoKibAtTenSecondSampling) {
  WindowEngine engine(&core::GpuCatalog::BuiltIn(), {});
  const int gpus = 512;
  for (int i = 0; i < 60; ++i) {  // ten minutes
    for (int g = 0; g < gpus; ++g) {
      engine.Add(Job(gpus),
                 S("node" + std::to_string(g / 8) + "/" + std::to_string(g % 8) + "/",
                   kT0 + i * 10'000, 0.5),
                 0);
    }
    engine.Advance();
    engine.TakeResults();
  }
  EXPECT_EQ(engine.ActiveGpuCount(), static_cast<size_t>(gpus));
  EXPECT_LT(engine.MemoryBytes() / gpus, 2048u);
}

}  // namespace
}  // namespace goodput::ofu

namespace goodput::ofu {
namespace {

TEST(WindowEngine, PerGpuWindowsAreEmittedOnceUnlessFinalizingOrALateSampleChangesThem) {
  // Two GPUs sampled every 10 s for ten minutes, in order: each per-GPU window is emitted
  // once (when it closes; finalizing leaves it as it was), each job window twice. A late
  // sample revises its job window and its GPU's window, not the other GPU's.
  WindowEngine engine(&core::GpuCatalog::BuiltIn(), {});
  std::vector<WindowResult> all;
  for (int i = 0; i < 60; ++i) {
    const int64_t t = kT0 + 5'000 + i * 10'000;
    engine.Add(Job(2), S("g0", t, 0.4), 0);
    engine.Add(Job(2), S("g1", t, 0.6), 0);
    // A late sample of g1, 70 s after its time: its window (closed, not yet final) is revised.
    if (i == 20) engine.Add(Job(2), S("g1", kT0 + 130'500, 0.9), 0);
    engine.Advance();
    for (WindowResult& r : engine.TakeResults()) all.push_back(std::move(r));
  }
  engine.FlushJob(7);
  for (WindowResult& r : engine.TakeResults()) all.push_back(std::move(r));

  std::map<std::pair<int64_t, std::string>, int> emitted;
  for (const WindowResult& r : all) ++emitted[{r.start_ms, r.gpu}];
  ASSERT_EQ(emitted.size(), 30u);  // 10 windows x (job, g0, g1)
  for (const auto& [key, n] : emitted) {
    const auto& [start, gpu] = key;
    SCOPED_TRACE(absl::StrCat(start - kT0, " ", gpu));
    if (gpu.empty()) {
      // Closed, (revised,) finalized; the last window closes and is final at the flush.
      EXPECT_EQ(n, start == kT0 + 120'000 ? 3 : start == kT0 + 540'000 ? 1 : 2);
    } else if (gpu == "g1" && start == kT0 + 120'000) {
      EXPECT_EQ(n, 2);  // closed, then revised by the late sample (g0's part unchanged)
    } else {
      EXPECT_EQ(n, 1);
    }
  }
  // The last emission of each window holds everything: the revised g1 window has 7 samples.
  const auto finals = Finals(all);
  ASSERT_EQ(finals.size(), 30u);
  EXPECT_EQ(finals.at({kT0 + 120'000, "g1"}).sample_count, 7);
  EXPECT_EQ(finals.at({kT0 + 120'000, ""}).sample_count, 13);
  for (const auto& [key, r] : finals) {
    if (key.second.empty()) {
      EXPECT_TRUE(r.finalized);
    }
  }
}

TEST(WindowEngine, APerGpuWindowThatFinalizingChangesIsEmittedAgainAsFinal) {
  // g1 goes silent for good after minute 3 while g0 goes on: its last window learns only by
  // the time it is final that the silence is a gap, so finalizing changes it.
  WindowEngine engine(&core::GpuCatalog::BuiltIn(), {});
  std::vector<WindowResult> all;
  for (int i = 0; i < 60; ++i) {
    const int64_t t = kT0 + 5'000 + i * 10'000;
    engine.Add(Job(2), S("g0", t, 0.4), 0);
    if (t < kT0 + 180'000) engine.Add(Job(2), S("g1", t, 0.6), 0);
    engine.Advance();
    for (WindowResult& r : engine.TakeResults()) all.push_back(std::move(r));
  }
  engine.FlushJob(7);
  for (WindowResult& r : engine.TakeResults()) all.push_back(std::move(r));
  // g1's window at 120 s is emitted when it closes and again, final and flagged as the start
  // of a gap, when it is finalized; g1's earlier windows once; g0's windows once each.
  std::map<std::pair<int64_t, std::string>, std::vector<WindowResult>> emitted;
  for (const WindowResult& r : all) {
    if (!r.gpu.empty()) emitted[{r.start_ms - kT0, r.gpu}].push_back(r);
  }
  for (const auto& [key, versions] : emitted) {
    SCOPED_TRACE(absl::StrCat(key.first, " ", key.second));
    if (key != std::make_pair(int64_t{120'000}, std::string("g1"))) {
      EXPECT_THAT(versions, SizeIs(1));
      continue;
    }
    ASSERT_THAT(versions, SizeIs(2));
    EXPECT_FALSE(versions[0].finalized);
    EXPECT_FALSE(versions[0].flags & kFlagGap);
    EXPECT_TRUE(versions[1].finalized);
    EXPECT_TRUE(versions[1].flags & kFlagGap);
    EXPECT_EQ(versions[1].sample_count, 6);
  }
  EXPECT_EQ(emitted.size(), 13u);  // g0: 10 windows, g1: 3
}

namespace recompute {

constexpr int64_t kMin = 60'000;

TEST(LateRecomputeSpans, EachLateWindowWithItsFinalNeighboursMergedAndCut) {
  const int64_t m = kMin;
  // Minutes 10..12 reached, everything before minute 30 final: 9..13 with the neighbours.
  EXPECT_THAT(LateRecomputeSpans({kT0 + 12 * m, kT0 + 10 * m, kT0 + 11 * m, kT0 + 10 * m},
                                 kT0 + 30 * m, m, 60),
              ElementsAre(RecomputeSpan{kT0 + 9 * m, kT0 + 14 * m}));
  // The next window is not final yet: the engine computes it with the late sample.
  EXPECT_THAT(LateRecomputeSpans({kT0 + 10 * m}, kT0 + 11 * m, m, 60),
              ElementsAre(RecomputeSpan{kT0 + 9 * m, kT0 + 11 * m}));
  // Touching spans merge; a bound of 2 windows cuts them.
  EXPECT_THAT(LateRecomputeSpans({kT0 + 10 * m, kT0 + 13 * m}, kT0 + 30 * m, m, 60),
              ElementsAre(RecomputeSpan{kT0 + 9 * m, kT0 + 15 * m}));
  EXPECT_THAT(LateRecomputeSpans({kT0 + 10 * m, kT0 + 13 * m}, kT0 + 30 * m, m, 2),
              ElementsAre(RecomputeSpan{kT0 + 9 * m, kT0 + 11 * m},
                          RecomputeSpan{kT0 + 11 * m, kT0 + 13 * m},
                          RecomputeSpan{kT0 + 13 * m, kT0 + 15 * m}));
  EXPECT_THAT(LateRecomputeSpans({kT0 + 10 * m, kT0 + 20 * m}, kT0 + 30 * m, m, 60),
              ElementsAre(RecomputeSpan{kT0 + 9 * m, kT0 + 12 * m},
                          RecomputeSpan{kT0 + 19 * m, kT0 + 22 * m}));
}

// Host a's two GPUs and host b's two, every 10 s for 30 minutes, with cumulative energy.
Sample At(int gpu, int i) {
  const char* names[] = {"a/0/", "a/1/", "b/0/", "b/1/"};
  Sample s = S(names[gpu], kT0 + i * 10'000, 0.2 + 0.1 * gpu + 0.01 * (i % 5));
  s.power_w = 400 + 10 * gpu;
  s.energy_mj = 1e6 * gpu + i * 10.0 * s.power_w * 1000;
  return s;
}
bool HostBLate(int gpu, int i) { return gpu >= 2 && i >= 60 && i < 120; }  // minutes 10..19

TEST(RecomputeFinalWindows, LateHostTelemetryGivesExactlyTheWindowsOfAnOnTimeRun) {
  // Reference: everything on time.
  WindowEngine on_time(&core::GpuCatalog::BuiltIn(), {});
  for (int i = 0; i < 180; ++i) {
    for (int g = 0; g < 4; ++g) on_time.Add(Job(4), At(g, i), 0);
    on_time.Advance();
  }
  on_time.FlushJob(7);
  const auto expected = Finals(on_time.TakeResults());

  // Host b's minutes 10..19 arrive after minute 30, when those windows are final.
  WindowEngine live(&core::GpuCatalog::BuiltIn(), {});
  for (int i = 0; i < 180; ++i) {
    for (int g = 0; g < 4; ++g) {
      if (!HostBLate(g, i)) live.Add(Job(4), At(g, i), 0);
    }
    live.Advance();
  }
  const auto before = Finals(live.TakeResults());
  std::vector<int64_t> late_starts;
  for (int i = 60; i < 120; ++i) {
    for (int g = 2; g < 4; ++g) {
      ASSERT_EQ(live.Add(Job(4), At(g, i), 0), AddOutcome::kLate);
    }
  }
  for (const LateCount& l : live.TakeLateCounts()) late_starts.push_back(l.window_start_ms);
  ASSERT_THAT(late_starts, SizeIs(10));
  const std::optional<WindowEngine::Standing> standing = live.StandingOf(7);
  ASSERT_TRUE(standing.has_value());
  EXPECT_EQ(standing->gpus, 4u);
  EXPECT_EQ(standing->max_event_ms, kT0 + 179 * 10'000);
  // Left out, the windows of minutes 10..19 had host b silent.
  for (int m = 10; m < 20; ++m) {
    const WindowResult& w = before.at({kT0 + m * kMin, ""});
    EXPECT_EQ(w.gpus_reporting, 2) << m;
    EXPECT_THAT(w.silent_gpus, SizeIs(2)) << m;
  }
  EXPECT_NE(before.at({kT0 + 9 * kMin, ""}).flags & kFlagGap, 0u);

  const std::vector<RecomputeSpan> spans =
      LateRecomputeSpans(late_starts, standing->final_before_ms, kMin, 60);
  ASSERT_THAT(spans, ElementsAre(RecomputeSpan{kT0 + 9 * kMin, kT0 + 21 * kMin}));
  const RecomputeSpan range = RecomputeSampleRange(spans[0], EngineOptions{});
  std::vector<Sample> stored;  // what the samples table holds for the range, in any order
  for (int g = 3; g >= 0; --g) {
    for (int i = 0; i < 180; ++i) {
      const Sample s = At(g, i);
      if (s.timestamp_ms >= range.from_ms && s.timestamp_ms < range.to_ms) stored.push_back(s);
    }
  }
  JobInfo info = Job(4);
  info.max_event_ms = standing->max_event_ms;
  const std::vector<WindowResult> recomputed =
      RecomputeFinalWindows(&core::GpuCatalog::BuiltIn(), EngineOptions{}, info, stored, spans[0]);
  ASSERT_THAT(recomputed, SizeIs(12 * 5));  // 12 windows, job level and 4 GPUs
  for (const WindowResult& r : recomputed) {
    SCOPED_TRACE(absl::StrCat((r.start_ms - kT0) / kMin, " ", r.gpu));
    ASSERT_TRUE(expected.contains({r.start_ms, r.gpu}));
    const WindowResult& e = expected.at({r.start_ms, r.gpu});
    EXPECT_TRUE(r.finalized);
    EXPECT_EQ(r.flags, e.flags | kFlagLateSamplesRecomputed);
    EXPECT_EQ(r.sample_count, e.sample_count);
    EXPECT_EQ(r.gpus_reporting, e.gpus_reporting);
    EXPECT_DOUBLE_EQ(r.ofu.value_or(-1), e.ofu.value_or(-1));
    EXPECT_DOUBLE_EQ(r.ofu_ci95_half_width.value_or(-1), e.ofu_ci95_half_width.value_or(-1));
    EXPECT_DOUBLE_EQ(r.energy_j.value_or(-1), e.energy_j.value_or(-1));
    EXPECT_DOUBLE_EQ(r.gpu_equivalents, e.gpu_equivalents);
    EXPECT_THAT(r.silent_gpus, SizeIs(e.silent_gpus.size()));
    EXPECT_EQ(r.stragglers.size(), e.stragglers.size());
    EXPECT_EQ(r.idle_gpus, e.idle_gpus);
  }
}

}  // namespace recompute

}  // namespace
}  // namespace goodput::ofu
