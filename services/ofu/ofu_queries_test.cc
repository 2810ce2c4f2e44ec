#include "services/ofu/ofu_queries.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace goodput::ofu {
namespace {

constexpr int64_t kT0 = 1'767'225'600'000;

StoredWindow W(int64_t start_ms, double ofu, int64_t samples, int gpus = 8,
               std::vector<std::string> idle = {}) {
  StoredWindow s;
  s.window_s = 60;
  s.result.start_ms = start_ms;
  s.result.end_ms = start_ms + 60'000;
  s.result.ofu = ofu;
  s.result.ofu_stddev = 0.01;
  s.result.sample_count = samples;
  s.result.gpus_allocated = gpus;
  s.result.gpu_equivalents = gpus;
  s.result.gpus_reporting = gpus;
  s.result.gpu_coverage = 1;
  s.result.idle_gpus = std::move(idle);
  s.result.finalized = true;
  return s;
}

TEST(EffectiveResolution, RoundsUpToAMultipleOfTheNativeWindow) {
  EXPECT_EQ(EffectiveResolutionS(0, 60), 60);
  EXPECT_EQ(EffectiveResolutionS(30, 60), 60);
  EXPECT_EQ(EffectiveResolutionS(61, 60), 120);
  EXPECT_EQ(EffectiveResolutionS(300, 60), 300);
}

TEST(Downsample, MergesWindowsIntoEpochAlignedBucketsWeightedBySamples) {
  std::vector<StoredWindow> in = {W(kT0, 0.2, 10), W(kT0 + 60'000, 0.5, 30),
                                  W(kT0 + 180'000, 0.4, 10)};
  in[1].result.flags = 1u << 4;
  std::vector<StoredWindow> out = Downsample(in, 120);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].result.start_ms, kT0);
  EXPECT_EQ(out[0].result.end_ms, kT0 + 120'000);
  EXPECT_EQ(out[0].window_s, 120);
  EXPECT_EQ(out[0].result.sample_count, 40);
  EXPECT_NEAR(*out[0].result.ofu, (0.2 * 10 + 0.5 * 30) / 40, 1e-12);
  EXPECT_EQ(out[0].result.flags, 1u << 4);
  ASSERT_TRUE(out[0].result.ofu_ci95_half_width.has_value());
  EXPECT_EQ(out[1].result.start_ms, kT0 + 120'000);
  EXPECT_EQ(out[1].result.sample_count, 10);
}

TEST(SummarizeJob, ExcludesWarmupFromSteadyStateAndCountsGpuHours) {
  std::vector<StoredWindow> w = {W(kT0, 0.05, 16, 8, {"a/0/", "a/1/"}), W(kT0 + 60'000, 0.2, 16),
                                 W(kT0 + 120'000, 0.5, 16), W(kT0 + 180'000, 0.5, 16),
                                 W(kT0 + 240'000, 0.5, 16)};
  JobRow job;
  job.gpus_allocated = 8;
  JobSummaryFigures f = SummarizeJob(job, w, {}, kT0 + 300'000);
  EXPECT_NEAR(*f.ofu, (0.05 + 0.2 + 1.5) / 5, 1e-12);
  ASSERT_TRUE(f.steady_state_ofu.has_value());
  EXPECT_NEAR(*f.steady_state_ofu, 0.5, 1e-12);
  EXPECT_EQ(*f.steady_state_start_ms, kT0 + 120'000);
  EXPECT_NEAR(f.gpu_hours, 8 * 5 / 60.0, 1e-12);
  EXPECT_NEAR(f.effective_gpu_hours, 8 / 60.0 * (0.05 + 0.2 + 1.5), 1e-12);
  EXPECT_NEAR(f.idle_gpu_hours, 2 / 60.0, 1e-12);
}

TEST(SummarizeJob, NamesStragglersAndIdleGpusFromPerGpuMeans) {
  JobRow job;
  std::vector<PerGpuFigure> gpus = {
      {"h/0/", 0.5, false}, {"h/1/", 0.5, false}, {"h/2/", 0.25, false}, {"h/3/", 0.0, true}};
  JobSummaryFigures f = SummarizeJob(job, {W(kT0, 0.3, 10)}, gpus, kT0);
  // The idle GPU is idle only, not also the slowest straggler.
  ASSERT_EQ(f.stragglers.size(), 1u);
  EXPECT_EQ(f.stragglers[0].gpu, "h/2/");
  EXPECT_THAT(f.idle_gpus, ::testing::ElementsAre("h/3/"));
}

TEST(SummarizeFleet, GroupsByDimensionAndCountsLowEfficiencyHours) {
  JobRow a{.id = 1, .cluster = "eos", .gpu_model = "H100"};
  JobRow b{.id = 2, .cluster = "eos", .gpu_model = "A100"};
  JobRow c{.id = 3, .cluster = "rome", .gpu_model = "H100"};
  std::vector<std::pair<JobRow, StoredWindow>> w = {{a, W(kT0, 0.5, 10)},
                                                    {a, W(kT0 + 60'000, 0.1, 10)},
                                                    {b, W(kT0, 0.3, 10, 16)},
                                                    {c, W(kT0, 0.4, 10)}};
  auto [groups, total] = SummarizeFleet(w, {}, {FleetDimension::kCluster}, 0.2);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].cluster, "eos");
  EXPECT_EQ(groups[0].job_count, 2);
  EXPECT_NEAR(groups[0].gpu_hours, (8 + 8 + 16) / 60.0, 1e-12);
  EXPECT_NEAR(groups[0].low_efficiency_gpu_hours, 8 / 60.0, 1e-12);
  EXPECT_NEAR(groups[0].gpu_hours_by_ofu_decile[5], 8 / 60.0, 1e-12);
  EXPECT_EQ(total.job_count, 3);
  auto [only_h100, t2] = SummarizeFleet(w, {.gpu_model = "H100"}, {}, 0.2);
  ASSERT_EQ(only_h100.size(), 1u);
  EXPECT_EQ(only_h100[0].job_count, 2);
}

TEST(SummarizeFleet, GroupsByUserAndWorkloadAndFiltersByUser) {
  JobRow a{.id = 1, .cluster = "eos", .gpu_model = "H100", .team = "vision",
           .workload_fingerprint = "vit/8xH100", .user = "alice"};
  JobRow b{.id = 2, .cluster = "eos", .gpu_model = "H100", .team = "vision",
           .workload_fingerprint = "vit/8xH100", .user = "bob"};
  JobRow c{.id = 3, .cluster = "eos", .gpu_model = "H100", .team = "speech", .user = "alice"};
  std::vector<std::pair<JobRow, StoredWindow>> w = {
      {a, W(kT0, 0.5, 10)}, {b, W(kT0, 0.1, 10)}, {c, W(kT0, 0.4, 10)}};
  auto [by_user, total] = SummarizeFleet(w, {}, {FleetDimension::kUser}, 0.2);
  ASSERT_EQ(by_user.size(), 2u);
  const FleetGroupFigures& alice = by_user[0].user == "alice" ? by_user[0] : by_user[1];
  EXPECT_EQ(alice.user, "alice");
  EXPECT_EQ(alice.job_count, 2);
  EXPECT_TRUE(alice.team.empty());
  auto [by_workload, t2] = SummarizeFleet(w, {}, {FleetDimension::kWorkload}, 0.2);
  ASSERT_EQ(by_workload.size(), 2u);
  for (const FleetGroupFigures& g : by_workload) {
    EXPECT_EQ(g.job_count, g.workload_fingerprint == "vit/8xH100" ? 2 : 1) << g.workload_fingerprint;
  }
  auto [only_bob, t3] = SummarizeFleet(w, {.user = "bob"}, {FleetDimension::kTeam}, 0.2);
  ASSERT_EQ(only_bob.size(), 1u);
  EXPECT_EQ(only_bob[0].team, "vision");
  EXPECT_EQ(t3.job_count, 1);
}

}  // namespace
}  // namespace goodput::ofu
