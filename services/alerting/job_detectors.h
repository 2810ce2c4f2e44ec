// What the detectors of services/detect say about one job: its windows and mfu's events as
// the detectors take them (JobWindow, PrecisionSwitchObs, DivergenceObs), the options, and
// the findings with the numbers behind them. job_evaluator.h runs the detectors window by
// window; EvaluateJob here runs them over a whole job at once (tests, tools).
//
//   JobEvaluation e = EvaluateJob(input, options);
//   for (const Finding& f : e.findings) ... Fingerprint(f.kind, cluster, job_id, f.detail) ...
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "services/alerting/alert_rules.h"
#include "services/alerting/platform_lag.h"
#include "services/detect/findings.h"
#include "services/detect/regression.h"
#include "services/detect/serving_efficiency.h"

namespace goodput::alerting {

// A GPU named by ofu in a job-level window ("host/index/uuid").
struct StragglerObs {
  std::string gpu = {};
  double ofu = 0;
  double score = 0;  // GPU OFU / job median GPU OFU
};

// An allocated GPU that sent nothing in a window while other GPUs of the job did (ofu's
// silent_gpus).
struct SilentGpuObs {
  std::string gpu = {};       // "host/index/uuid"
  int64_t last_sample_s = 0;  // its newest sample: silent since
  bool host_silent = false;   // no GPU of the job on its host reported in the window
};

// The activity of a job's GPUs over a window (ofu's job-level activity fields), each unset
// when no trusted sample carried the DCGM field: what tells a hung job from an idle one.
struct ActivityObs {
  std::optional<double> gr_engine_mean;  // GR_ENGINE_ACTIVE (GPU utilization), mean
  std::optional<double> sm_mean;         // SM_ACTIVE, mean
  std::optional<double> tensor_max;      // highest per-GPU mean PIPE_TENSOR_ACTIVE
  std::optional<double> sm_max;          // highest per-GPU mean SM_ACTIVE
  std::optional<double> gr_engine_max;   // highest per-GPU mean GR_ENGINE_ACTIVE
};

// One job-level OFU window as ofu characterized it.
struct JobWindow {
  detect::OfuWindow window;  // effective_peak_tflops is filled from precision switches
  bool warmup = false;
  int gpus_allocated = 0;
  int gpus_reporting = 0;
  double gpu_ofu_median = 0;
  std::vector<StragglerObs> stragglers;
  std::vector<std::string> idle_gpus;
  uint32_t flags = 0;       // bit n set: goodput.v1.DataQualityFlag n was seen
  double power_w_mean = 0;  // board power summed over the GPUs; 0 when unknown
  std::vector<SilentGpuObs> silent_gpus;
  ActivityObs activity;
  // Prompt and generation tokens the job's serving engines counted in the window, per second
  // (their counters' increases, serving_samples); unset when no engine reported in it.
  std::optional<double> tokens_per_s;
};

// One increase of a serving engine's token counter: `tokens` counted between two samples.
struct TokenIncrease {
  int64_t from_ms = 0;  // the previous sample
  int64_t to_ms = 0;    // this sample
  double tokens = 0;
};

// The load of an inference service per window, from its engines' counter increases: each
// increase is spread evenly over the time between its two samples, so a 30 s or 60 s scrape
// that does not line up with the windows still gives each window its share.
//
//   TokenRate rate(increases);  // sorted by to_ms
//   for (JobWindow& w : windows) w.tokens_per_s = rate.For(start_ms, end_ms);
class TokenRate {
 public:
  explicit TokenRate(std::vector<TokenIncrease> increases);
  // Tokens per second in [start_ms, end_ms); unset when no increase overlaps it (no engine
  // reported). Windows must be asked in time order.
  std::optional<double> For(int64_t start_ms, int64_t end_ms);
  // Increases over a longer gap between two samples are left out: when in the gap the
  // tokens were served is unknown.
  static constexpr int64_t kMaxSpreadMs = 15 * 60 * 1000;

