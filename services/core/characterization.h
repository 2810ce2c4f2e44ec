// Job characterization from per-GPU telemetry (domain §6): how evenly a job uses its GPUs
// over space and time, which GPUs straggle or sit idle, whether it is compute- or
// memory-bound, how much HBM it needs, and the energy it costs per GPU-hour.
//
//   SI(j, w) = 1 − Σ_g TC(g, w) / (G × max_g TC(g, w))   per 1-minute window, SI(j) = mean
//   TI(j, g) = 1 − Σ_t C(g, t) / (T × max_t C(g, t)),     TI(j) = max over GPUs
//   straggler score(g) = (median_g' OFU(g') − OFU(g)) / median    (> 0: slower than median)
//   roofline: compute-bound if achieved FLOP/s ÷ DRAM bytes/s > ridge (peak ÷ bandwidth)
//
// Values a sample does not carry are NaN. Timestamps are the samples' own (unix epoch ms);
// nothing here reads a clock.
//
//   absl::StatusOr<JobCharacterization> c = CharacterizeJob(h100_spec, input);
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "services/core/gpu_catalog.h"

namespace goodput::core {

inline constexpr double kMissing = std::numeric_limits<double>::quiet_NaN();

// One telemetry sample of one GPU (the DCGM fields characterization uses).
struct GpuTelemetrySample {
  int64_t timestamp_ms = 0;
  double tensor_active = kMissing;     // PIPE_TENSOR_ACTIVE, 0..1
  double fp64_active = kMissing;       // PIPE_FP64_ACTIVE, 0..1
  double sm_active = kMissing;         // SM_ACTIVE, 0..1
  double gr_engine_active = kMissing;  // GR_ENGINE_ACTIVE (GPU utilization), 0..1
  double dram_active = kMissing;       // DRAM_ACTIVE, 0..1
  double sm_clock_mhz = kMissing;      // SM_CLOCK
  double fb_used_mib = kMissing;       // FB_USED, MiB, instantaneous
  double total_energy_mj = kMissing;   // TOTAL_ENERGY_CONSUMPTION, mJ, cumulative, may reset
};

struct GpuTelemetrySeries {
  std::string gpu_id;
  std::vector<GpuTelemetrySample> samples;  // any order
};

// The activity counters SI, TI and idle detection can be computed over.
enum class ActivityCounter { kTensorActive, kFp64Active, kSmActive, kGrEngineActive, kDramActive };

// The counter's value in `sample` (NaN when absent).
double CounterValue(const GpuTelemetrySample& sample, ActivityCounter counter);

struct SpatialImbalance {
  std::optional<double> si;  // mean over scored windows; nullopt if none
  int64_t windows_scored = 0;
  int64_t windows_all_zero = 0;  // windows skipped because max_g TC = 0
};

// SI over windows of `window_ms` (default 1 minute) starting at job_start_ms. G is the number
// of series given (allocated GPUs): a GPU without samples in a window counts as TC = 0.
// INVALID_ARGUMENT if there are no GPUs or window_ms <= 0.
absl::StatusOr<SpatialImbalance> ComputeSpatialImbalance(
    const std::vector<GpuTelemetrySeries>& gpus, ActivityCounter counter, int64_t job_start_ms,
    int64_t window_ms = 60'000);

struct TemporalImbalance {
  std::optional<double> ti;                    // max over GPUs with a score; nullopt if none
  std::vector<std::optional<double>> per_gpu;  // in input order; nullopt: no samples or max 0
};

// TI per GPU over its finite samples, and the job's maximum. INVALID_ARGUMENT with no GPUs.
absl::StatusOr<TemporalImbalance> ComputeTemporalImbalance(
    const std::vector<GpuTelemetrySeries>& gpus, ActivityCounter counter);

struct GpuStraggler {
  std::string gpu_id;
  double ofu_fraction = 0;
  std::optional<double> score;  // nullopt when the median is 0
  bool straggler = false;       // score >= threshold
};

// Straggler scores from per-GPU OFU. INVALID_ARGUMENT for a non-finite or negative OFU
// (names the GPU) or a threshold outside (0, 1]. Empty input gives an empty result.
absl::StatusOr<std::vector<GpuStraggler>> ScoreStragglers(
    const std::vector<std::pair<std::string, double>>& gpu_ofu, double threshold = 0.2);

// GPUs whose `counter` never exceeds `threshold` (or that have no finite sample at all):
// allocated but unused. In input order.
std::vector<std::string> FindIdleGpus(const std::vector<GpuTelemetrySeries>& gpus,
                                      ActivityCounter counter = ActivityCounter::kGrEngineActive,
                                      double threshold = 0.01);

enum class RooflineClass { kUnknown, kIdle, kMemoryBound, kComputeBound };
absl::string_view RooflineClassName(RooflineClass c);  // "unknown", "idle", ...

// Roofline class of one sample. Achieved FLOP/s = tensor_active × dense peak(`precision`)
// (+ fp64_active × FP64 peak where the model has one); bytes/s = dram_active × bandwidth.
// FP32/FP16 CUDA-core pipes are not included: the catalog holds tensor rates. kIdle when
// both activities are <= 0.01, kUnknown when tensor_active or dram_active is missing or the
// model lacks `precision` or a bandwidth.
RooflineClass ClassifyRoofline(const GpuSpec& spec, Precision precision,
                               const GpuTelemetrySample& sample);

struct RooflineSummary {
  RooflineClass job_class = RooflineClass::kUnknown;  // majority of compute/memory samples
  int64_t compute_bound_samples = 0;
  int64_t memory_bound_samples = 0;
  int64_t idle_samples = 0;
  int64_t unknown_samples = 0;
};

// Per-sample classes summed over the job; the majority of compute- vs memory-bound samples
// wins, a tie is memory-bound; kIdle if only idle samples, kUnknown if nothing classified.
RooflineSummary SummarizeRoofline(const GpuSpec& spec, Precision precision,
                                  const std::vector<GpuTelemetrySeries>& gpus);

// Highest FB_USED over all samples ÷ HBM capacity (0..1). nullopt without FB samples;
// INVALID_ARGUMENT if the model has no capacity.
absl::StatusOr<std::optional<double>> PeakHbmFraction(const GpuSpec& spec,
                                                      const std::vector<GpuTelemetrySeries>& gpus);

struct EnergySummary {
  double energy_j = 0;
  double gpu_hours = 0;  // sum over GPUs of first-to-last energy sample span
  int64_t counter_resets = 0;
  std::optional<double> energy_per_gpu_hour_kwh;  // nullopt when gpu_hours == 0
  std::optional<double> mean_power_w;
};

// Energy from the cumulative mJ counter. A decrease is a counter reset (driver reload): the
// energy after it is the new reading (the counter restarted at 0). NaN readings are skipped.
EnergySummary ComputeEnergy(const std::vector<GpuTelemetrySeries>& gpus);

struct JobCharacterizationInput {
  int64_t job_start_ms = 0;
  int64_t window_ms = 60'000;
  Precision precision = Precision::kBf16;  // the roofline's compute peak
  ActivityCounter imbalance_counter = ActivityCounter::kTensorActive;
  ActivityCounter idle_counter = ActivityCounter::kGrEngineActive;
  double idle_threshold = 0.01;
  double straggler_threshold = 0.2;
  std::vector<GpuTelemetrySeries> gpus;  // one per allocated GPU
};

struct JobCharacterization {
  SpatialImbalance spatial;
  TemporalImbalance temporal;
  std::vector<GpuStraggler> stragglers;  // GPUs with OFU samples, in input order
  std::vector<std::string> idle_gpu_ids;
  RooflineSummary roofline;
  std::optional<double> peak_hbm_fraction;
  EnergySummary energy;
};

// All of the above for one job. Per-GPU OFU for straggler scores is the mean of eq. 1 over the
// GPU's samples with finite tensor_active and sm_clock_mhz. INVALID_ARGUMENT with no GPUs.
absl::StatusOr<JobCharacterization> CharacterizeJob(const GpuSpec& spec,
                                                    const JobCharacterizationInput& input);

}  // namespace goodput::core
