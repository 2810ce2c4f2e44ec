// The OFU window engine: turns a stream of attributed per-GPU samples into per-job and
// per-GPU windows of fixed length aligned to the Unix epoch, with the core library's math
// (OFU mean and 95% CI, coverage, min/median/max GPU, flags, SI/TI, stragglers, idle GPUs,
// roofline class, HBM peak fraction, energy).
//
// Sampling quality is judged across windows: the engine keeps, per GPU, the times of its
// latest samples in final windows, so that a GPU sampled once a minute is flagged as sparse
// in 60 s windows holding one sample each, and a GPU that goes silent is flagged as a gap in
// the windows its silence covers. Windows in which no GPU of the job sent anything, between
// two of its samples, are emitted too (coverage 0).
//
// Event time and lateness: each job keeps the highest sample timestamp it has seen. A window
// closes (is emitted, revision 0) once that timestamp reaches the window's end; it stays
// revisable until the timestamp passes end + allowed lateness, when it is finalized. Samples
// that reach a closed window revise it (emitted again, revision + 1); samples for a
// finalized window are counted as late (reported through LateCount results) and left out.
// Revising and finalizing emit the job-level window again but a per-GPU window only where it
// differs from what was last emitted for it: otherwise that emission stands (final with its
// job's window, JobProgress.final_before_ms) and is not written twice.
// A job that sends nothing for `idle_flush_ms` of arrival time has all its windows closed
// and finalized and its memory released.
//
// Profiling counters that cannot be trusted: a sample whose DCGM profiling fields are all
// missing while the GPU reports clock, power or memory (profiling paused or unavailable), or
// whose tensor and GR-engine activity read 0 while the GPU draws near its board power at
// boost clock (counters stuck), gives no OFU and is flagged; a GPU with such samples in a
// window is neither idle nor a straggler there, and the job's OFU comes from its other GPUs.
// Such samples still show that the GPU reports, so they count for its sampling (no gap).
//
// Memory: only the samples of windows that are not final are kept, packed (48 bytes per
// sample, one GPU name per GPU); everything else lives in the results. With 10 s sampling,
// 60 s windows and 120 s lateness that is about 1.7 KiB per active GPU (see MemoryBytes()).
//
// Pure: no I/O, no clock (arrival times are passed in), no protobuf.
//
//   WindowEngine engine(&GpuCatalog::BuiltIn(), {});
//   engine.Add(job, sample, arrival_ms);
//   engine.Advance();
//   for (const WindowResult& w : engine.TakeResults()) Store(w);
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "services/core/characterization.h"
#include "services/core/gpu_catalog.h"
#include "services/core/ofu.h"

