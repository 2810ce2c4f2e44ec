#pragma once
// Fleet simulator: a deterministic, streamable fleet of GPU jobs with per-GPU DCGM-like
// telemetry, framework MFU reports and ground-truth labels, for demos, benchmarks and the
// evaluation of the detectors.
//
// A fleet is planned up front (jobs, their workloads, phenomena and labels: small), then
// generated one window of simulated time at a time for the running jobs only, so memory is
// bounded by the GPUs running at once, whatever the fleet's length. Everything follows from
// FleetConfig::seed; each job and window draws from its own derived stream.
//
// Physics (domain.md): a job's true OFU is the share of peak tensor throughput it achieves.
// Each sample's TPA is that throughput over the hardware-averaged clock (TPA = u x f_max /
// f_avg), the SM clock is a point sample that wanders with power capping (H100 under load
// ~1,200-1,560 MHz), so measured OFU = TPA x f_point / f_max differs from the truth by the
// clock's sampling noise. Framework MFU (against the effective peak of the reported precision
// mix) equals the true OFU over (1 + tile overhead), times the miscount factor of its FLOPs
// formula. A precision switch changes the tensor time of each step by the ratio of effective
// peaks, so OFU and MFU move together by at most that ratio.
//
//   FleetSimulator sim(DefaultFleetConfig(42));
//   MySink sink;                       // implements FleetSink
//   while (sim.Step(sink)) {}

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "services/core/gpu_catalog.h"