 private:
  std::vector<TokenIncrease> increases_;
  size_t first_ = 0;  // increases before it ended before the last window asked
};

// What a window says of whether the job's GPUs work (ClassifyActivity):
// - kIdle: every GPU's GR engine at most idle_gr_engine_active: no kernel runs anywhere.
// - kHung: no GPU does tensor work and every GPU's SM activity is ~0, or the GR engine is busy
//   while every SM stays below spinning_sm_active (a collective kernel spinning on a peer).
// - kComputing: otherwise.
// - kUnknown: untrusted counters, no GPU reporting, or the fields needed are missing.
enum class Activity { kUnknown, kComputing, kHung, kIdle };

// The framework's precision mix changed at `time_s` (from mfu).
struct PrecisionSwitchObs {
  int64_t time_s = 0;
  double peak_before_tflops = 0;
  double peak_after_tflops = 0;
};

// One GPU fault event (a gpu_fault_events row ingest derived; gpu_fault_findings.h).
struct FaultObs {
  int64_t id = 0;
  std::string host = {};
  std::optional<int> gpu_index = {};
  std::string gpu_uuid = {};
  std::optional<int> mig_instance = {};
  int64_t time_ms = 0;
  std::string signal = {};  // core::FaultSignalName: "xid", "ecc_dbe_volatile", ...
  std::optional<int64_t> xid = {};
  double value = 0;
  std::optional<double> previous_value = {};
  double count = 1;
  bool counter_reset = false;
  std::string source = {};
  // Flags (row remap pending) that are down again: when the GPU's state says it went to 0
  // after this event (the fault state cleared, e.g. after a GPU reset).
  std::optional<int64_t> cleared_ms = {};
};

// mfu's latest divergence verdict for the job.
struct DivergenceObs {
  int64_t time_s = 0;
  int64_t interval_start_s = 0;
  int64_t interval_end_s = 0;
  std::string verdict = {};  // detect::VerdictName: "consistent", "app_flops_overcount", ...
  double ratio = 0;          // MFU / OFU
  double confidence = 0;
  double correction_factor = 0;
  std::string top_cause = {};  // detect::CauseName of the best-fitting cause, empty if none
  std::string reason = {};     // mfu's sentence
};

// An earlier job of the same workload fingerprint, with its steady state.
struct EarlierJob {
  std::string job_id = {};
  int64_t last_end_s = 0;  // end of its last window
  detect::JobSteadyState steady = {};
};

struct JobInput {
  std::vector<JobWindow> windows;                      // time order, one per start
  std::vector<PrecisionSwitchObs> precision_switches;  // time order
  std::optional<DivergenceObs> divergence;
  std::vector<EarlierJob> earlier_jobs;  // most recent first
  bool serving = false;                  // the job's workload kind is inference
};

// DataQualityFlag numbers whose windows are no evidence of a regression or of idle GPUs:
// DCGM profiling paused or unavailable (11) and profiling counters stuck at 0 (12). Their
// low or missing OFU says nothing of the job, so those detectors take them as missing data.
inline constexpr uint32_t kProfilingDataQualityFlags = (1u << 11) | (1u << 12);

// DataQualityFlag numbers that make telemetry unreliable enough to say so.
inline constexpr uint32_t kSeriousDataQualityFlags = (1u << 1) | (1u << 2) | (1u << 3) | (1u << 4) |
                                                     (1u << 5) | (1u << 6) | (1u << 9) |
                                                     kProfilingDataQualityFlags;

struct DetectorOptions {
  detect::RegressionOptions regression;
  detect::BaselineOptions baseline;
  detect::FindingsOptions findings;
  // A job flagged against its workload recovers when its recent level is back within this
  // factor of the baseline.
  double workload_recovery_factor = 1.15;
  // Data quality: at least this share of the last `data_quality_windows` windows flagged.
  int data_quality_windows = 10;
  double data_quality_share = 0.5;
  uint32_t data_quality_flags = kSeriousDataQualityFlags;
  // Windows with any of these flags confirm neither a regression (in the job or against its
  // workload) nor idle GPUs or stragglers: those detectors skip them.
  uint32_t untrusted_ofu_flags = kProfilingDataQualityFlags;
  // Divergence verdicts below this confidence do not alert.
  double divergence_min_confidence = 0.8;
  // A running job whose newest window ended longer ago than this has stopped reporting.
  int64_t telemetry_stopped_after_s = 600;
  // A GPU (or a host's GPUs) silent this long while other GPUs of the job report is a
  // silent_gpu finding: five missed samples at 1-minute sampling, half of telemetry_stopped.
  int64_t silent_gpu_after_s = 300;
  // Hung and idle (services/alerting/README.md, "Hung and idle jobs"): how long the windows
  // must say so. A checkpoint (up to 6 minutes) stays below both.
  int64_t hung_after_s = 600;
  int64_t job_idle_after_s = 1800;
  double stopped_tensor_active = 0.01;     // every GPU's tensor activity at most this
  double stopped_sm_active = 0.05;         // every GPU's SM activity at most this: ~0
  double spinning_gr_engine_active = 0.5;  // GR engine at least this (mean): kernels resident
  double spinning_sm_active = 0.3;         // and every GPU's SMs below this: a spinning kernel
  double idle_gr_engine_active = 0.05;     // every GPU's GR engine at most this: no kernel
  // Inference services (services/alerting/README.md, "Inference services"): the load-aware
  // gate that replaces the OFU drop detectors of a job whose engines report their tokens.
  detect::ServingGateOptions serving;
  int serving_test_windows = 10;        // recent windows judged together (median)
  int serving_reference_windows = 1440;  // windows before them kept as the reference: a day
};

// How the window's GPUs work (see Activity).
Activity ClassifyActivity(const JobWindow& w, const DetectorOptions& options);

// A condition that holds now, with the numbers behind it.
struct Finding {
  Kind kind = Kind::kRegressionInJob;
  std::string detail;    // fingerprint detail: the GPU for stragglers, else empty
  std::string detector;  // "in_job_change_point/two_window_median", ...
  double confidence = 0;
  int64_t onset_s = 0;
  int64_t detected_s = 0;
  std::optional<double> before_ofu;
  std::optional<double> after_ofu;
  std::optional<double> factor;
  std::optional<double> baseline_ofu;
  int baseline_jobs = 0;
  std::vector<std::string> baseline_job_ids;  // most recent first
  int64_t baseline_last_end_s = 0;            // when the most recent of them ended
  bool stalled = false;
  std::vector<std::string> gpus;  // idle GPUs, the straggler, or the silent GPUs
  std::string host;               // silent_gpu of a whole host: the host
  // hung, job_idle: the activity of the latest window of the episode, the windows it spans,
  // and whether a spinning kernel (GR engine busy) was seen.
  std::optional<ActivityObs> activity;
  int64_t stopped_windows = 0;
  bool spinning = false;
  double idle_gpu_hours = 0;
  double straggler_score = 0;
  uint32_t flags = 0;
  int flagged_windows = 0;
  int recent_windows = 0;
  // Data quality: the most GPUs without OFU in a window flagged profiling-unavailable (11),
  // and the mean board power per GPU over the windows flagged counter-stuck (12).
  int profiling_unavailable_gpus = 0;
  std::optional<double> stuck_power_w_per_gpu;
  int64_t last_sample_s = 0;
  std::optional<DivergenceObs> divergence;
  // regression_in_job of an inference service: the per-token verdict that opened it.
  std::optional<detect::ServingVerdict> serving;
  std::vector<PrecisionSwitchObs> precision_switches;  // near the onset: annotations
  std::vector<std::string> annotations;                // detector sentences
  int64_t evidence_from_s = 0;                         // windows in [from, to) are the evidence
  int64_t evidence_to_s = 0;
  double straggler_ofu = 0;  // the straggler's OFU in the latest window (score x median)
  // When the condition stopped holding (start of the first window without it); unset while
  // it holds.
  std::optional<int64_t> condition_end_s;
  // gpu_fault: the GPU's alerting faults, worst first. Other kinds: the faults on the job's
  // GPUs that coincide with the finding, likely cause first (gpu_fault_findings.h; set by the
  // engine, not by the detectors).
  std::vector<FaultObs> faults;
  // Labels the finding adds to the job's (gpu_fault: gpu, host, gpu_index, gpu_uuid, fault,
  // xid, fault_blame).
  std::map<std::string, std::string> extra_labels;
  // platform_lagging: the platform's backlog (the engine's, from its producers' deliveries).
  std::optional<PlatformLag> platform_lag;
};

// A drop in OFU that recovered before it was confirmed (detect::RegressionEvent::kTransient):
// recorded on the job, never an alert. The GPU-hours lost are those the job would not have
// spent at its level before: (1 - 1/factor) x the drop's duration x its GPUs.
struct TransientSlowdown {
  int64_t onset_s = 0;
  int64_t end_s = 0;
  double before_ofu = 0;
  double after_ofu = 0;
  double factor = 0;
  int windows = 0;
  int gpus = 0;
  double lost_gpu_hours = 0;
};

struct JobEvaluation {
  // Conditions that hold after the last window.
  std::vector<Finding> findings;
  // Conditions that held for a while and ended, in the order they ended (condition_end_s set).
  std::vector<Finding> ended;
  // The job's steady state (frozen at a confirmed in-job regression), for later baselines.
  detect::JobSteadyState steady;
  // Drops that a precision switch explained: annotated, not alerted.
  std::vector<std::string> precision_annotations;
  // Drops that recovered before they were confirmed, in time order.
  std::vector<TransientSlowdown> transients;
};

// Every condition of the job except telemetry_stopped (which needs the clock), from all its
// windows at once: JobEvaluator (job_evaluator.h) fed with them in order.
JobEvaluation EvaluateJob(const JobInput& input, const DetectorOptions& options);

// A running job whose newest window ended at `last_window_end_s` has stopped reporting at
// `now_s`? nullopt when it has not.
std::optional<Finding> TelemetryStopped(int64_t last_window_end_s, int64_t now_s,
                                        const DetectorOptions& options);

// Confidence from how far a factor clears the detector's threshold: 0.5 at the threshold,
// approaching 1 for large drops. A ranking aid for people, not a probability model.
double SeparationConfidence(double factor, double min_factor);

}  // namespace goodput::alerting