namespace goodput::ofu {

inline constexpr double kNoValue = std::numeric_limits<double>::quiet_NaN();

// Data-quality flags of a window, a bitmask: bit (1 << n) is goodput.v1.DataQualityFlag n.
enum WindowFlag : uint32_t {
  kFlagSparseSampling = 1u << 1,
  kFlagTensorActiveOutOfRange = 1u << 2,
  kFlagSmClockAboveBoost = 1u << 3,
  kFlagGap = 1u << 4,
  kFlagDuplicateTimestamp = 1u << 5,
  kFlagLowGpuCoverage = 1u << 6,
  kFlagLateSamplesDropped = 1u << 7,
  kFlagEnergyCounterReset = 1u << 8,
  kFlagUnknownGpuModel = 1u << 9,
  kFlagSingleSample = 1u << 10,
  // DCGM profiling fields (tensor, GR-engine and DRAM activity) all missing while the GPU
  // still reports clock, power or memory: profiling paused (Nsight holds the counters) or
  // its module not loaded. Those samples give no OFU; the GPU is not judged idle.
  kFlagProfilingUnavailable = 1u << 11,
  // Tensor and GR-engine activity read exactly 0 while the GPU drew near its board power at
  // boost clock (EngineOptions::stuck_*): counters stuck, not an idle GPU. Those samples give
  // no OFU; the GPU is not judged idle. Not judged on MIG instances.
  kFlagProfilingCounterStuck = 1u << 12,
  kFlagSharedGpu = 1u << 13,
  // No cumulative energy counter for a GPU that reported board power: its energy is its mean
  // board power x the window's length, an estimate.
  kFlagEnergyEstimated = 1u << 14,
  // Late samples reached the window after it was final, and it was recomputed from the
  // stored samples (RecomputeFinalWindows).
  kFlagLateSamplesRecomputed = 1u << 15,
};

// Roofline classes, numbered as goodput.v1.RooflineClass.
enum class Roofline : int { kUnspecified = 0, kComputeBound = 1, kMemoryBound = 2, kIdle = 3 };

struct EngineOptions {
  int64_t window_ms = 60'000;
  // How long after a window's end (in event time) late samples still revise it.
  int64_t allowed_lateness_ms = 120'000;
  // A job without new samples for this long (arrival time) is flushed: all windows final.
  int64_t idle_flush_ms = 300'000;
  // Windows without any sample between two samples of a job at most this far apart are
  // reported all the same (coverage 0, flagged as gaps when the silence is one), so that a
  // telemetry outage shows and its GPU-hours count; a longer silence leaves no windows. A GPU
  // silent for longer is no longer judged in its job's windows.
  int64_t max_gap_fill_ms = 86'400'000;
  core::OfuWindowOptions ofu;
  double idle_threshold = 0.01;        // GR engine (else tensor) activity of an idle GPU
  double straggler_threshold = 0.2;    // score (median - ofu) / median at or above
  double low_coverage_fraction = 0.9;  // coverage below this sets kFlagLowGpuCoverage
  // A sample with tensor and GR-engine activity exactly 0 (DRAM activity 0 or missing) while
  // the GPU draws at least this share of its board power (GpuSpec::board_power_w) at this
  // share of its SM boost clock or more has stuck counters (kFlagProfilingCounterStuck).
  // Models without a board power are never judged stuck.
  double stuck_min_power_fraction = 0.6;
  double stuck_min_clock_fraction = 0.9;
  core::Precision roofline_precision = core::Precision::kBf16;
};

// What the engine must know of a job when it first sees it (or again after a flush).
struct JobInfo {
  int64_t job = 0;         // stable job id (the jobs table's id)
  std::string gpu_model;   // dcgm-exporter model string
  int gpus_allocated = 0;  // coverage denominator; 0: the GPUs seen
  // Windows starting before this are final (from an earlier run); samples for them are late.
  int64_t final_before_ms = std::numeric_limits<int64_t>::min();
  // Highest sample time already seen for the job (from an earlier run).
  int64_t max_event_ms = std::numeric_limits<int64_t>::min();
};

// One attributed sample. Missing fields are NaN.
struct Sample {
  std::string gpu;  // stable GPU key (see GpuKey in ofu_store.h)
  int64_t timestamp_ms = 0;
  double tensor_active = kNoValue;
  double sm_clock_mhz = kNoValue;
  double dram_active = kNoValue;
  double gr_engine_active = kNoValue;
  double sm_active = kNoValue;  // DCGM_FI_PROF_SM_ACTIVE, 0..1 (hung vs idle, alerting)
  double fb_used_mib = kNoValue;
  double power_w = kNoValue;
  double energy_mj = kNoValue;
  // MIG instance profile (GPU_I_PROFILE) when the GPU key names a MIG instance.
  std::string mig_profile;
  // Workloads (pods) that reported this GPU at this instant: > 1 on a time-sliced GPU.
  int shared_by = 1;
};

// An allocated GPU that sent nothing in a window while other GPUs of its job did.
struct SilentGpuResult {
  std::string gpu;
  int64_t last_sample_ms = 0;  // its newest sample before the window
  // No GPU of its host (of those the job has reported from) sent anything in the window.
  bool host_silent = false;
};

struct StragglerResult {
  std::string gpu;
  double ofu = 0;
  double score = 0;  // GPU OFU / median GPU OFU (the API's score: 1 typical, lower slower)
};

// One window of one job (gpu empty) or one GPU of it.
struct WindowResult {
  int64_t job = 0;
  std::string gpu;  // empty for the job-level window
  int64_t start_ms = 0;
  int64_t end_ms = 0;
  std::string gpu_model;
  int64_t sample_count = 0;
  std::optional<double> ofu;
  double ofu_stddev = 0;
  std::optional<double> ofu_ci95_half_width;
  int gpus_reporting = 0;
  int gpus_allocated = 0;
  double gpu_coverage = 0;
  std::optional<double> gpu_ofu_min, gpu_ofu_median, gpu_ofu_max;
  std::optional<double> tensor_active_mean, sm_clock_mhz_mean;
  uint32_t flags = 0;
  std::optional<double> spatial_imbalance, temporal_imbalance;
  std::vector<StragglerResult> stragglers;  // worst first
  std::vector<std::string> idle_gpus;
  // Job level: GPUs of the job (those it reported from, within max_gap_fill_ms) that sent
  // nothing in the window while another GPU of the job did, by GPU key.
  std::vector<SilentGpuResult> silent_gpus;
  // Job level, over samples whose counters can be trusted: mean GR-engine and SM activity,
  // and the highest per-GPU mean of tensor, SM and GR-engine activity ("every GPU stopped"
  // is a maximum near 0). Unset when no sample carried the field.
  std::optional<double> gr_engine_active_mean, sm_active_mean;
  std::optional<double> gpu_tensor_active_max, gpu_sm_active_max, gpu_gr_engine_active_max;
  Roofline roofline = Roofline::kUnspecified;
  std::optional<double> hbm_peak_fraction;
  std::optional<double> energy_j;
  std::optional<double> power_w_mean;  // job level: summed over GPUs
  // GPUs the window stands for in fleet figures: a whole GPU counts 1, a MIG instance its
  // share of the GPU's SMs, a GPU time-sliced between n workloads 1/n; allocated GPUs that
  // sent nothing count 1. Job level: the sum.
  double gpu_equivalents = 0;
  int64_t late_sample_count = 0;
  bool finalized = false;
};

// Late samples counted against a window that was already final.
struct LateCount {
  int64_t job = 0;
  int64_t window_start_ms = 0;
  int64_t count = 0;
  // The window was recomputed with them (else they are left out, kFlagLateSamplesDropped).
  bool recomputed = false;
};

// Where a job stands, for persisting next to the results.
struct JobProgress {
  int64_t job = 0;
  int64_t final_before_ms = 0;
  int64_t max_event_ms = 0;
};

enum class AddOutcome { kAccepted, kLate, kRefused };

class WindowEngine {
 public:
  // `catalog` must outlive the engine.
  WindowEngine(const core::GpuCatalog* catalog, EngineOptions options);
  ~WindowEngine();
  WindowEngine(const WindowEngine&) = delete;
  WindowEngine& operator=(const WindowEngine&) = delete;

