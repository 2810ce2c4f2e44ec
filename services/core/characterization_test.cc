#include "services/core/characterization.h"

#include <cmath>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace goodput::core {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const GpuSpec& H100() { return **GpuCatalog::BuiltIn().Find("NVIDIA H100 80GB HBM3"); }
const GpuSpec& A100() { return **GpuCatalog::BuiltIn().Find("NVIDIA A100-SXM4-80GB"); }

constexpr int64_t kStart = 1'700'000'000'000;

// A GPU with `values` of tensor activity (also used as GR engine activity) every 10 s.
GpuTelemetrySeries Gpu(std::string id, std::vector<double> values, double clock_mhz = 1830) {
  GpuTelemetrySeries g{std::move(id), {}};
  for (size_t i = 0; i < values.size(); ++i) {
    GpuTelemetrySample s;
    s.timestamp_ms = kStart + static_cast<int64_t>(i) * 10'000;
    s.tensor_active = values[i];
    s.gr_engine_active = values[i];
    s.sm_clock_mhz = clock_mhz;
    g.samples.push_back(s);
  }
  return g;
}

TEST(SpatialImbalance, IsZeroForABalancedJob) {
  std::vector<GpuTelemetrySeries> gpus = {Gpu("a", {0.5, 0.5, 0.5, 0.5, 0.5, 0.5}),
                                          Gpu("b", {0.5, 0.5, 0.5, 0.5, 0.5, 0.5})};
  absl::StatusOr<SpatialImbalance> si =
      ComputeSpatialImbalance(gpus, ActivityCounter::kTensorActive, kStart);
  ASSERT_TRUE(si.ok());
  EXPECT_EQ(si->windows_scored, 1);
  EXPECT_NEAR(*si->si, 0, 1e-12);
}

TEST(SpatialImbalance, FourGpuJobUsingOneGpuIs075) {
  // TC = [6, 0, 0, 0] over one minute: SI = 1 - 6 / (4 x 6). A GPU with no samples at all
  // counts as zero activity.
  std::vector<GpuTelemetrySeries> gpus = {Gpu("a", {1, 1, 1, 1, 1, 1}),
                                          Gpu("b", {0, 0, 0, 0, 0, 0}), Gpu("c", {0, 0, 0}),
                                          GpuTelemetrySeries{"d", {}}};
  absl::StatusOr<SpatialImbalance> si =
      ComputeSpatialImbalance(gpus, ActivityCounter::kTensorActive, kStart);
  ASSERT_TRUE(si.ok());
  EXPECT_DOUBLE_EQ(*si->si, 0.75);
}

TEST(SpatialImbalance, AveragesWindowsAndGuardsMaxZero) {
  // Window 0: TC = [6, 3] -> SI 0.25. Window 1: TC = [0, 0] -> skipped (max = 0).
  // Window 2: TC = [3, 3] -> SI 0. Mean over scored windows: 0.125.
  std::vector<double> a = {1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5};
  std::vector<double> b = {0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0,   0,   0,
                           0,   0,   0,   0.5, 0.5, 0.5, 0.5, 0.5, 0.5};
  absl::StatusOr<SpatialImbalance> si =
      ComputeSpatialImbalance({Gpu("a", a), Gpu("b", b)}, ActivityCounter::kTensorActive, kStart);
  ASSERT_TRUE(si.ok());
  EXPECT_EQ(si->windows_scored, 2);
  EXPECT_EQ(si->windows_all_zero, 1);
  EXPECT_DOUBLE_EQ(*si->si, 0.125);
}

TEST(SpatialImbalance, AllIdleHasNoScoreAndNoGpusIsAnError) {
  absl::StatusOr<SpatialImbalance> si = ComputeSpatialImbalance(
      {Gpu("a", {0, 0}), Gpu("b", {0, 0})}, ActivityCounter::kTensorActive, kStart);
  ASSERT_TRUE(si.ok());
  EXPECT_FALSE(si->si.has_value());
  EXPECT_THAT(
      ComputeSpatialImbalance({}, ActivityCounter::kTensorActive, kStart).status().message(),
      HasSubstr("gpus is empty"));
  EXPECT_THAT(ComputeSpatialImbalance({Gpu("a", {1})}, ActivityCounter::kTensorActive, kStart, 0)
                  .status()
                  .message(),
              HasSubstr("window_ms=0"));
}

