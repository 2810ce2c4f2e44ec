// Statistics for comparing application MFU with OFU across jobs and over time.
//
// Pearson and Spearman correlation, mean absolute error, the share of pairs within k points,
// a Welford streaming mean/variance for online use, and the grouped fleet report of the
// paper's Table III (per GPU-count group: jobs, mean MFU ± sd, mean OFU ± sd, MAE ± sd).
// Inputs are plain vectors; NaN or infinite values are refused with their index rather than
// silently propagated.
//
//   absl::StatusOr<double> r = PearsonCorrelation(mfu_percent, ofu_percent);
//   absl::StatusOr<FleetComparison> report = CompareMfuOfu(jobs);
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace goodput::core {

// Welford's streaming mean and variance: numerically stable, O(1) memory, mergeable.
class RunningStats {
 public:
  void Add(double value);
  // Combines with stats over a disjoint set of values (parallel merge).
  void Merge(const RunningStats& other);

  int64_t count() const { return count_; }
  // Mean; 0 when empty.
  double mean() const { return mean_; }
  // Sample variance (n - 1); 0 when count < 2.
  double variance() const;
  double stddev() const;
  // Population variance (n); 0 when empty.
  double population_variance() const;
  double min() const { return min_; }  // +inf when empty
  double max() const { return max_; }  // -inf when empty

 private:
  int64_t count_ = 0;
  double mean_ = 0;
  double m2_ = 0;
  double min_ = std::numeric_limits<double>::infinity();
  double max_ = -std::numeric_limits<double>::infinity();
};

// Pearson's r. INVALID_ARGUMENT if the sizes differ, n < 2, a value is not finite (names the
// vector and index), or either vector is constant (r undefined).
absl::StatusOr<double> PearsonCorrelation(const std::vector<double>& x,
                                          const std::vector<double>& y);

// Ranks 1..n, ties getting the average of the ranks they span ([10, 20, 20, 30] ->
// [1, 2.5, 2.5, 4]). Values must be finite (not checked).
std::vector<double> AverageRanks(const std::vector<double>& values);

// Spearman's rho: Pearson's r of the average ranks. Same errors as PearsonCorrelation.
absl::StatusOr<double> SpearmanCorrelation(const std::vector<double>& x,
                                           const std::vector<double>& y);

// Mean of |x_i - y_i|. INVALID_ARGUMENT for different sizes, empty input, non-finite values.
absl::StatusOr<double> MeanAbsoluteError(const std::vector<double>& x,
                                         const std::vector<double>& y);

// Share (0..1) of pairs with |x_i - y_i| <= k. Same errors as MeanAbsoluteError, plus k < 0.
absl::StatusOr<double> FractionWithin(const std::vector<double>& x, const std::vector<double>& y,
                                      double k);

// Share (0..1) of pairs with |x_i - y_i| > k (the complement of FractionWithin).
absl::StatusOr<double> FractionBeyond(const std::vector<double>& x, const std::vector<double>& y,
                                      double k);

// One job's whole-run figures, in percent (25.1 means 25.1%).
struct JobComparison {
  int64_t gpu_count = 0;
  double mfu_percent = 0;
  double ofu_percent = 0;
};

// A GPU-count group of the fleet report. Standard deviations are sample (n - 1) ones.
struct GroupStats {
  std::string label;                     // "8-63", "768+"
  int64_t min_gpu_count = 0;             // inclusive
  std::optional<int64_t> max_gpu_count;  // inclusive; nullopt for the open last group
  int64_t job_count = 0;
  double mean_mfu_percent = 0, sd_mfu_percent = 0;
  double mean_ofu_percent = 0, sd_ofu_percent = 0;
  double mae_percent = 0, sd_abs_error_percent = 0;
  std::optional<double> pearson_r;  // nullopt when undefined (n < 2 or constant)
};

struct FleetComparison {
  GroupStats overall;              // label "all"
  std::vector<GroupStats> groups;  // one per boundary, empty groups included
  std::optional<double> spearman_rho;
  double fraction_within_10pp = 0;
  double fraction_beyond_20pp = 0;
};

// Lower bounds of the default GPU-count groups: 1-63, 64-255, 256-767, 768+.
inline const std::vector<int64_t>& DefaultGpuCountGroups() {
  static const std::vector<int64_t>* const kGroups = new std::vector<int64_t>{1, 64, 256, 768};
  return *kGroups;
}

// The Table III report. `group_lower_bounds` must be strictly increasing and start >= 1;
// a job below the first bound is INVALID_ARGUMENT, as are an empty job list, gpu_count <= 0
// and non-finite percentages (the message names the job index and field).
absl::StatusOr<FleetComparison> CompareMfuOfu(
    const std::vector<JobComparison>& jobs,
    const std::vector<int64_t>& group_lower_bounds = DefaultGpuCountGroups());

}  // namespace goodput::core