  // Whether the engine holds state for `job` (if not, the caller passes its JobInfo).
  bool Knows(int64_t job) const;

  // Adds a sample of `info.job` that arrived at `arrival_ms`. `info` is read only when the
  // job is new to the engine. kLate: its window is final (counted, reported by
  // TakeLateCounts). kRefused: no usable timestamp.
  AddOutcome Add(const JobInfo& info, const Sample& sample, int64_t arrival_ms);

  // Like Add for samples being restored after a restart: never late, never emitted on its
  // own. Samples of final windows only provide the last energy reading and the sampling
  // history before the first open window: restore the RestoreLookbackMs() before
  // `final_before_ms` too, or before the job's last sample ahead of it when that is older.
  // Call RestoreDone(job) after the last one.
  void Restore(const JobInfo& info, const Sample& sample);
  void RestoreDone(int64_t job);

  // Closes and finalizes windows by each job's event time and emits what changed; flushes
  // jobs idle since before now_ms - idle_flush_ms (pass nullopt to skip the idle flush).
  void Advance(std::optional<int64_t> now_ms = std::nullopt);

  // Closes and finalizes every window of `job` (job ended) and forgets it.
  void FlushJob(int64_t job);

  // Results emitted since the last call: job-level then per-GPU windows, time order.
  std::vector<WindowResult> TakeResults();
  std::vector<LateCount> TakeLateCounts();
  // Progress of the jobs touched since the last call.
  std::vector<JobProgress> TakeProgress();

  // Where a job the engine holds stands: windows before final_before_ms are final.
  struct Standing {
    int64_t final_before_ms = 0;
    int64_t max_event_ms = 0;
    size_t gpus = 0;  // GPUs seen
  };
  std::optional<Standing> StandingOf(int64_t job) const;

  // Bytes held for open windows and GPU names (approximate, allocator overhead excluded).
  size_t MemoryBytes() const;
  // GPUs with samples in some open window.
  size_t ActiveGpuCount() const;

  const EngineOptions& options() const { return options_; }

 private:
  struct JobState;
  struct OpenWindow;
  JobState& StateFor(const JobInfo& info);
  void Emit(JobState& job, OpenWindow& window, bool finalize);
  void FillGaps(JobState& job);
  void FoldIntoFinal(JobState& job, uint32_t gpu, int64_t timestamp_ms, bool counts_for_sampling,
                     double energy_mj);
  void CloseAndFinalize(JobState& job, bool everything);

