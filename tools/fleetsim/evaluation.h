#pragma once
// Evaluation harness: runs the detectors on a simulated fleet the way the services would (OFU
// windows from the core library, regression detectors per job, workload baselines across jobs,
// divergence verdicts at job end, idle/straggler findings) and scores them against the
// simulator's ground truth.
//
//   EvaluationResult r = EvaluateFleet(HeldOutFleetConfig(7)).value();
//   std::cout << FormatEvaluationTable({r});

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "services/detect/divergence.h"
#include "services/detect/findings.h"
#include "services/detect/regression.h"
#include "tools/fleetsim/fleet_sim.h"

namespace goodput::sim {

struct EvaluationOptions {
  detect::RegressionOptions regression;
  detect::BaselineOptions baseline;
  detect::DivergenceOptions divergence;
  detect::FindingsOptions findings;
  double eligible_min_factor = 1.5;  // drops scored for recall
  int64_t eligible_min_duration_s = 600;
  int64_t match_slack_s = 900;  // an event this far from an injected drop matches it
  std::string trace_job_id;     // notes every window of this job (for debugging)
};

struct VerdictTally {
  int jobs = 0;
  int right_verdict = 0;
  int right_cause = 0;  // verdict and top cause both right
  int insufficient = 0;
};

// How windows reach goodput-alerting, for the delivery rows: window by window as the job
// runs; in 30-minute bursts (an agent catching up after an outage), the last one before the
// job's EndJob; and in 30-minute bursts with EndJob sent at the job's end without waiting,
// so that the last burst and mfu's verdict are evaluated after the job ended.
enum class Delivery { kLive = 0, kBursts = 1, kEarlyEnd = 2 };
inline constexpr int kDeliveryModes = 3;
inline constexpr int kBurstWindows = 30;

// What goodput-alerting's detector state and lifecycle (services/alerting job_evaluator.h,
// alert_lifecycle.h) make of a fleet delivered one way: alerts opened, and findings recorded
// already resolved.
struct DeliveryTally {
  int drops_detected = 0;  // eligible in-job drops with an alert
  int debug_detected = 0;  // debug-flag jobs with a workload alert (of those with a baseline)
  int false_alarms = 0;    // regression alerts that match nothing injected
  int miscounts_found = 0;  // jobs with an injected miscount and an alert with its verdict
  int miscount_jobs = 0;    // jobs with an injected miscount that report MFU
  int miscount_false = 0;   // divergence alerts on jobs without a miscount, or the wrong way
  int recorded_resolved = 0;  // alerts recorded already resolved
  int found_after_end = 0;    // ... of them confirmed after the job's end
};

struct EvaluationResult {
  std::string config_name;
  uint64_t seed = 0;
  int jobs = 0;
  double job_hours = 0;
  double gpu_hours = 0;
  // Regressions inside jobs.
  int drops_eligible = 0;
  int drops_detected = 0;
  std::vector<double> drop_delays_s;
  std::vector<double> drop_factors;  // the injected factor of each delay above
  int window_s = 60;
  // Drops that recovered before they were confirmed (transient slowdowns): recorded, and
  // of them those on an injected drop too short (or shallow) to be eligible; the rest are
  // the jobs' phases (evaluation passes, their edges) recorded as slowdowns.
  int transients_recorded = 0;
  int transients_on_injected = 0;
  int short_drops = 0;  // injected drops >= 1.5x lasting 2 to 10 minutes
  // New jobs bad from the start, against their workload's baseline.
  int debug_jobs = 0;
  int debug_jobs_with_baseline = 0;
  int debug_detected = 0;
  std::vector<double> debug_delays_s;
  // Alarms that match nothing injected.
  int false_alarms_in_job = 0;
  int false_alarms_baseline = 0;
  // Precision switches: injected, and detector events annotated as such.
  int precision_switches = 0;
  int precision_annotations = 0;
  // Divergence verdicts by miscount case ("none", "moe_latent_projection", ...).
  std::map<std::string, VerdictTally> verdicts;
  // Job-window OFU against the simulator's truth, percentage points.
  int64_t ofu_windows = 0;
  double ofu_abs_error_mean_pp = 0;
  double ofu_abs_error_p95_pp = 0;
  double ofu_abs_error_max_pp = 0;
  double ofu_ci_coverage = 0;  // share of windows whose 95% CI holds the truth
  // Idle and straggler findings.
  int idle_injected = 0, idle_found = 0, idle_false = 0;
  int straggler_injected = 0, straggler_found = 0, straggler_false = 0;

  // The same fleet through alerting's detector state and lifecycle, per delivery.
  DeliveryTally delivery[kDeliveryModes] = {};

  // What went wrong, for a human (first few false alarms and misses).
  std::vector<std::string> notes;

  double Recall() const;  // drops + debug jobs with a baseline
  double FalseAlarmsPer1000JobHours() const;
  double MedianDelayS() const;
  double P95DelayS() const;
};

// Simulates the fleet of `config` and scores the detectors on it.
absl::StatusOr<EvaluationResult> EvaluateFleet(const FleetConfig& config,
                                               const EvaluationOptions& options = {});

// Sums results (e.g. several seeds) into one row named `name`.
EvaluationResult CombineResults(const std::vector<EvaluationResult>& results,
                                const std::string& name);

// The human table the harness prints: one row per result, then verdicts by case.
std::string FormatEvaluationTable(const std::vector<EvaluationResult>& results);
// Detection delay of in-job drops by depth, in windows from the onset (p50, p95, max), with
// the transient slowdowns recorded.
std::string FormatDelayTable(const EvaluationResult& total);
// One row per delivery of `total`: recall, false alarms per 1,000 job-hours, miscount
// verdicts, findings recorded resolved and found after the job's end.
std::string FormatDeliveryTable(const EvaluationResult& total);
// Recall of one delivery (drops + debug-flag jobs with a baseline), and its false alarms per
// 1,000 job-hours.
double DeliveryRecall(const EvaluationResult& r, Delivery d);
double DeliveryFalseAlarmsPer1000JobHours(const EvaluationResult& r, Delivery d);

}  // namespace goodput::sim