namespace goodput::sim {

// A FLOPs-formula error of the framework (ground truth for divergence verdicts).
enum class Miscount {
  kNone,
  kMoeLatentProjection,  // experts counted at full hidden dim: x(1 - f + f k)
  kLayerTypes,           // hybrid layers counted as attention + MLP: x1.45..1.7
  kRecomputeNotCounted,  // full activation checkpointing: 3F counted of 4F run: x0.75
  kDoubled,              // e.g. BF16 peak used for an FP8 run: x2
  kHalved,               // sparse peak / FMA as one FLOP / FP8 peak for BF16: x0.5
};
const char* MiscountName(Miscount m);

struct GpuModelShare {
  std::string model_name;  // dcgm-exporter modelName, resolved through the core catalog
  double weight = 1;
  double tdp_w = 700;  // board power limit
  double idle_w = 70;
  bool has_fp8 = true;
};

struct GpuCountShare {
  int gpus = 8;
  double weight = 1;
};

// Everything that shapes a fleet. Durations in seconds, probabilities per job unless named.
struct FleetConfig {
  std::string name = "default";
  uint64_t seed = 1;
  int64_t start_unix_s = 1767225600;  // 2026-01-01T00:00:00Z
  int workloads = 24;
  int jobs_per_workload_min = 2;
  int jobs_per_workload_max = 5;
  int64_t job_duration_min_s = 2 * 3600;
  int64_t job_duration_max_s = 8 * 3600;
  int64_t gap_between_jobs_max_s = 2 * 3600;   // a workload's next job starts within this
  int64_t workload_start_spread_s = 6 * 3600;  // first jobs start within this
  std::vector<GpuModelShare> models;
  std::vector<GpuCountShare> gpu_counts;
  int sample_interval_s = 30;  // scrape interval
  int window_s = 60;
  double sample_loss = 0.002;  // share of samples lost in transport
  // Steady OFU of a workload and its job-to-job variation.
  double steady_ofu_min = 0.18, steady_ofu_max = 0.58;
  double job_to_job_sd = 0.03;  // relative
  double slow_drift_sd = 0.01;  // relative random walk per hour
  // Warm-up: ramp from ~5% to the steady level.
  int64_t warmup_min_s = 180, warmup_max_s = 900;
  // Checkpoints: every period, the job stops computing for the duration.
  int64_t checkpoint_period_min_s = 1800, checkpoint_period_max_s = 3600;
  int64_t checkpoint_min_s = 60, checkpoint_max_s = 240;
  // Evaluation passes (lower tensor activity, ~40% of steady).
  double eval_probability = 0.3;
  int64_t eval_period_s = 7200, eval_duration_s = 240;
  // Stalls (data loader, network hiccups): OFU ~0.
  double stalls_per_hour = 0.3;
  int64_t stall_max_s = 240;
  // Clock behaviour under load as fractions of the tensor max clock (H100: 1830 MHz ->
  // 1,200-1,560 MHz is 0.656-0.852).
  double clock_low = 0.656, clock_high = 0.852;
  double clock_wander_sd = 0.03;  // of f_max, AR(1) per sample
  double clock_point_sd = 0.02;   // instantaneous vs interval-average clock
  // Per-GPU phenomena.
  double straggler_job_probability = 0.15;
  double straggler_factor_min = 0.55, straggler_factor_max = 0.8;
  double idle_gpu_job_probability = 0.1;
  // Injected regressions inside a job.
  double in_job_regression_probability = 0.2;
  double regression_factor_min = 1.5, regression_factor_max = 4.0;
  int64_t regression_min_s = 600, regression_max_s = 5400;
  double regression_sustained_probability = 0.5;  // lasts until the job ends
  // A new job of an existing workload bad from its start (TORCH_DISTRIBUTED_DEBUG=DETAIL).
  double debug_flag_probability = 0.12;
  double debug_factor_min = 2.2, debug_factor_max = 2.8;
  // Framework FLOPs miscounts.
  double miscount_moe_probability = 0.07;
  double miscount_layer_types_probability = 0.07;
  double miscount_recompute_probability = 0.07;
  double miscount_doubled_probability = 0.03;
  double miscount_halved_probability = 0.03;
  double moe_expert_share_min = 0.65, moe_expert_share_max = 0.9;  // of model FLOPs
  double moe_inflation_min = 2.8, moe_inflation_max = 3.2;         // hidden / latent effect
  double layer_types_factor_min = 1.45, layer_types_factor_max = 1.7;
  double tile_overhead_min = 0.01, tile_overhead_max = 0.05;
  // Precision: share of mixed-precision (FP8) workloads, FP8 share of their FLOPs, and
  // switches to BF16-only and back inside a job.
  double mixed_precision_probability = 0.5;
  double fp8_share_min = 0.5, fp8_share_max = 0.9;
  double precision_switch_probability = 0.2;
  double mfu_report_probability = 0.9;  // jobs whose framework reports MFU
  double mfu_noise_sd = 0.01;           // relative, per report
};

// The configuration the detectors were developed against.
FleetConfig DefaultFleetConfig(uint64_t seed);
// A different generator configuration (other scrape interval, GPU mix, dip shapes, noise and
// factor ranges) held out for evaluation.
FleetConfig HeldOutFleetConfig(uint64_t seed);
// A small fleet for unit tests (few, small jobs).
FleetConfig SmallFleetConfig(uint64_t seed);

struct InjectedDrop {
  int64_t onset_s = 0;
  int64_t end_s = 0;  // job end when sustained
  double factor = 1;
};

struct PrecisionPhase {
  int64_t start_s = 0;
  double fp8_share = 0;              // FLOPs share in FP8, rest BF16
  double effective_peak_tflops = 0;  // eq. 12
};

// Ground truth of one job.
struct JobTruth {
  int index = 0;
  std::string cluster = "sim";
  std::string job_id;
  std::string user;
  std::string team;
  std::string workload;     // fingerprint: model + config + GPU count + GPU model
  int job_in_workload = 0;  // 0 for the workload's first job
  std::string gpu_model;    // dcgm modelName
  const core::GpuSpec* spec = nullptr;
  double tdp_w = 700, idle_w = 70;
  int gpu_count = 8;
  int gpus_per_host = 8;
  int64_t start_s = 0, end_s = 0;
  double steady_ofu = 0;  // level without phenomena
  int64_t warmup_s = 0;
  int64_t checkpoint_period_s = 0, checkpoint_s = 0, checkpoint_phase_s = 0;
  bool has_eval = false;
  int64_t eval_period_s = 0, eval_s = 0;
  std::vector<std::pair<int64_t, int64_t>> stalls;  // [start, end)
  std::vector<InjectedDrop> drops;
  bool debug_flag = false;  // bad from the start against its workload
  double debug_factor = 1;
  Miscount miscount = Miscount::kNone;
  double miscount_factor = 1;
  double tile_overhead = 0.02;
  std::vector<PrecisionPhase> precision;  // at least one phase, from start_s
  bool reports_mfu = true;
  std::vector<int> straggler_gpus;
  std::vector<double> straggler_factors;
  std::vector<int> idle_gpus;
  std::string mfu_form;  // "mfu", "tflops_per_gpu", "total_tflops", "flops_per_step"
};

// One DCGM-like sample of one GPU.
struct GpuSample {
  int64_t timestamp_ms = 0;
  int gpu_index = 0;  // within the job's allocation
  std::string hostname;
  int device = 0;  // index on the host
  std::string uuid;
  double tensor_active = 0;  // DCGM_FI_PROF_PIPE_TENSOR_ACTIVE
  double sm_clock_mhz = 0;   // DCGM_FI_DEV_SM_CLOCK (point sample)
  double sm_active = 0;
  double sm_occupancy = 0;
  double dram_active = 0;
  double fp16_active = 0, fp32_active = 0, fp64_active = 0;
  double gr_engine_active = 0;
  double fb_used_mib = 0;
  double power_w = 0;
  double energy_mj = 0;  // cumulative since driver load
  double temperature_c = 0;
  double nvlink_tx_bytes = 0, nvlink_rx_bytes = 0;  // over the sample interval
  double pcie_tx_bytes = 0, pcie_rx_bytes = 0;
  uint32_t clock_throttle_reasons = 0;
  double true_ofu = 0;  // ground truth for this sample
};

// A framework's report for an interval, in the form the job's framework uses.
struct MfuReport {
  int64_t start_s = 0, end_s = 0;
  std::string form;  // which of the fields below the framework sent
  double mfu = 0;    // fraction, against the effective peak
  double tflops_per_gpu = 0;
  double total_tflops = 0;
  int gpu_count = 0;
  double flops_per_step = 0;
  double step_time_s = 0;
  double fp8_share = 0;  // precision mix: FP8, rest BF16
  double effective_peak_tflops = 0;
};

// Receives the stream. Calls come in time order per job; jobs interleave per window.
class FleetSink {
 public:
  virtual ~FleetSink() = default;
  virtual void OnJobStart(const JobTruth& job) {}
  // All samples of one job for one window, in time order per GPU.
  virtual void OnSamples(const JobTruth& job, int64_t window_start_s, int64_t window_end_s,
                         const std::vector<GpuSample>& samples) {}
  virtual void OnMfuReport(const JobTruth& job, const MfuReport& report) {}
  // Truth for the window: mean true OFU over GPUs and samples.
  virtual void OnWindowTruth(const JobTruth& job, int64_t window_start_s, int64_t window_end_s,
                             double true_ofu) {}
  virtual void OnJobEnd(const JobTruth& job) {}
};

class FleetSimulator {
 public:
  // Plans the fleet. INVALID_ARGUMENT for an inconsistent config, NOT_FOUND for a GPU model
  // the catalog does not know.
  static absl::StatusOr<std::unique_ptr<FleetSimulator>> Create(
      const FleetConfig& config, const core::GpuCatalog& catalog = core::GpuCatalog::BuiltIn());

  // Generates the next window of simulated time for every running job. Returns false once
  // every job has ended.
  bool Step(FleetSink& sink);
  int64_t now_s() const { return now_s_; }
  int64_t end_s() const { return end_s_; }
  const std::vector<JobTruth>& jobs() const { return jobs_; }
  const FleetConfig& config() const { return config_; }

  ~FleetSimulator();

 private:
  struct Running;
  explicit FleetSimulator(FleetConfig config);
  void StepJob(Running& r, int64_t window_start_s, FleetSink& sink);

  FleetConfig config_;
  std::vector<JobTruth> jobs_;  // by start time
  size_t next_job_ = 0;
  std::vector<std::unique_ptr<Running>> running_;
  int64_t now_s_ = 0;
  int64_t end_s_ = 0;
};

// Job-level true OFU multiplier at time t from the job's phenomena (warm-up, checkpoints,
// evaluation, stalls, drops, debug flag, precision), before per-GPU factors. Exposed for tests.
double JobLevelAt(const JobTruth& job, double t_s);

// Effective peak (eq. 12) of a BF16/FP8 mix on `spec`, TFLOP/s.
double EffectivePeakTflops(const core::GpuSpec& spec, double fp8_share);

}  // namespace goodput::sim