  const core::GpuCatalog* catalog_;
  EngineOptions options_;
  absl::flat_hash_map<int64_t, std::unique_ptr<JobState>> jobs_;
  std::vector<WindowResult> results_;
  std::vector<LateCount> late_;
  absl::flat_hash_map<int64_t, JobProgress> progress_;
};

// Computes the job-level and per-GPU windows of one window's samples with the core library.
// `previous_energy` holds, per GPU, the last energy reading before the window (timestamp,
// mJ) so energy spans the window boundary; `sampling`, per GPU, its samples around the
// window (a GPU without samples in the window but with a context is judged for gaps and
// counts as allocated). Exposed for the benchmark and tests.
struct WindowInput {
  int64_t job = 0;
  std::string gpu_model;
  const core::GpuSpec* spec = nullptr;  // null: unknown model (flagged, no OFU)
  int gpus_allocated = 0;
  int64_t start_ms = 0;
  int64_t end_ms = 0;
  std::vector<std::string> gpu_names;  // index -> GPU key
  std::vector<double> gpu_share;       // index -> SM share (MIG instance), 1 for a whole GPU
  // Index -> a MIG instance: its power and clock are the whole GPU's, so an idle instance on
  // a busy GPU is not judged to have stuck counters. May be empty (none).
  std::vector<bool> mig_instance;
  // GPU index -> most workloads seen sharing it in the window (time-slicing); only GPUs > 1.
  absl::flat_hash_map<uint32_t, int> shared_by;
  struct Packed {
    int32_t offset_ms;
    uint32_t gpu;
    float tensor_active, sm_clock_mhz, dram_active, gr_engine_active, fb_used_mib, power_w;
    float sm_active;
    double energy_mj;
  };
  std::vector<Packed> samples;                              // any order
  std::vector<std::pair<int64_t, double>> previous_energy;  // by GPU index; ts < 0: none
  std::vector<core::SamplingContext> sampling;              // by GPU index; may be empty
};
std::vector<WindowResult> ComputeWindow(const WindowInput& input, const EngineOptions& options);

// How far before a job's `final_before_ms` WindowEngine::Restore wants samples: the last
// core::kSamplingHistory samples of a GPU sampled once a minute, and at least one window.
int64_t RestoreLookbackMs(const EngineOptions& options);

// The epoch-aligned start of the window holding `timestamp_ms`.
int64_t WindowStart(int64_t timestamp_ms, int64_t window_ms);

// Late samples, counted in. A sample for a window that is already final (one host's or one
// Prometheus shard's telemetry delayed past the allowed lateness while the job's other GPUs
// kept reporting) is left out by the engine, which holds only open windows. The consumer then
// computes the windows it reached again from every stored sample of the job, so a job's
// figures are exact after any catch-up within the samples' retention, and the engine's memory
// stays what it was: a recomputation holds one span's samples for as long as it runs.
//
// A span of final windows to recompute: window starts in [from_ms, to_ms).
struct RecomputeSpan {
  int64_t from_ms = 0;
  int64_t to_ms = 0;
  bool operator==(const RecomputeSpan&) const = default;
};

// The spans for the final windows late samples reached (`late_starts`, any order, repeats
// allowed), each with its neighbours that are final too (before `final_before_ms`): a GPU's
// silence or return changes the sampling flags of the window on either side. Touching spans
// are merged, then cut into spans of at most `max_windows` windows.
std::vector<RecomputeSpan> LateRecomputeSpans(std::vector<int64_t> late_starts,
                                              int64_t final_before_ms, int64_t window_ms,
                                              int max_windows);

// The stored samples RecomputeFinalWindows needs for `span`: those of the job with time in
// [from, to). `from` is RestoreLookbackMs() before the span (the caller reaches back further,
// to the job's last sample before the span, when that is older: a silence).
RecomputeSpan RecomputeSampleRange(const RecomputeSpan& span, const EngineOptions& options);

// The job-level and per-GPU windows of `span`, computed from `samples` (the job's stored
// samples of RecomputeSampleRange(span), any order) as the engine computed them when they
// became final, with every sample counted: finalized, flagged kFlagLateSamplesRecomputed.
// `info.max_event_ms` is the job's newest sample time (WindowEngine::StandingOf). Pure.
std::vector<WindowResult> RecomputeFinalWindows(const core::GpuCatalog* catalog,
                                                const EngineOptions& options, const JobInfo& info,
                                                std::vector<Sample> samples,
                                                const RecomputeSpan& span);

}  // namespace goodput::ofu
