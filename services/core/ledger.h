// The goodput ledger of one job: where its allocated GPU-hours went, by cause, the parts
// summing to the allocation. Pure: alerting's engine (services/alerting/alert_engine.h
// Ledger) replays the job's windows through its detectors and hands over the windows and the
// conditions they found; reports carry it (goodput.v1.GoodputLedger) and digests sum it.
//
// Each job-level window's allocated GPU-hours (GPUs allocated x its length) split, in order:
//   silent_gpus   allocated GPUs that sent nothing in the window (fallen off the bus, a host
//                 that stopped, a GPU that never reported)
//   hung / job_idle
//                 every reporting GPU, in a window of a hung job (every GPU stopped
//                 computing with its memory held) or of a job gone idle
//   idle_gpus     reporting GPUs whose activity stayed ~0 through the window
//   warmup        the other GPUs, in a warm-up window (ofu's warm-up flag)
//   regression    in a window of an in-job regression: the GPU-hours the drop cost, the
//                 share 1 - OFU / the job's steady OFU before it (its own level, not a peak)
//   transient     the same for a drop that recovered before it was confirmed
//   below_workload_baseline
//                 what is left, when the job's steady level is below its workload's earlier
//                 jobs (a regression_vs_workload finding): the share 1 - level / baseline
//   productive    what is left: GPU-hours at the job's own steady efficiency
// and the allocation no window covers (the job's GPUs x its time, less the windows) is
// no_telemetry. OFU itself is not a cause here: effective GPU-hours (x OFU) are the
// summary's; this ledger says which hours did the job's work at its own level.
//
//   JobLedgerInput in{.allocated_gpu_hours = 8 * 24.0, .windows = ..., .causes = ...};
//   JobLedger l = BuildJobLedger(in);  // l.Sum() == l.allocated_gpu_hours
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace goodput::core {

// One job-level window, as ofu computed it.
struct LedgerWindow {
  int64_t start_s = 0;
  int64_t end_s = 0;
  int gpus_allocated = 0;
  int gpus_reporting = 0;
  int idle_gpus = 0;
  bool warmup = false;
  double ofu = 0;  // over the reporting GPUs
};

// A condition the detectors found over [from_s, to_s).
struct LedgerCause {
  enum class Kind { kHung, kJobIdle, kRegression, kTransient, kBelowWorkload };
  Kind kind = Kind::kRegression;
  int64_t from_s = 0;
  int64_t to_s = 0;
  // Regression and transient: the job's OFU before the drop; below-workload: the workload's
  // baseline OFU. The level a window is measured against.
  double reference_ofu = 0;
  // Regression without a known level before (an inference service's per-token regression):
  // the drop's factor (before / after), applied to every window of it.
  double factor = 0;
};

struct JobLedgerInput {
  // The job's GPUs x the time it held them; 0 when unknown (the windows' allocation then).
  double allocated_gpu_hours = 0;
  std::vector<LedgerWindow> windows;  // in time order
  std::vector<LedgerCause> causes;
};

// A drop that recovered before it was confirmed (a kTransient cause), as the ledger counted
// it: what its windows cost at the job's level before it.
struct LedgerTransient {
  int64_t onset_s = 0;
  int64_t end_s = 0;
  double before_ofu = 0;  // the job's OFU before the drop
  double factor = 0;      // before / during
  double lost_gpu_hours = 0;
};

struct JobLedger {
  double allocated_gpu_hours = 0;
  double productive = 0;
  double idle_gpus = 0;
  double silent_gpus = 0;
  double hung = 0;
  double job_idle = 0;
  double warmup = 0;
  double regression = 0;
  double transient = 0;
  double below_workload_baseline = 0;
  double no_telemetry = 0;
  // The share of the allocation the windows cover, in [0, 1].
  double coverage = 0;
  // Transient slowdowns in the windows: how many (AddLedger sums them) and, for one job, each
  // in time order (a sum keeps none).
  int transient_slowdowns = 0;
  std::vector<LedgerTransient> transients = {};

  double Sum() const {
    return productive + idle_gpus + silent_gpus + hung + job_idle + warmup + regression +
           transient + below_workload_baseline + no_telemetry;
  }
};

JobLedger BuildJobLedger(const JobLedgerInput& in);

// Adds `part` to `sum`, part by part; the coverage is the allocation-weighted mean.
void AddLedger(const JobLedger& part, JobLedger& sum);

// The ledger in words, its non-zero parts (0.01 GPU-hour and up) in ledger order with their
// share of the allocation: "3.10 productive (46.5%), 0.17 idle GPUs (2.5%), ...", the
// transient slowdowns with their count ("0.42 in 3 transient slowdowns (1.2%)").
std::string LedgerWords(const JobLedger& ledger);

}  // namespace goodput::core
