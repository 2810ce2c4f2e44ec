#include "services/core/ofu.h"

#include <cmath>
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace goodput::core {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const GpuSpec& H100() { return **GpuCatalog::BuiltIn().Find("NVIDIA H100 80GB HBM3"); }

constexpr int64_t kT0 = 1'700'000'000'000;  // window start, unix ms

JobOfuWindowInput Input(int64_t start_ms, int64_t end_ms, int allocated,
                        std::vector<GpuOfuSeries> gpus) {
  JobOfuWindowInput in;
  in.window_start_ms = start_ms;
  in.window_end_ms = end_ms;
  in.allocated_gpu_count = allocated;
  in.gpus = std::move(gpus);
  return in;
}

GpuOfuSeries Series(std::string id, std::vector<OfuSample> samples) {
  return GpuOfuSeries{std::move(id), std::move(samples)};
}

// Samples every `step_ms` from kT0 over `duration_ms` with constant values.
std::vector<OfuSample> Constant(double tpa, double clock_mhz, int64_t step_ms,
                                int64_t duration_ms) {
  std::vector<OfuSample> out;
  for (int64_t t = kT0 + step_ms; t <= kT0 + duration_ms - 1; t += step_ms) {
    out.push_back({t, tpa, clock_mhz});
  }
  return out;
}

TEST(SampleOfu, IsEq1WithTheTensorClock) {
  EXPECT_DOUBLE_EQ(*SampleOfu(0.5, 1830, 1830), 0.5);
  EXPECT_DOUBLE_EQ(*SampleOfu(0.6, 1500, 1830), 0.6 * 1500 / 1830);
  // Dividing by the SM boost clock (1980) instead would bias OFU ~8% low.
  EXPECT_NEAR(*SampleOfu(1, 1830, 1980) / *SampleOfu(1, 1830, 1830), 1830.0 / 1980.0, 1e-12);
  EXPECT_DOUBLE_EQ(*SampleOfu(0, 0, 1830), 0);
}

TEST(SampleOfu, RefusesInvalidInputNamingTheField) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THAT(SampleOfu(1.7, 1500, 1830).status().message(), HasSubstr("tensor_active=1.7"));
  EXPECT_THAT(SampleOfu(-0.1, 1500, 1830).status().message(), HasSubstr("tensor_active=-0.1"));
  EXPECT_THAT(SampleOfu(nan, 1500, 1830).status().message(), HasSubstr("tensor_active=nan"));
  EXPECT_THAT(SampleOfu(0.5, -1, 1830).status().message(), HasSubstr("sm_clock_mhz=-1"));
  EXPECT_THAT(SampleOfu(0.5, nan, 1830).status().message(), HasSubstr("sm_clock_mhz"));
  // max = 0 is refused rather than dividing by zero.
  absl::StatusOr<double> zero_max = SampleOfu(0.5, 1500, 0);
  EXPECT_EQ(zero_max.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(zero_max.status().message(), HasSubstr("tensor_max_clock_mhz=0"));
}

TEST(OfuWindow, JobOfuIsMeanOverGpusAndSamples) {
  // GPU a: two samples (0.5, 0.7 at 1830 MHz); GPU b: one sample 0.3. Mean over all three
  // samples is 0.5, not the mean of the GPU means (0.45).
  JobOfuWindowInput in;
  in.window_start_ms = kT0;
  in.window_end_ms = kT0 + 60'000;
  in.allocated_gpu_count = 2;
  in.gpus = {Series("a", {{kT0 + 10'000, 0.5, 1830}, {kT0 + 20'000, 0.7, 1830}}),
             Series("b", {{kT0 + 10'000, 0.3, 1830}})};
  in.options.min_gap_s = 1000;  // the quiet end of the window is not the point here
  absl::StatusOr<JobOfuWindow> w = ComputeJobOfuWindow(H100(), in);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->stats.sample_count, 3);
  EXPECT_DOUBLE_EQ(*w->stats.mean_ofu, 0.5);
  EXPECT_NEAR(w->stats.stddev_ofu, 0.2, 1e-12);
  // t(2) = 4.303; half width = 4.303 * 0.2 / sqrt(3).
  EXPECT_NEAR(*w->stats.ci95_half_width, 4.303 * 0.2 / std::sqrt(3.0), 1e-12);
  EXPECT_EQ(w->gpus_reporting, 2);
  EXPECT_DOUBLE_EQ(w->gpu_coverage, 1.0);
  EXPECT_DOUBLE_EQ(*w->min_gpu_ofu, 0.3);
  EXPECT_DOUBLE_EQ(*w->max_gpu_ofu, 0.6);
  EXPECT_DOUBLE_EQ(*w->median_gpu_ofu, 0.45);
  EXPECT_EQ(w->flags, kOfuFlagNone);
  ASSERT_EQ(w->per_gpu.size(), 2u);
  EXPECT_DOUBLE_EQ(*w->per_gpu[0].stats.mean_ofu, 0.6);
}

TEST(OfuWindow, Eq11InPercentOnH100) {
  // mean(PIPE_TENSOR_ACTIVE x SM_CLOCK / 1830 x 100): TPA 0.4 at 1464 MHz is 32%.
  JobOfuWindowInput in =
      Input(kT0, kT0 + 60'000, 1, {Series("g", Constant(0.4, 1464, 5'000, 60'000))});
  absl::StatusOr<JobOfuWindow> w = ComputeJobOfuWindow(H100(), in);
  ASSERT_TRUE(w.ok());
  EXPECT_NEAR(*w->stats.mean_ofu * 100, 32.0, 1e-12);
  EXPECT_EQ(w->stats.sample_count, 11);
  EXPECT_NEAR(*w->stats.ci95_half_width, 0, 1e-12);
}

// Half width of the job CI, in percentage points, for a 256-GPU job at TPA 0.6 whose SM clock
// wanders uniformly over 1200..1560 MHz (H100 under load), over a 5-minute window.
double ClockNoiseCiPp(int64_t scrape_ms) {
  JobOfuWindowInput in;
  in.window_start_ms = kT0;
  in.window_end_ms = kT0 + 300'000;
  in.allocated_gpu_count = 256;
  uint64_t state = 42;
  for (int g = 0; g < 256; ++g) {
    std::vector<OfuSample> s;
    for (int64_t t = scrape_ms; t <= 300'000; t += scrape_ms) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;  // LCG
      const double u = static_cast<double>(state >> 11) / 9007199254740992.0;
      s.push_back({kT0 + t - 1, 0.6, 1200 + 360 * u});
    }
    in.gpus.push_back(Series("gpu" + std::to_string(g), s));
  }
  absl::StatusOr<JobOfuWindow> w = ComputeJobOfuWindow(H100(), in);
  EXPECT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->flags, kOfuFlagNone);  // 30 s spacing is still fine-grained enough
  return *w->stats.ci95_half_width * 100;
}

TEST(OfuWindow, ClockNoiseCiIsNarrowOverMinutes) {
  // Domain §3: below +-0.22 pp at 30 s scrapes, +-0.07 pp at 5 s.
  EXPECT_LT(ClockNoiseCiPp(30'000), 0.22);
  EXPECT_LT(ClockNoiseCiPp(5'000), 0.07);
  EXPECT_GT(ClockNoiseCiPp(30'000), ClockNoiseCiPp(5'000));
}

TEST(OfuWindow, CoverageCountsGpusReportingOverAllocated) {
  JobOfuWindowInput in = Input(kT0, kT0 + 60'000, 4,
                               {Series("a", Constant(0.5, 1830, 10'000, 60'000)), Series("b", {})});
  absl::StatusOr<JobOfuWindow> w = ComputeJobOfuWindow(H100(), in);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->gpus_reporting, 1);
  EXPECT_EQ(w->gpus_allocated, 4);
  EXPECT_DOUBLE_EQ(w->gpu_coverage, 0.25);
  EXPECT_TRUE(w->flags & kOfuFlagPartialCoverage);
  EXPECT_FALSE(w->flags & kOfuFlagNoSamples);
  EXPECT_TRUE(w->per_gpu[1].flags & kOfuFlagNoSamples);
}

TEST(OfuWindow, NoSamplesAtAllIsFlaggedNotAnError) {
  JobOfuWindowInput in = Input(kT0, kT0 + 60'000, 8, {});
  absl::StatusOr<JobOfuWindow> w = ComputeJobOfuWindow(H100(), in);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->stats.sample_count, 0);
  EXPECT_FALSE(w->stats.mean_ofu.has_value());
  EXPECT_FALSE(w->min_gpu_ofu.has_value());
  EXPECT_DOUBLE_EQ(w->gpu_coverage, 0);
  EXPECT_TRUE(w->flags & kOfuFlagNoSamples);
}

TEST(OfuWindow, ZeroAllocatedGpusIsInvalid) {
  JobOfuWindowInput in = Input(kT0, kT0 + 60'000, 0, {});
  absl::StatusOr<JobOfuWindow> w = ComputeJobOfuWindow(H100(), in);
  EXPECT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(w.status().message(), HasSubstr("allocated_gpu_count=0"));
}

TEST(OfuWindow, MoreSeriesThanAllocatedOrDuplicateGpuIsInvalid) {
  JobOfuWindowInput in = Input(kT0, kT0 + 60'000, 1, {Series("a", {}), Series("b", {})});
  EXPECT_THAT(ComputeJobOfuWindow(H100(), in).status().message(),
              HasSubstr("allocated_gpu_count=1"));
  in.allocated_gpu_count = 2;
  in.gpus[1].gpu_id = "a";
  EXPECT_THAT(ComputeJobOfuWindow(H100(), in).status().message(), HasSubstr("gpu_id=\"a\""));
}

TEST(OfuWindow, EmptyWindowOrZeroTensorClockIsInvalid) {
  GpuOfuSeries s = Series("a", {{kT0, 0.5, 1500}});
  EXPECT_EQ(ComputeGpuOfuWindow(H100(), s, kT0, kT0).status().code(),
            absl::StatusCode::kInvalidArgument);
  GpuSpec broken = H100();
  broken.tensor_max_clock_mhz = 0;
  EXPECT_THAT(ComputeGpuOfuWindow(broken, s, kT0, kT0 + 1000).status().message(),
              HasSubstr("tensor_max_clock_mhz=0"));
}

TEST(OfuWindow, SingleSampleHasMeanButNoInterval) {
  GpuOfuSeries s = Series("a", {{kT0 + 30'000, 0.5, 1464}});
  absl::StatusOr<GpuOfuWindow> w = ComputeGpuOfuWindow(H100(), s, kT0, kT0 + 60'000);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->stats.sample_count, 1);
  EXPECT_DOUBLE_EQ(*w->stats.mean_ofu, 0.4);
  EXPECT_EQ(w->stats.stddev_ofu, 0);
  EXPECT_FALSE(w->stats.ci95_half_width.has_value());
}

TEST(OfuWindow, IgnoresSamplesOutsideTheWindow) {
  GpuOfuSeries s = Series("a", {{kT0 - 1, 1.0, 1830}, {kT0, 0.5, 1830}, {kT0 + 60'000, 1.0, 1830}});
  absl::StatusOr<GpuOfuWindow> w = ComputeGpuOfuWindow(H100(), s, kT0, kT0 + 60'000);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->stats.sample_count, 1);
  EXPECT_DOUBLE_EQ(*w->stats.mean_ofu, 0.5);
}

TEST(OfuWindow, FlagsCoarseSamplingAsAverageOfAverages) {
  GpuOfuSeries s = Series("a", Constant(0.5, 1830, 60'000, 300'000));
  OfuWindowOptions options;
  options.gap_threshold_s = 120;
  absl::StatusOr<GpuOfuWindow> w = ComputeGpuOfuWindow(H100(), s, kT0, kT0 + 300'000, options);
  ASSERT_TRUE(w.ok());
  EXPECT_TRUE(w->flags & kOfuFlagCoarseSampling);
  EXPECT_FALSE(w->flags & kOfuFlagGap);
  EXPECT_THAT(OfuQualityFlagNames(w->flags), ElementsAre("coarse_sampling"));
}

TEST(OfuWindow, ExcludesAndFlagsTensorActiveOutOfRange) {
  GpuOfuSeries s = Series("a", {{kT0 + 1000, 1.7, 1500}, {kT0 + 2000, 0.5, 1830}});
  absl::StatusOr<GpuOfuWindow> w = ComputeGpuOfuWindow(H100(), s, kT0, kT0 + 5000);
  ASSERT_TRUE(w.ok());
  EXPECT_TRUE(w->flags & kOfuFlagTensorActiveOutOfRange);
  EXPECT_EQ(w->excluded_sample_count, 1);
  EXPECT_DOUBLE_EQ(*w->stats.mean_ofu, 0.5);
}

TEST(OfuWindow, ExcludesAndFlagsNaNAndNegativeClock) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  GpuOfuSeries s = Series("a", {{kT0 + 1000, nan, 1500},
                                {kT0 + 2000, 0.5, -5},
                                {kT0 + 3000, 0.5, std::numeric_limits<double>::infinity()},
                                {kT0 + 4000, 0.25, 1830}});
  absl::StatusOr<GpuOfuWindow> w = ComputeGpuOfuWindow(H100(), s, kT0, kT0 + 5000);
  ASSERT_TRUE(w.ok());
  EXPECT_TRUE(w->flags & kOfuFlagInvalidValue);
  EXPECT_EQ(w->excluded_sample_count, 3);
  EXPECT_EQ(w->stats.sample_count, 1);
  EXPECT_DOUBLE_EQ(*w->stats.mean_ofu, 0.25);
}

TEST(OfuWindow, AllNaNIsNoSamples) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  GpuOfuSeries s = Series("a", {{kT0 + 1000, nan, nan}});
  absl::StatusOr<GpuOfuWindow> w = ComputeGpuOfuWindow(H100(), s, kT0, kT0 + 5000);
  ASSERT_TRUE(w.ok());
  EXPECT_TRUE(w->flags & kOfuFlagNoSamples);
  EXPECT_FALSE(w->stats.mean_ofu.has_value());
}

TEST(OfuWindow, FlagsSmClockAboveBoostButKeepsTheSample) {
  GpuOfuSeries s = Series("a", {{kT0 + 1000, 0.5, 2100}});
  absl::StatusOr<GpuOfuWindow> w = ComputeGpuOfuWindow(H100(), s, kT0, kT0 + 5000);
  ASSERT_TRUE(w.ok());
  EXPECT_TRUE(w->flags & kOfuFlagSmClockAboveBoost);
  EXPECT_EQ(w->stats.sample_count, 1);
  // 1980 (the boost clock itself) is not flagged.
  s.samples[0].sm_clock_mhz = 1980;
  EXPECT_FALSE(ComputeGpuOfuWindow(H100(), s, kT0, kT0 + 5000)->flags & kOfuFlagSmClockAboveBoost);
}

TEST(OfuWindow, FlagsGapsInsideAndAtTheEdges) {
  OfuWindowOptions options;  // gap threshold 90 s
  // Samples every 10 s except a 100 s hole.
  std::vector<OfuSample> samples;
  for (int64_t t = 10'000; t <= 100'000; t += 10'000) samples.push_back({kT0 + t, 0.5, 1830});
  for (int64_t t = 200'000; t < 300'000; t += 10'000) samples.push_back({kT0 + t, 0.5, 1830});
  absl::StatusOr<GpuOfuWindow> w =
      ComputeGpuOfuWindow(H100(), Series("a", samples), kT0, kT0 + 300'000, options);
  ASSERT_TRUE(w.ok());
  EXPECT_TRUE(w->flags & kOfuFlagGap);
  EXPECT_FALSE(w->flags & kOfuFlagCoarseSampling);  // median spacing is 10 s

  // Telemetry stopping 100 s before the window end is a trailing gap.
  std::vector<OfuSample> early(samples.begin(), samples.begin() + 10);
  w = ComputeGpuOfuWindow(H100(), Series("a", early), kT0, kT0 + 200'001, options);
  EXPECT_TRUE(w->flags & kOfuFlagGap);
  // No gap when the samples cover the window.
  w = ComputeGpuOfuWindow(H100(), Series("a", early), kT0, kT0 + 100'001, options);
  EXPECT_FALSE(w->flags & kOfuFlagGap);
}

// A GPU with samples every `step_ms` before kT0 (the newest at kT0 - step_ms).
SamplingContext EveryBefore(int64_t step_ms) {
  SamplingContext c;
  for (int i = 1; i <= 10; ++i) c.earlier_ms.push_back(kT0 - i * step_ms);
  return c;
}

TEST(OfuWindow, OneSamplePerWindowAtAMinuteScrapeIsCoarseAcrossWindows) {
  // A 60 s scrape and 60 s windows: each window holds one sample, so only the spacing to the
  // previous window's sample shows the interval.
  GpuOfuSeries s = Series("a", {{kT0 + 30'000, 0.5, 1830}});
  EXPECT_FALSE(ComputeGpuOfuWindow(H100(), s, kT0, kT0 + 60'000)->flags & kOfuFlagCoarseSampling);
  s.sampling.earlier_ms = {kT0 - 30'000};
  absl::StatusOr<GpuOfuWindow> w = ComputeGpuOfuWindow(H100(), s, kT0, kT0 + 60'000);
  ASSERT_TRUE(w.ok());
  EXPECT_THAT(OfuQualityFlagNames(w->flags), ElementsAre("coarse_sampling"));

  // A 30 s scrape landing a few milliseconds late is fine.
  s.samples = {{kT0 + 10'004, 0.5, 1830}, {kT0 + 40'007, 0.5, 1830}};
  s.sampling.earlier_ms = {kT0 - 19'998, kT0 - 50'000};
  EXPECT_EQ(ComputeGpuOfuWindow(H100(), s, kT0, kT0 + 60'000)->flags, kOfuFlagNone);
}

TEST(OfuWindow, UnusableSamplesGiveNoOfuButTheirTimesAreNotAGap) {
  // Sampled every 10 s before the window; in it, profiling is paused (tensor activity
  // missing) or stuck: the caller marks those samples unusable.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  GpuOfuSeries s = Series("a", {});
  s.sampling = EveryBefore(10'000);
  for (int64_t t = 0; t < 120'000; t += 10'000) {
    s.samples.push_back({.timestamp_ms = kT0 + t,
                         .tensor_active = t < 60'000 ? nan : 0.0,
                         .sm_clock_mhz = 1980,
                         .counters_usable = false});
  }
  absl::StatusOr<GpuOfuWindow> w = ComputeGpuOfuWindow(H100(), s, kT0, kT0 + 120'000);
  ASSERT_TRUE(w.ok());
  EXPECT_FALSE(w->stats.mean_ofu.has_value());
  EXPECT_EQ(w->excluded_sample_count, 12);
  // No OFU, but the GPU did report every 10 s: neither silent nor invalid.
  EXPECT_THAT(OfuQualityFlagNames(w->flags), ElementsAre("no_samples"));

  // Usable samples next to them give the OFU alone.
  s.samples.push_back({kT0 + 125'000, 0.5, 1830});
  w = ComputeGpuOfuWindow(H100(), s, kT0, kT0 + 130'000);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->stats.sample_count, 1);
  EXPECT_NEAR(*w->stats.mean_ofu, 0.5, 1e-12);
}

TEST(OfuWindow, FlagsAGapAgainstTheGpusOwnIntervalAcrossWindows) {
  // Sampled every 10 s until kT0 - 10 s, silent until kT0 + 600 s.
  GpuOfuSeries silent = Series("a", {});
  silent.sampling = EveryBefore(10'000);
  silent.sampling.next_ms = kT0 + 600'000;
  absl::StatusOr<GpuOfuWindow> w = ComputeGpuOfuWindow(H100(), silent, kT0, kT0 + 60'000);
  ASSERT_TRUE(w.ok());
  EXPECT_THAT(OfuQualityFlagNames(w->flags), ElementsAre("gap", "no_samples"));

  // The window where it comes back.
  GpuOfuSeries back = Series("a", {{kT0 + 10'000, 0.5, 1830}, {kT0 + 20'000, 0.5, 1830}});
  back.sampling.earlier_ms = {kT0 - 600'000, kT0 - 610'000, kT0 - 620'000};
  w = ComputeGpuOfuWindow(H100(), back, kT0, kT0 + 60'000);
  EXPECT_TRUE(w->flags & kOfuFlagGap);
  EXPECT_FALSE(w->flags & kOfuFlagCoarseSampling);  // still a 10 s sampler

  // 40 s of silence is four intervals: a gap; 25 s is not.
  GpuOfuSeries short_silence = Series("a", {{kT0 + 15'000, 0.5, 1830}});
  short_silence.sampling = EveryBefore(10'000);
  EXPECT_FALSE(ComputeGpuOfuWindow(H100(), short_silence, kT0, kT0 + 30'000)->flags & kOfuFlagGap);
  short_silence.samples[0].timestamp_ms = kT0 + 30'000;
  EXPECT_TRUE(ComputeGpuOfuWindow(H100(), short_silence, kT0, kT0 + 60'000)->flags & kOfuFlagGap);
}

TEST(OfuWindow, GapThresholdHasAFloorAndAFallback) {
  // Sampled every second: 20 s of silence is below the 30 s floor.
  GpuOfuSeries s = Series("a", {{kT0 + 19'000, 0.5, 1830}});
  s.sampling = EveryBefore(1'000);
  s.sampling.known_until_ms = kT0 + 19'000;
  EXPECT_FALSE(ComputeGpuOfuWindow(H100(), s, kT0, kT0 + 60'000)->flags & kOfuFlagGap);
  s.samples[0].timestamp_ms = kT0 + 40'000;
  s.sampling.known_until_ms = kT0 + 40'000;
  EXPECT_TRUE(ComputeGpuOfuWindow(H100(), s, kT0, kT0 + 60'000)->flags & kOfuFlagGap);
  // One earlier sample: no interval yet, the 90 s fallback applies.
  s.sampling.earlier_ms = {kT0 - 40'000};
  EXPECT_FALSE(ComputeGpuOfuWindow(H100(), s, kT0, kT0 + 60'000)->flags & kOfuFlagGap);
  s.sampling.earlier_ms = {kT0 - 60'000};
  EXPECT_TRUE(ComputeGpuOfuWindow(H100(), s, kT0, kT0 + 60'000)->flags & kOfuFlagGap);
}

TEST(OfuWindow, SilenceAfterTheJobsLastSampleIsNotAGap) {
  GpuOfuSeries s = Series("a", {{kT0 + 5'000, 0.5, 1830}});
  s.sampling = EveryBefore(5'000);
  // Judged to the window end, 55 s of silence at 5 s sampling is a gap ...
  EXPECT_TRUE(ComputeGpuOfuWindow(H100(), s, kT0, kT0 + 60'000)->flags & kOfuFlagGap);
  // ... but the job's telemetry ended with this sample.
  s.sampling.known_until_ms = kT0 + 5'000;
  EXPECT_FALSE(ComputeGpuOfuWindow(H100(), s, kT0, kT0 + 60'000)->flags & kOfuFlagGap);
}

TEST(OfuWindow, TheNextSampleEndsASilence) {
  GpuOfuSeries s = Series("a", Constant(0.5, 1830, 5'000, 60'000));  // last at kT0 + 55 s
  s.sampling = EveryBefore(5'000);
  s.sampling.known_until_ms = kT0 + 600'000;  // other GPUs kept reporting
  EXPECT_TRUE(ComputeGpuOfuWindow(H100(), s, kT0, kT0 + 60'000)->flags & kOfuFlagGap);
  s.sampling.next_ms = kT0 + 61'000;
  EXPECT_EQ(ComputeGpuOfuWindow(H100(), s, kT0, kT0 + 60'000)->flags, kOfuFlagNone);
}

TEST(OfuWindow, DropsAndFlagsDuplicateTimestampsKeepingTheFirst) {
  GpuOfuSeries s =
      Series("a", {{kT0 + 2000, 0.5, 1830}, {kT0 + 1000, 0.1, 1830}, {kT0 + 1000, 0.9, 1830}});
  absl::StatusOr<GpuOfuWindow> w = ComputeGpuOfuWindow(H100(), s, kT0, kT0 + 5000);
  ASSERT_TRUE(w.ok());
  EXPECT_TRUE(w->flags & kOfuFlagDuplicateTimestamp);
  EXPECT_EQ(w->excluded_sample_count, 1);
  EXPECT_EQ(w->stats.sample_count, 2);
  EXPECT_DOUBLE_EQ(*w->stats.mean_ofu, 0.3);  // (0.1 + 0.5) / 2, unsorted input handled
}

TEST(OfuStats, MergeEqualsPooledComputation) {
  GpuOfuSeries all = Series("a", {});
  for (int i = 0; i < 50; ++i) {
    all.samples.push_back({kT0 + i * 1000 + 1, 0.01 * i, 1000.0 + 7 * i});
  }
  GpuOfuSeries first = Series("a", {all.samples.begin(), all.samples.begin() + 17});
  GpuOfuSeries second = Series("a", {all.samples.begin() + 17, all.samples.end()});
  const GpuSpec& h100 = H100();
  OfuStats pooled = ComputeGpuOfuWindow(h100, all, kT0, kT0 + 60'000)->stats;
  OfuStats merged = MergeOfuStats(ComputeGpuOfuWindow(h100, first, kT0, kT0 + 60'000)->stats,
                                  ComputeGpuOfuWindow(h100, second, kT0, kT0 + 60'000)->stats);
  EXPECT_EQ(merged.sample_count, 50);
  EXPECT_NEAR(*merged.mean_ofu, *pooled.mean_ofu, 1e-14);
  EXPECT_NEAR(merged.stddev_ofu, pooled.stddev_ofu, 1e-14);
  EXPECT_NEAR(*merged.ci95_half_width, *pooled.ci95_half_width, 1e-14);
  EXPECT_EQ(MergeOfuStats(OfuStats{}, pooled).sample_count, 50);
}

TEST(StudentT975, MatchesTablesAndTendsToNormal) {
  EXPECT_DOUBLE_EQ(StudentT975(1), 12.706);
  EXPECT_DOUBLE_EQ(StudentT975(30), 2.042);
  EXPECT_NEAR(StudentT975(40), 2.021, 1e-3);
  EXPECT_NEAR(StudentT975(120), 1.980, 1e-3);
  EXPECT_NEAR(StudentT975(1'000'000), 1.96, 1e-3);
}

}  // namespace
}  // namespace goodput::core
