#include "services/core/statistics.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"

namespace goodput::core {
namespace {

absl::Status CheckPaired(const std::vector<double>& x, const std::vector<double>& y,
                         size_t min_size) {
  if (x.size() != y.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("x has ", x.size(), " values but y has ", y.size()));
  }
  if (x.size() < min_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("need at least ", min_size, " pairs, got ", x.size()));
  }
  for (size_t i = 0; i < x.size(); ++i) {
    if (!std::isfinite(x[i])) {
      return absl::InvalidArgumentError(absl::StrCat("x[", i, "]=", x[i], " is not finite"));
    }
    if (!std::isfinite(y[i])) {
      return absl::InvalidArgumentError(absl::StrCat("y[", i, "]=", y[i], " is not finite"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

void RunningStats::Add(double value) {
  ++count_;
  const double delta = value - mean_;
  mean_ += delta / static_cast<double>(count_);
  m2_ += delta * (value - mean_);
  min_ = std::min(min_, value);
  max_ = std::max(max_, value);
}

void RunningStats::Merge(const RunningStats& other) {
  if (other.count_ == 0) return;
  if (count_ == 0) {
    *this = other;
    return;
  }
  const double n = static_cast<double>(count_ + other.count_);
  const double delta = other.mean_ - mean_;
  mean_ += delta * static_cast<double>(other.count_) / n;
  m2_ += other.m2_ +
         delta * delta * static_cast<double>(count_) * static_cast<double>(other.count_) / n;
  count_ += other.count_;
  min_ = std::min(min_, other.min_);
  max_ = std::max(max_, other.max_);
}

double RunningStats::variance() const {
  return count_ < 2 ? 0.0 : std::max(0.0, m2_) / static_cast<double>(count_ - 1);
}
double RunningStats::stddev() const { return std::sqrt(variance()); }
double RunningStats::population_variance() const {
  return count_ == 0 ? 0.0 : std::max(0.0, m2_) / static_cast<double>(count_);
}

absl::StatusOr<double> PearsonCorrelation(const std::vector<double>& x,
                                          const std::vector<double>& y) {
  if (absl::Status s = CheckPaired(x, y, 2); !s.ok()) return s;
  // Two-pass over centred values: stable for large offsets (e.g. percentages near 50).
  const double n = static_cast<double>(x.size());
  const double mx = std::accumulate(x.begin(), x.end(), 0.0) / n;
  const double my = std::accumulate(y.begin(), y.end(), 0.0) / n;
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double dx = x[i] - mx, dy = y[i] - my;
    sxy += dx * dy;
    sxx += dx * dx;
    syy += dy * dy;
  }
  if (sxx == 0 || syy == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(sxx == 0 ? "x" : "y", " is constant; the correlation is undefined"));
  }
  return std::clamp(sxy / std::sqrt(sxx * syy), -1.0, 1.0);
}

std::vector<double> AverageRanks(const std::vector<double>& values) {
  std::vector<size_t> order(values.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return values[a] < values[b]; });
  std::vector<double> ranks(values.size());
  size_t i = 0;
  while (i < order.size()) {
    size_t j = i;
    while (j + 1 < order.size() && values[order[j + 1]] == values[order[i]]) ++j;
    // Positions i..j (0-based) hold ranks i+1..j+1; each gets their average.
    const double rank = (static_cast<double>(i + 1) + static_cast<double>(j + 1)) / 2.0;
    for (size_t k = i; k <= j; ++k) ranks[order[k]] = rank;
    i = j + 1;
  }
  return ranks;
}

absl::StatusOr<double> SpearmanCorrelation(const std::vector<double>& x,
                                           const std::vector<double>& y) {
  if (absl::Status s = CheckPaired(x, y, 2); !s.ok()) return s;
  return PearsonCorrelation(AverageRanks(x), AverageRanks(y));
}

absl::StatusOr<double> MeanAbsoluteError(const std::vector<double>& x,
                                         const std::vector<double>& y) {
  if (absl::Status s = CheckPaired(x, y, 1); !s.ok()) return s;
  RunningStats abs_error;
  for (size_t i = 0; i < x.size(); ++i) abs_error.Add(std::abs(x[i] - y[i]));
  return abs_error.mean();
}

absl::StatusOr<double> FractionWithin(const std::vector<double>& x, const std::vector<double>& y,
                                      double k) {
  if (absl::Status s = CheckPaired(x, y, 1); !s.ok()) return s;
  if (!std::isfinite(k) || k < 0) {
    return absl::InvalidArgumentError(absl::StrCat("k=", k, " must be a finite value >= 0"));
  }
  int64_t within = 0;
  for (size_t i = 0; i < x.size(); ++i) within += std::abs(x[i] - y[i]) <= k ? 1 : 0;
  return static_cast<double>(within) / static_cast<double>(x.size());
}

absl::StatusOr<double> FractionBeyond(const std::vector<double>& x, const std::vector<double>& y,
                                      double k) {
  absl::StatusOr<double> within = FractionWithin(x, y, k);
  if (!within.ok()) return within.status();
  return 1.0 - *within;
}

namespace {

GroupStats Summarize(std::string label, int64_t min_gpus, std::optional<int64_t> max_gpus,
                     const std::vector<const JobComparison*>& jobs) {
  GroupStats g;
  g.label = std::move(label);
  g.min_gpu_count = min_gpus;
  g.max_gpu_count = max_gpus;
  g.job_count = static_cast<int64_t>(jobs.size());
  RunningStats mfu, ofu, err;
  std::vector<double> xs, ys;
  for (const JobComparison* j : jobs) {
    mfu.Add(j->mfu_percent);
    ofu.Add(j->ofu_percent);
    err.Add(std::abs(j->mfu_percent - j->ofu_percent));
    xs.push_back(j->mfu_percent);
    ys.push_back(j->ofu_percent);
  }
  g.mean_mfu_percent = mfu.mean();
  g.sd_mfu_percent = mfu.stddev();
  g.mean_ofu_percent = ofu.mean();
  g.sd_ofu_percent = ofu.stddev();
  g.mae_percent = err.mean();
  g.sd_abs_error_percent = err.stddev();
  if (absl::StatusOr<double> r = PearsonCorrelation(xs, ys); r.ok()) g.pearson_r = *r;
  return g;
}

}  // namespace

absl::StatusOr<FleetComparison> CompareMfuOfu(const std::vector<JobComparison>& jobs,
                                              const std::vector<int64_t>& group_lower_bounds) {
  if (jobs.empty()) return absl::InvalidArgumentError("jobs is empty");
  if (group_lower_bounds.empty() || group_lower_bounds.front() < 1) {
    return absl::InvalidArgumentError("group_lower_bounds must be non-empty and start >= 1");
  }
  for (size_t i = 1; i < group_lower_bounds.size(); ++i) {
    if (group_lower_bounds[i] <= group_lower_bounds[i - 1]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "group_lower_bounds[", i, "]=", group_lower_bounds[i], " is not above the previous"));
    }
  }
  std::vector<const JobComparison*> all;
  std::vector<std::vector<const JobComparison*>> by_group(group_lower_bounds.size());
  std::vector<double> mfu, ofu;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const JobComparison& j = jobs[i];
    if (j.gpu_count <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("jobs[", i, "].gpu_count=", j.gpu_count, " must be > 0"));
    }
    if (!std::isfinite(j.mfu_percent)) {
      return absl::InvalidArgumentError(
          absl::StrCat("jobs[", i, "].mfu_percent=", j.mfu_percent, " is not finite"));
    }
    if (!std::isfinite(j.ofu_percent)) {
      return absl::InvalidArgumentError(
          absl::StrCat("jobs[", i, "].ofu_percent=", j.ofu_percent, " is not finite"));
    }
    if (j.gpu_count < group_lower_bounds.front()) {
      return absl::InvalidArgumentError(absl::StrCat("jobs[", i, "].gpu_count=", j.gpu_count,
                                                     " is below the first group (",
                                                     group_lower_bounds.front(), ")"));
    }
    const size_t g = static_cast<size_t>(
        std::upper_bound(group_lower_bounds.begin(), group_lower_bounds.end(), j.gpu_count) -
        group_lower_bounds.begin() - 1);
    by_group[g].push_back(&j);
    all.push_back(&j);
    mfu.push_back(j.mfu_percent);
    ofu.push_back(j.ofu_percent);
  }
  FleetComparison out;
  out.overall = Summarize("all", group_lower_bounds.front(), std::nullopt, all);
  for (size_t g = 0; g < group_lower_bounds.size(); ++g) {
    const bool last = g + 1 == group_lower_bounds.size();
    std::optional<int64_t> max_gpus;
    if (!last) max_gpus = group_lower_bounds[g + 1] - 1;
    std::string label = last ? absl::StrCat(group_lower_bounds[g], "+")
                             : absl::StrCat(group_lower_bounds[g], "-", *max_gpus);
    out.groups.push_back(Summarize(std::move(label), group_lower_bounds[g], max_gpus, by_group[g]));
  }
  if (absl::StatusOr<double> rho = SpearmanCorrelation(mfu, ofu); rho.ok()) {
    out.spearman_rho = *rho;
  }
  out.fraction_within_10pp = *FractionWithin(mfu, ofu, 10);
  out.fraction_beyond_20pp = *FractionBeyond(mfu, ofu, 20);
  return out;
}

}  // namespace goodput::core
