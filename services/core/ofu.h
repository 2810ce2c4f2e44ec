// OFU (Overall FLOP Utilization) from hardware counters, per sample, per GPU window and per
// job window.
//
// Per sample (domain eq. 1):  OFU = TPA x f_SM / f_max, where TPA is DCGM's tensor-pipe
// activity (0..1, hardware-averaged over the collection interval), f_SM the SM clock point
// sample in MHz, and f_max the model's tensor-core max clock (GpuSpec::tensor_max_clock_mhz,
// never DCGM_FI_DEV_MAX_SM_CLOCK). OFU is a fraction 0..1; multiply by 100 for percent.
//
// A window aggregates the samples of every GPU of a job whose timestamps fall in
// [window_start_ms, window_end_ms): the job OFU is the mean over all GPUs x samples (eq. 11),
// reported with a 95% confidence interval, the sample count, GPU coverage (GPUs reporting /
// GPUs allocated) and data-quality flags. Inputs are plain structs with their own
// timestamps (unix epoch milliseconds); nothing here reads a clock.
//
//   JobOfuWindowInput in;
//   in.window_start_ms = t0; in.window_end_ms = t0 + 60000; in.allocated_gpu_count = 8;
//   in.gpus = series;
//   absl::StatusOr<JobOfuWindow> w = ComputeJobOfuWindow(*h100_spec, in);
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "services/core/gpu_catalog.h"