TEST(SpatialImbalance, SkipsNaNAndSamplesBeforeTheJob) {
  GpuTelemetrySeries a = Gpu("a", {1, std::nan(""), 1});
  a.samples.push_back({});  // timestamp 0: before the job start
  a.samples.back().tensor_active = 100;
  absl::StatusOr<SpatialImbalance> si =
      ComputeSpatialImbalance({a, Gpu("b", {1, 1, 0})}, ActivityCounter::kTensorActive, kStart);
  ASSERT_TRUE(si.ok());
  EXPECT_DOUBLE_EQ(*si->si, 0);  // TC = [2, 2]
}

TEST(TemporalImbalance, PerGpuAndJobMax) {
  // GPU a: 1 - 2 / (4 x 1) = 0.5; GPU b: constant -> 0; GPU c: all zero -> no score.
  absl::StatusOr<TemporalImbalance> ti =
      ComputeTemporalImbalance({Gpu("a", {1, 0.5, 0.5, 0}), Gpu("b", {0.3, 0.3}), Gpu("c", {0, 0})},
                               ActivityCounter::kTensorActive);
  ASSERT_TRUE(ti.ok());
  ASSERT_EQ(ti->per_gpu.size(), 3u);
  EXPECT_DOUBLE_EQ(*ti->per_gpu[0], 0.5);
  EXPECT_NEAR(*ti->per_gpu[1], 0, 1e-12);
  EXPECT_FALSE(ti->per_gpu[2].has_value());
  EXPECT_DOUBLE_EQ(*ti->ti, 0.5);
  // A single sample is perfectly even.
  EXPECT_DOUBLE_EQ(*ComputeTemporalImbalance({Gpu("a", {0.7})}, ActivityCounter::kTensorActive)->ti,
                   0);
}

TEST(Stragglers, ScoreIsShortfallAgainstTheMedian) {
  absl::StatusOr<std::vector<GpuStraggler>> s =
      ScoreStragglers({{"a", 0.5}, {"b", 0.5}, {"c", 0.3}, {"d", 0.52}}, 0.2);
  ASSERT_TRUE(s.ok());
  // median 0.5: c scores 0.4 (straggler), d scores -0.04.
  EXPECT_DOUBLE_EQ(*(*s)[2].score, 0.4);
  EXPECT_TRUE((*s)[2].straggler);
  EXPECT_NEAR(*(*s)[3].score, -0.04, 1e-12);
  EXPECT_FALSE((*s)[3].straggler);
  EXPECT_FALSE((*s)[0].straggler);
}

TEST(Stragglers, EdgeCases) {
  EXPECT_TRUE(ScoreStragglers({})->empty());
  absl::StatusOr<std::vector<GpuStraggler>> zeros = ScoreStragglers({{"a", 0}, {"b", 0}});
  ASSERT_TRUE(zeros.ok());
  EXPECT_FALSE((*zeros)[0].score.has_value());  // median 0: no score, no division
  EXPECT_THAT(ScoreStragglers({{"a", std::nan("")}}).status().message(),
              HasSubstr("gpu \"a\": ofu_fraction=nan"));
  EXPECT_THAT(ScoreStragglers({{"a", 0.5}}, 0).status().message(), HasSubstr("threshold=0"));
  // A single GPU is its own median.
  EXPECT_DOUBLE_EQ(*(*ScoreStragglers({{"a", 0.5}}))[0].score, 0);
}

TEST(IdleGpus, FindsAllocatedGpusThatNeverWork) {
  std::vector<GpuTelemetrySeries> gpus = {Gpu("a", {0.9, 0.8}), Gpu("b", {0, 0.005}),
                                          GpuTelemetrySeries{"c", {}},
                                          Gpu("d", {std::nan(""), 0.2})};
  EXPECT_THAT(FindIdleGpus(gpus), ElementsAre("b", "c"));
  EXPECT_THAT(FindIdleGpus(gpus, ActivityCounter::kGrEngineActive, 0.85),
              ElementsAre("b", "c", "d"));
}

