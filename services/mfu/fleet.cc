#include "services/mfu/fleet.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "services/core/statistics.h"

namespace goodput::mfu {

bool IsMiscount(detect::Verdict verdict) {
  return verdict == detect::Verdict::kAppFlopsOvercount ||
         verdict == detect::Verdict::kAppFlopsUndercount;
}

FleetStatsResult ComputeFleetStats(const std::vector<FleetJob>& jobs, int64_t min_gpu_count,
                                   int64_t max_gpu_count) {
  FleetStatsResult out;
  out.min_gpu_count = min_gpu_count;
  out.max_gpu_count = max_gpu_count;
  out.job_count = static_cast<int64_t>(jobs.size());
  if (jobs.empty()) return out;
  // The core statistics take percent, as the paper's tables do.
  std::vector<double> mfu_pct, ofu_pct;
  core::RunningStats mfu, ofu, abs_error;
  for (const FleetJob& j : jobs) {
    mfu_pct.push_back(j.app_mfu * 100);
    ofu_pct.push_back(j.ofu * 100);
    mfu.Add(j.app_mfu);
    ofu.Add(j.ofu);
    abs_error.Add(std::abs(j.app_mfu - j.ofu) * 100);
  }
  out.mfu_mean = mfu.mean();
  out.mfu_sd = mfu.stddev();
  out.ofu_mean = ofu.mean();
  out.ofu_sd = ofu.stddev();
  if (absl::StatusOr<double> mae = core::MeanAbsoluteError(mfu_pct, ofu_pct); mae.ok()) {
    out.mae_pp = *mae;
  }
  out.abs_error_sd_pp = abs_error.stddev();
  if (absl::StatusOr<double> f = core::FractionWithin(mfu_pct, ofu_pct, 10); f.ok()) {
    out.share_within_10pp = *f;
  }
  if (absl::StatusOr<double> f = core::FractionBeyond(mfu_pct, ofu_pct, 20); f.ok()) {
    out.share_beyond_20pp = *f;
  }
  if (out.job_count >= kMinJobsForCorrelation) {
    // Undefined (a constant figure) leaves them unset.
    if (absl::StatusOr<double> r = core::PearsonCorrelation(mfu_pct, ofu_pct); r.ok()) {
      out.pearson_r = *r;
    }
    if (absl::StatusOr<double> r = core::SpearmanCorrelation(mfu_pct, ofu_pct); r.ok()) {
      out.spearman_rho = *r;
    }
  }
  return out;
}

absl::StatusOr<FleetReport> BuildFleetReport(const std::vector<FleetJob>& jobs,
                                             const std::vector<int64_t>& group_lower_bounds) {
  for (size_t i = 0; i < group_lower_bounds.size(); ++i) {
    if (group_lower_bounds[i] < 1 ||
        (i > 0 && group_lower_bounds[i] <= group_lower_bounds[i - 1])) {
      return absl::InvalidArgumentError(
          absl::StrCat("gpu_count_group_lower_bounds[", i, "]=", group_lower_bounds[i],
                       " must be at least 1 and above the bound before it"));
    }
  }
  FleetReport report;
  report.overall = ComputeFleetStats(jobs);
  std::vector<FleetJob> kept;
  for (const FleetJob& j : jobs) {
    if (IsMiscount(j.verdict)) {
      ++report.miscount_job_count;
    } else {
      kept.push_back(j);
    }
  }
  report.excluding_miscounts = ComputeFleetStats(kept);
  for (size_t i = 0; i < group_lower_bounds.size(); ++i) {
    const int64_t low = group_lower_bounds[i];
    const int64_t high = i + 1 < group_lower_bounds.size() ? group_lower_bounds[i + 1] - 1 : 0;
    std::vector<FleetJob> group;
    for (const FleetJob& j : jobs) {
      if (j.gpu_count >= low && (high == 0 || j.gpu_count <= high)) group.push_back(j);
    }
    report.groups.push_back(ComputeFleetStats(group, low, high));
  }
  return report;
}

}  // namespace goodput::mfu