namespace goodput::core {

// One telemetry sample of one GPU: the two counters OFU needs.
struct OfuSample {
  int64_t timestamp_ms = 0;  // the sample's own time, unix epoch ms
  double tensor_active = 0;  // DCGM_FI_PROF_PIPE_TENSOR_ACTIVE, fraction 0..1
  double sm_clock_mhz = 0;   // DCGM_FI_DEV_SM_CLOCK, MHz, point sample
  // False when the caller found the sample's profiling counters unusable (DCGM profiling
  // paused, a counter stuck at 0 under load; the caller flags why): it gives no OFU, but its
  // time counts for the GPU's sampling, since the GPU did report.
  bool counters_usable = true;
};

// Per-sample OFU (eq. 1) as a fraction. INVALID_ARGUMENT naming the field and value for a
// non-finite input, tensor_active outside [0, 1], a negative clock, or
// tensor_max_clock_mhz <= 0. Not clamped: an SM clock above f_max yields OFU above TPA.
absl::StatusOr<double> SampleOfu(double tensor_active, double sm_clock_mhz,
                                 double tensor_max_clock_mhz);

// Data-quality flags, a bitmask. A flagged window still has a result; the flags say how far
// to trust it.
enum OfuQualityFlag : uint32_t {
  kOfuFlagNone = 0,
  // The GPU's sampling interval (median spacing of its samples, the spacing to its last sample
  // before the window included) is above max_sample_spacing_s (30 s): TPA is averaged over at
  // most 30 s, so coarser scrapes yield an average of averages. A GPU scraped once a minute is
  // flagged in 60 s windows that hold one sample each.
  kOfuFlagCoarseSampling = 1u << 0,
  // Some sample had tensor_active outside [0, 1]; such samples are excluded.
  kOfuFlagTensorActiveOutOfRange = 1u << 1,
  // Some sample's SM clock exceeded the model's SM boost clock (kept, but implausible).
  kOfuFlagSmClockAboveBoost = 1u << 2,
  // A silence of the GPU longer than gap_intervals (3) of its sampling intervals (and at least
  // min_gap_s) overlaps the window: between two of its samples, or after its last one for as
  // far as the job's telemetry is known. A GPU with no sample in the window is flagged too.
  kOfuFlagGap = 1u << 3,
  // Two samples of one GPU with the same timestamp; the first is kept.
  kOfuFlagDuplicateTimestamp = 1u << 4,
  // NaN/inf or negative value in a sample; such samples are excluded.
  kOfuFlagInvalidValue = 1u << 5,
  // No usable sample at all in the window (for a job window: from any GPU).
  kOfuFlagNoSamples = 1u << 6,
  // Job window only: fewer GPUs reported than were allocated.
  kOfuFlagPartialCoverage = 1u << 7,
};

// Names of the set flags ("coarse_sampling", "tensor_active_out_of_range",
// "sm_clock_above_boost", "gap", "duplicate_timestamp", "invalid_value", "no_samples",
// "partial_coverage"), in bit order.
std::vector<std::string> OfuQualityFlagNames(uint32_t flags);

// Mean of per-sample OFU values with spread and a 95% CI on the mean.
struct OfuStats {
  int64_t sample_count = 0;
  std::optional<double> mean_ofu;  // nullopt when sample_count == 0
  double stddev_ofu = 0;           // sample standard deviation (n - 1); 0 if n < 2
  // Half width of the 95% CI on the mean (Student t on n - 1 degrees of freedom, samples
  // treated as independent: the SM clock is a point sample). nullopt when n < 2.
  std::optional<double> ci95_half_width;
};

// Combines two stats computed over disjoint sample sets, as if computed over their union
// (parallel Welford merge).
OfuStats MergeOfuStats(const OfuStats& a, const OfuStats& b);

// Earlier samples beyond this many are not used to judge a GPU's sampling.
inline constexpr size_t kSamplingHistory = 6;

// What is known of a GPU's samples outside the window, so that sparse sampling and gaps are
// judged across window boundaries rather than inside one window only.
struct SamplingContext {
  // Times of the GPU's latest samples before the window (any order; the newest
  // kSamplingHistory are used).
  absl::InlinedVector<int64_t, kSamplingHistory> earlier_ms = {};
  // Time of its first sample after the window, when known.
  std::optional<int64_t> next_ms = {};
  // How far the job's telemetry is known (its newest sample time, or less): a silence after
  // the GPU's last sample counts up to its next sample or this time, whichever comes first.
  // Unset: the window end.
  std::optional<int64_t> known_until_ms = {};
};

// All samples of one GPU (any order; they are sorted by timestamp).
struct GpuOfuSeries {
  std::string gpu_id;  // stable GPU reference: UUID, or "host/index"
  std::vector<OfuSample> samples;
  SamplingContext sampling = {};
};

struct OfuWindowOptions {
  // Sampling interval above this: kOfuFlagCoarseSampling.
  double max_sample_spacing_s = 30;
  // Slack on max_sample_spacing_s for scrape jitter: a 30 s scrape landing a few milliseconds
  // late is not coarse.
  double spacing_tolerance = 0.1;
  // A silence longer than min_gap_s and than gap_intervals sampling intervals (the median of
  // the GPU's previous spacings, at most kSamplingHistory - 1 of them): kOfuFlagGap. Silences
  // shorter than the 30 s the tensor counter averages over are not gaps.
  double gap_intervals = 3;
  double min_gap_s = 30;
  // Instead of gap_intervals intervals while a GPU's interval is not known yet (no earlier
  // spacing).
  double gap_threshold_s = 90;
};

// One GPU's window.
struct GpuOfuWindow {
  std::string gpu_id;
  OfuStats stats;
  uint32_t flags = kOfuFlagNone;
  // Invalid, out-of-range, duplicate or unusable (!counters_usable) samples dropped.
  int64_t excluded_sample_count = 0;
};

// Computes one GPU's window over samples in [window_start_ms, window_end_ms); sparse sampling
// and gaps take series.sampling into account. A series without samples in the window is
// flagged kOfuFlagNoSamples (and kOfuFlagGap when its context shows a long silence).
// INVALID_ARGUMENT if window_end_ms <= window_start_ms or the spec's tensor clock is <= 0.
absl::StatusOr<GpuOfuWindow> ComputeGpuOfuWindow(const GpuSpec& spec, const GpuOfuSeries& series,
                                                 int64_t window_start_ms, int64_t window_end_ms,
                                                 const OfuWindowOptions& options = {});

struct JobOfuWindowInput {
  int64_t window_start_ms = 0;  // inclusive
  int64_t window_end_ms = 0;    // exclusive
  int allocated_gpu_count = 0;  // GPUs the scheduler gave the job (coverage denominator)
  std::vector<GpuOfuSeries> gpus;
  OfuWindowOptions options;
};

struct JobOfuWindow {
  int64_t window_start_ms = 0;
  int64_t window_end_ms = 0;
  // Mean over all GPUs x samples (eq. 11), with CI over the pooled per-sample values.
  OfuStats stats;
  int gpus_reporting = 0;  // GPUs with at least one usable sample
  int gpus_allocated = 0;
  double gpu_coverage = 0;  // gpus_reporting / gpus_allocated, 0..1
  // Spread of the per-GPU means across reporting GPUs; nullopt with no reporting GPU.
  std::optional<double> min_gpu_ofu;
  std::optional<double> median_gpu_ofu;
  std::optional<double> max_gpu_ofu;
  uint32_t flags = kOfuFlagNone;      // union of the GPU flags plus job-level ones
  std::vector<GpuOfuWindow> per_gpu;  // in input order
};

// Computes a job window. INVALID_ARGUMENT if allocated_gpu_count <= 0, fewer GPUs are
// allocated than series given, two series share a gpu_id, or the window is empty.
absl::StatusOr<JobOfuWindow> ComputeJobOfuWindow(const GpuSpec& spec,
                                                 const JobOfuWindowInput& input);

// Two-sided 97.5% quantile of Student's t with `degrees_of_freedom` >= 1 (1.96 in the limit).
double StudentT975(int64_t degrees_of_freedom);

}  // namespace goodput::core