GpuTelemetrySample RooflineSample(double tensor, double dram) {
  GpuTelemetrySample s;
  s.tensor_active = tensor;
  s.dram_active = dram;
  return s;
}

TEST(Roofline, ClassifiesAgainstTheRidgePoint) {
  // H100 BF16 ridge: 989.4e12 / 3.35e12 ≈ 295 FLOP/byte. TPA 0.6 with DRAM 0.3 is
  // compute-bound; TPA 0.1 with DRAM 0.5 is memory-bound.
  EXPECT_EQ(ClassifyRoofline(H100(), Precision::kBf16, RooflineSample(0.6, 0.3)),
            RooflineClass::kComputeBound);
  EXPECT_EQ(ClassifyRoofline(H100(), Precision::kBf16, RooflineSample(0.1, 0.5)),
            RooflineClass::kMemoryBound);
  EXPECT_EQ(ClassifyRoofline(H100(), Precision::kBf16, RooflineSample(0.5, 0)),
            RooflineClass::kComputeBound);
  EXPECT_EQ(ClassifyRoofline(H100(), Precision::kBf16, RooflineSample(0, 0.005)),
            RooflineClass::kIdle);
  EXPECT_EQ(ClassifyRoofline(H100(), Precision::kBf16, RooflineSample(std::nan(""), 0.5)),
            RooflineClass::kUnknown);
  EXPECT_EQ(ClassifyRoofline(A100(), Precision::kFp8, RooflineSample(0.5, 0.1)),
            RooflineClass::kUnknown);  // A100 has no FP8
  // FP64 work counts towards compute on models with an FP64 rate.
  GpuTelemetrySample fp64 = RooflineSample(0, 0.1);
  fp64.fp64_active = 0.9;
  EXPECT_EQ(ClassifyRoofline(A100(), Precision::kBf16, fp64), RooflineClass::kMemoryBound);
  EXPECT_EQ(RooflineClassName(RooflineClass::kMemoryBound), "memory_bound");
}

TEST(Roofline, JobTakesTheMajorityWithTiesMemoryBound) {
  GpuTelemetrySeries g{"a",
                       {RooflineSample(0.6, 0.1), RooflineSample(0.1, 0.6),
                        RooflineSample(0.1, 0.7), RooflineSample(0, 0)}};
  RooflineSummary r = SummarizeRoofline(H100(), Precision::kBf16, {g});
  EXPECT_EQ(r.job_class, RooflineClass::kMemoryBound);
  EXPECT_EQ(r.compute_bound_samples, 1);
  EXPECT_EQ(r.memory_bound_samples, 2);
  EXPECT_EQ(r.idle_samples, 1);
  g.samples[2] = RooflineSample(0.7, 0.1);
  EXPECT_EQ(SummarizeRoofline(H100(), Precision::kBf16, {g}).job_class,
            RooflineClass::kComputeBound);
  g.samples.pop_back();
  g.samples.pop_back();  // one compute, one memory
  EXPECT_EQ(SummarizeRoofline(H100(), Precision::kBf16, {g}).job_class,
            RooflineClass::kMemoryBound);
  EXPECT_EQ(SummarizeRoofline(H100(), Precision::kBf16, {}).job_class, RooflineClass::kUnknown);
}

TEST(PeakHbm, IsHighestFbUsedOverCapacity) {
  GpuTelemetrySeries a{"a", {{}, {}}};
  a.samples[0].fb_used_mib = 20'480;
  a.samples[1].fb_used_mib = 40'960;
  GpuTelemetrySeries b{"b", {{}}};
  b.samples[0].fb_used_mib = 10'000;
  absl::StatusOr<std::optional<double>> f = PeakHbmFraction(H100(), {a, b});
  ASSERT_TRUE(f.ok());
  EXPECT_DOUBLE_EQ(**f, 0.5);  // 40 GiB of 80 GiB
  EXPECT_FALSE(PeakHbmFraction(H100(), {GpuTelemetrySeries{"x", {{}}}})->has_value());
  GpuSpec no_capacity = H100();
  no_capacity.hbm_capacity_gib = 0;
  EXPECT_THAT(PeakHbmFraction(no_capacity, {a}).status().message(),
              HasSubstr("hbm_capacity_gib=0"));
}

