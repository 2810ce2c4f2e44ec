// The fleet view of app MFU against OFU (the paper's comparison over hundreds of jobs): how
// well the two agree across jobs, by GPU-count group, with and without the jobs whose
// verdict is a FLOPs miscount. Pure code over per-job figures; the statistics are the core
// library's (services/core/statistics.h).
//
//   absl::StatusOr<FleetReport> r = BuildFleetReport(jobs, {8, 64, 256, 768});
//   r->overall.pearson_r; r->excluding_miscounts.pearson_r; r->groups[2].mae_pp;
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "services/detect/divergence.h"

namespace goodput::mfu {

// One job's whole-range figures.
struct FleetJob {
  std::string cluster;
  std::string job_id;
  int64_t gpu_count = 0;
  double app_mfu = 0;  // fraction, time-weighted over the job's paired windows
  double ofu = 0;      // fraction, over the same windows
  detect::Verdict verdict = detect::Verdict::kInsufficientEvidence;
  std::optional<detect::Cause> top_cause;
};

// Statistics over a set of jobs (one row of Table III, or the whole fleet).
struct FleetStatsResult {
  int64_t min_gpu_count = 0;
  int64_t max_gpu_count = 0;  // inclusive; 0: unbounded
  int64_t job_count = 0;
  double mfu_mean = 0, mfu_sd = 0;  // fractions
  double ofu_mean = 0, ofu_sd = 0;  // fractions
  double mae_pp = 0, abs_error_sd_pp = 0;
  std::optional<double> pearson_r;     // unset with fewer than 3 jobs or zero variance
  std::optional<double> spearman_rho;  // likewise
  double share_within_10pp = 0;
  double share_beyond_20pp = 0;
};

// Fewest jobs for a correlation to be reported.
inline constexpr int64_t kMinJobsForCorrelation = 3;

// Statistics of `jobs` (all of them; the GPU-count bounds are only copied to the result).
FleetStatsResult ComputeFleetStats(const std::vector<FleetJob>& jobs, int64_t min_gpu_count = 0,
                                   int64_t max_gpu_count = 0);

// True for the verdicts the paper excludes to get the "after miscounts" correlation.
bool IsMiscount(detect::Verdict verdict);

struct FleetReport {
  FleetStatsResult overall;
  FleetStatsResult excluding_miscounts;
  int64_t miscount_job_count = 0;
  std::vector<FleetStatsResult> groups;  // one per lower bound, empty groups included
};

// The report over `jobs`. `group_lower_bounds` must be strictly increasing and >= 1
// (INVALID_ARGUMENT naming the offending bound); jobs below the first bound are counted
// overall but in no group.
absl::StatusOr<FleetReport> BuildFleetReport(const std::vector<FleetJob>& jobs,
                                             const std::vector<int64_t>& group_lower_bounds);

}  // namespace goodput::mfu
