#include "tools/fleetsim/fleet_sim.h"

#include <cmath>
#include <sstream>

#include "gtest/gtest.h"
#include "tools/fleetsim/stream_writer.h"

namespace goodput::sim {
namespace {

class Collect : public FleetSink {
 public:
  void OnJobStart(const JobTruth&) override { ++jobs_started; }
  void OnSamples(const JobTruth& job, int64_t, int64_t,
                 const std::vector<GpuSample>& samples) override {
    for (const GpuSample& s : samples) {
      ++samples_seen;
      checksum += s.tensor_active * 1000 + s.sm_clock_mhz;
      // Loaded: the job computes at its steady level (not ramping, not in a dip).
      if (job.gpu_model == "NVIDIA H100 80GB HBM3" && s.true_ofu > 0.8 * job.steady_ofu &&
          s.true_ofu < 1.2 * job.steady_ofu) {
        ++loaded;
        in_range += (s.sm_clock_mhz >= 1200 && s.sm_clock_mhz <= 1560) ? 1 : 0;
        min_loaded_clock = std::min(min_loaded_clock, s.sm_clock_mhz);
        max_loaded_clock = std::max(max_loaded_clock, s.sm_clock_mhz);
      }
      const double measured = s.tensor_active * s.sm_clock_mhz / job.spec->tensor_max_clock_mhz;
      err_sum += std::abs(measured - s.true_ofu);
    }
  }
  void OnMfuReport(const JobTruth&, const MfuReport& m) override { mfu_sum += m.mfu; }
  void OnJobEnd(const JobTruth&) override { ++jobs_ended; }

  int jobs_started = 0, jobs_ended = 0;
  int64_t samples_seen = 0;
  double checksum = 0, mfu_sum = 0, err_sum = 0;
  double min_loaded_clock = 1e9, max_loaded_clock = 0;
  int64_t loaded = 0, in_range = 0;
};

Collect RunFleet(const FleetConfig& config) {
  auto sim = FleetSimulator::Create(config);
  EXPECT_TRUE(sim.ok()) << sim.status();
  Collect c;
  while ((*sim)->Step(c)) {
  }
  return c;
}

TEST(FleetSim, SameSeedGivesTheSameFleet) {
  Collect a = RunFleet(SmallFleetConfig(5));
  Collect b = RunFleet(SmallFleetConfig(5));
  Collect c = RunFleet(SmallFleetConfig(6));
  EXPECT_EQ(a.samples_seen, b.samples_seen);
  EXPECT_DOUBLE_EQ(a.checksum, b.checksum);
  EXPECT_DOUBLE_EQ(a.mfu_sum, b.mfu_sum);
  EXPECT_NE(a.checksum, c.checksum);
  EXPECT_EQ(a.jobs_started, a.jobs_ended);
}

TEST(FleetSim, H100ClockWandersInItsLoadedRangeAndOfuTracksTruth) {
  FleetConfig config = SmallFleetConfig(3);
  config.models = {{"NVIDIA H100 80GB HBM3", 1, 700, 70, true}};
  Collect c = RunFleet(config);
  ASSERT_GT(c.loaded, 1000);
  EXPECT_GE(static_cast<double>(c.in_range) / static_cast<double>(c.loaded), 0.97);
  EXPECT_GT(c.max_loaded_clock - c.min_loaded_clock, 150);
  // Per-sample OFU error from the point-sampled clock: a few percent of OFU at most.
  EXPECT_LT(c.err_sum / static_cast<double>(c.samples_seen), 0.01);
}

TEST(FleetSim, UnknownGpuModelIsNotFound) {
  FleetConfig config = SmallFleetConfig(1);
  config.models = {{"NVIDIA Imaginary 9000", 1, 700, 70, true}};
  auto sim = FleetSimulator::Create(config);
  ASSERT_FALSE(sim.ok());
  EXPECT_EQ(sim.status().code(), absl::StatusCode::kNotFound);
}

TEST(FleetSim, PrecisionSwitchMovesOfuByAtMostThePeakRatio) {
  auto catalog_spec = core::GpuCatalog::BuiltIn().Find("NVIDIA H100 80GB HBM3");
  ASSERT_TRUE(catalog_spec.ok());
  const core::GpuSpec& spec = **catalog_spec;
  EXPECT_NEAR(EffectivePeakTflops(spec, 0.5), 1319.2, 0.1);
  JobTruth job;
  job.spec = &spec;
  job.start_s = 0;
  job.end_s = 36000;
  job.steady_ofu = 0.45;
  job.precision = {{0, 0.0, EffectivePeakTflops(spec, 0.0)},
                   {10000, 0.8, EffectivePeakTflops(spec, 0.8)}};
  const double before = JobLevelAt(job, 5000);
  const double after = JobLevelAt(job, 20000);
  const double q = job.precision[1].effective_peak_tflops / job.precision[0].effective_peak_tflops;
  EXPECT_LT(after, before);      // faster mix: the tensor pipe idles more
  EXPECT_LE(before / after, q);  // by no more than the peak ratio
}

TEST(FleetSim, WarmupCheckpointsAndDropsShapeTheJobLevel) {
  JobTruth job;
  job.start_s = 0;
  job.end_s = 36000;
  job.steady_ofu = 0.5;
  job.warmup_s = 600;
  job.checkpoint_period_s = 1800;
  job.checkpoint_s = 120;
  job.checkpoint_phase_s = 0;
  job.drops = {{7200, 9000, 2.5}};
  job.precision = {{0, 0, 989.4}};
  EXPECT_LT(JobLevelAt(job, 60), 0.1);
  EXPECT_NEAR(JobLevelAt(job, 1000), 0.5, 1e-9);
  EXPECT_LT(JobLevelAt(job, 1800 + 30), 0.05);  // checkpoint
  EXPECT_NEAR(JobLevelAt(job, 8000), 0.2, 1e-9);
  EXPECT_NEAR(JobLevelAt(job, 9500), 0.5, 1e-9);
}

TEST(FleetSim, StreamsJsonLinesWithLabelsAndSamples) {
  FleetConfig config = SmallFleetConfig(2);
  config.workloads = 1;
  auto sim = FleetSimulator::Create(config);
  ASSERT_TRUE(sim.ok());
  std::ostringstream out;
  StreamWriter writer(out, StreamFormat::kJsonLines);
  for (int i = 0; i < 3 && (*sim)->Step(writer); ++i) {
  }
  const std::string text = out.str();
  EXPECT_NE(text.find("{\"type\":\"job_start\""), std::string::npos);
  EXPECT_NE(text.find("\"miscount\":"), std::string::npos);
  EXPECT_NE(text.find("{\"type\":\"sample\""), std::string::npos);
  EXPECT_NE(text.find("\"sm_clock_mhz\":"), std::string::npos);
  EXPECT_GT(writer.records(), 10);
}

}  // namespace
}  // namespace goodput::sim