GpuTelemetrySeries EnergySeries(std::string id, std::vector<std::pair<int64_t, double>> points) {
  GpuTelemetrySeries g{std::move(id), {}};
  for (const auto& [t_s, mj] : points) {
    GpuTelemetrySample s;
    s.timestamp_ms = kStart + t_s * 1000;
    s.total_energy_mj = mj;
    g.samples.push_back(s);
  }
  return g;
}

TEST(Energy, IntegratesTheCumulativeCounterAcrossResets) {
  // 700 W for one hour = 0.7 kWh per GPU-hour; a reset at 1800 s restarts the counter.
  GpuTelemetrySeries a = EnergySeries(
      "a", {{0, 5e9}, {900, 5e9 + 630e6}, {1800, 5e9 + 1260e6}, {2700, 630e6}, {3600, 1260e6}});
  // The reading just after the reset counts from 0, so the interval 1800..2700 s contributes
  // 630e6 mJ like the others.
  EnergySummary e = ComputeEnergy({a});
  EXPECT_EQ(e.counter_resets, 1);
  EXPECT_DOUBLE_EQ(e.energy_j, 4 * 630e3);
  EXPECT_DOUBLE_EQ(e.gpu_hours, 1.0);
  EXPECT_DOUBLE_EQ(*e.energy_per_gpu_hour_kwh, 0.7);
  EXPECT_DOUBLE_EQ(*e.mean_power_w, 700);
}

TEST(Energy, SumsGpusAndSkipsNaNAndSingleReadings) {
  GpuTelemetrySeries a = EnergySeries("a", {{3600, 2e9}, {0, 0}});  // unsorted input
  GpuTelemetrySeries b = EnergySeries("b", {{0, 0}, {1800, std::nan("")}, {3600, 1e9}});
  GpuTelemetrySeries c = EnergySeries("c", {{0, 123}});
  EnergySummary e = ComputeEnergy({a, b, c});
  EXPECT_DOUBLE_EQ(e.energy_j, 3e6);
  EXPECT_DOUBLE_EQ(e.gpu_hours, 2.0);
  EXPECT_DOUBLE_EQ(*e.mean_power_w, 3e6 / 7200);
  EnergySummary none = ComputeEnergy({c});
  EXPECT_FALSE(none.energy_per_gpu_hour_kwh.has_value());
  EXPECT_EQ(none.energy_j, 0);
}

TEST(CharacterizeJob, CombinesAllFindings) {
  JobCharacterizationInput in;
  in.job_start_ms = kStart;
  in.gpus = {Gpu("a", {0.6, 0.6, 0.6}), Gpu("b", {0.6, 0.6, 0.6}), Gpu("c", {0.3, 0.3, 0.3}),
             Gpu("d", {0, 0, 0})};
  for (auto& g : in.gpus) {
    for (auto& s : g.samples) {
      s.dram_active = 0.2;
      s.fb_used_mib = 30'000;
    }
  }
  absl::StatusOr<JobCharacterization> c = CharacterizeJob(H100(), in);
  ASSERT_TRUE(c.ok()) << c.status();
  // TC = [1.8, 1.8, 0.9, 0]: SI = 1 - 4.5 / (4 x 1.8) = 0.375.
  EXPECT_NEAR(*c->spatial.si, 0.375, 1e-12);
  EXPECT_NEAR(*c->temporal.ti, 0, 1e-12);
  ASSERT_EQ(c->stragglers.size(), 4u);  // median of [0.6, 0.6, 0.3, 0] is 0.45
  EXPECT_TRUE(c->stragglers[2].straggler);
  EXPECT_TRUE(c->stragglers[3].straggler);
  EXPECT_FALSE(c->stragglers[0].straggler);
  EXPECT_THAT(c->idle_gpu_ids, ElementsAre("d"));
  EXPECT_EQ(c->roofline.job_class, RooflineClass::kComputeBound);
  EXPECT_NEAR(*c->peak_hbm_fraction, 30'000.0 / (80 * 1024), 1e-12);
  EXPECT_THAT(CharacterizeJob(H100(), JobCharacterizationInput{}).status().message(),
              HasSubstr("gpus is empty"));
}

}  // namespace
}  // namespace goodput::core
