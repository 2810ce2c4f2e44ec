// Reconciliation of what a framework reports (app MFU) with what the hardware did (OFU), per
// OFU window and per job. Pure code: no I/O, no clock, no protobuf.
//
// Every job-level OFU window gets the app MFU of the reports overlapping it, weighted by the
// overlap, so both figures cover exactly the window's interval. A window is paired when the
// reports cover enough of it; paired windows feed the divergence classifier
// (services/detect/divergence.h) for the job verdict and the per-interval verdicts. Changes
// of the reported precision mix are listed as precision switches.
//
//   absl::StatusOr<JobReconciliation> r = Reconcile(windows, reports, options);
//   if (r.ok() && r->divergence.job.verdict == detect::Verdict::kAppFlopsOvercount) ...
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "services/detect/divergence.h"

namespace goodput::mfu {

// A job-level OFU window as received from ofu. Times in microseconds since the epoch.
struct WindowInput {
  int64_t start_us = 0;
  int64_t end_us = 0;
  double ofu = 0;            // fraction
  double ofu_ci95_low = 0;   // fraction
  double ofu_ci95_high = 0;  // fraction
  double gpu_coverage = 0;   // 0..1
  int32_t gpus_allocated = 0;
  bool warmup = false;  // excluded from verdicts, still shown
};

// A report reduced to what reconciliation needs.
struct ReportInput {
  int64_t start_us = 0;
  int64_t end_us = 0;
  std::optional<double> app_mfu;  // unset while it cannot be computed (unknown GPU model)
  // Precision mix as (goodput.v1.Precision value, FLOPs share), sorted by precision; a single
  // precision is {p, 1}.
  std::vector<std::pair<int, double>> precision_mix;
  std::optional<double> peak_tflops;
  // The GPUs the report's figure is spread over when it says (total_throughput.gpu_count,
  // step_flops.gpu_count); 0 when it is per GPU of the job. A figure over fewer GPUs than the
  // window's allocation (a job of 7 ranks on 8 GPUs) is compared over the allocation, as OFU
  // is: app MFU x gpu_count / gpus_allocated, the framework's FLOPs over the GPUs that OFU
  // counts, so an idle GPU outside the framework's count is no FLOPs overcount.
  int32_t gpu_count = 0;
};

struct ReconcileOptions {
  // A window is paired when reports with app MFU cover at least this share of it.
  double min_report_coverage = 0.5;
  // Length of the per-interval verdicts, seconds.
  int64_t interval_s = 3600;
  detect::DivergenceOptions divergence;
};

// One window with both figures (when it has them).
struct PointResult {
  int64_t start_us = 0;
  int64_t end_us = 0;
  // Overlap-weighted mean of the reports' app MFU, over the window's allocated GPUs (see
  // ReportInput::gpu_count).
  std::optional<double> app_mfu;
  double ofu = 0;
  double ofu_ci95_low = 0;
  double ofu_ci95_high = 0;
  std::optional<double> difference_pp;  // (app_mfu - ofu) x 100
  std::optional<double> ratio;          // app_mfu / ofu, when ofu > 0
  double gpu_coverage = 0;
  int32_t gpus_allocated = 0;
  int32_t report_count = 0;                // reports overlapping the window
  bool paired = false;                     // used by the classifier
  std::optional<detect::Verdict> verdict;  // of the interval holding the window, if paired
};

struct PrecisionSwitchResult {
  int64_t time_us = 0;  // start of the first report with the new mix
  std::vector<std::pair<int, double>> before;
  std::vector<std::pair<int, double>> after;
  std::optional<double> peak_tflops_before;
  std::optional<double> peak_tflops_after;
};

struct JobReconciliation {
  std::vector<PointResult> points;  // one per window, in time order
  detect::JobDivergence divergence;
  std::vector<PrecisionSwitchResult> switches;  // in time order
};

// Reconciles one job. Windows and reports in any order. Errors are the classifier's
// (INVALID_ARGUMENT for values it cannot use).
absl::StatusOr<JobReconciliation> Reconcile(std::vector<WindowInput> windows,
                                            std::vector<ReportInput> reports,
                                            const ReconcileOptions& options = {});

}  // namespace goodput::mfu
