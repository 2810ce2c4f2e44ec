#include "services/detect/serving_efficiency.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"

namespace goodput::detect {
namespace {

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

double BusyGpuSecondsPerToken(const ServingWindow& w, const ServingGateOptions& options) {
  if (!(w.tokens_per_s >= options.min_tokens_per_s) || w.gpu_count <= 0) return -1;
  const double busy = w.gpu_busy >= 0 ? w.gpu_busy : w.ofu;
  return busy * w.gpu_count / w.tokens_per_s;
}

ServingVerdict JudgeServing(const std::vector<ServingWindow>& reference,
                            const std::vector<ServingWindow>& recent,
                            const ServingGateOptions& options) {
  ServingVerdict v;
  std::vector<double> recent_load, recent_cost, recent_ofu;
  for (const ServingWindow& w : recent) {
    const double cost = BusyGpuSecondsPerToken(w, options);
    if (cost < 0) continue;
    recent_load.push_back(w.tokens_per_s);
    recent_cost.push_back(cost);
    recent_ofu.push_back(w.ofu);
  }
  if (recent_cost.empty()) {
    v.annotation = "the service served no tokens in the recent windows: nothing to compare";
    return v;
  }
  v.load_after = Median(recent_load);
  v.cost_after = Median(recent_cost);
  std::vector<double> ref_cost, ref_load, all_ofu;
  for (const ServingWindow& w : reference) {
    const double cost = BusyGpuSecondsPerToken(w, options);
    if (cost < 0) continue;
    all_ofu.push_back(w.ofu);
    const double ratio =
        std::max(w.tokens_per_s, v.load_after) / std::min(w.tokens_per_s, v.load_after);
    if (ratio > options.comparable_load) continue;
    ref_cost.push_back(cost);
    ref_load.push_back(w.tokens_per_s);
  }
  v.comparable_windows = static_cast<int>(ref_cost.size());
  if (v.comparable_windows < options.min_reference_windows) {
    v.annotation = absl::StrFormat(
        "load moved to %.0f tokens/s, which the service had not served before (%d comparable "
        "windows): OFU %.0f%% -> %.0f%% follows the load, not a regression",
        v.load_after, v.comparable_windows, 100 * Median(all_ofu), 100 * Median(recent_ofu));
    return v;
  }
  v.load_before = Median(ref_load);
  v.cost_before = Median(ref_cost);
  v.factor = v.cost_before > 0 ? v.cost_after / v.cost_before : 0;
  if (v.factor >= options.min_factor) {
    v.kind = ServingVerdict::Kind::kSlowerPerToken;
    const double midpoint = std::sqrt(v.cost_before * v.cost_after);
    for (const ServingWindow& w : recent) {
      if (BusyGpuSecondsPerToken(w, options) >= midpoint) {
        v.onset_s = w.start_s;
        break;
      }
    }
    v.annotation = absl::StrFormat(
        "busy GPU-seconds per token rose %.2fx (%.3g -> %.3g ms) at a comparable load "
        "(%.0f vs %.0f tokens/s)",
        v.factor, 1000 * v.cost_before, 1000 * v.cost_after, v.load_before, v.load_after);
    return v;
  }
  const double all_ofu_median = Median(all_ofu);
  const double recent_ofu_median = Median(recent_ofu);
  v.kind = recent_ofu_median * options.min_factor <= all_ofu_median
               ? ServingVerdict::Kind::kLoadExplained
               : ServingVerdict::Kind::kSteady;
  v.annotation = absl::StrFormat(
      "busy GPU-seconds per token steady (%.2fx) at %.0f tokens/s; OFU %.0f%% -> %.0f%% "
      "follows the load",
      v.factor, v.load_after, 100 * all_ofu_median, 100 * recent_ofu_median);
  return v;
}

ServingRegressionDetector::ServingRegressionDetector(ServingGateOptions options, int test_windows,
                                                     int reference_windows)
    : options_(options),
      test_windows_(static_cast<size_t>(std::max(1, test_windows))),
      reference_windows_(static_cast<size_t>(std::max(1, reference_windows))) {}

std::optional<ServingVerdict> ServingRegressionDetector::Add(const ServingWindow& w) {
  test_.push_back(w);
  if (test_.size() > test_windows_) {
    if (!open_) {
      reference_.push_back(test_.front());
      if (reference_.size() > reference_windows_) reference_.pop_front();
    }
    test_.pop_front();
  }
  if (test_.size() < test_windows_) return std::nullopt;
  last_ =
      JudgeServing({reference_.begin(), reference_.end()}, {test_.begin(), test_.end()}, options_);
  if (!open_ && last_.is_regression()) {
    open_ = true;
    return last_;
  }
  if (open_ && (last_.kind == ServingVerdict::Kind::kSteady ||
                last_.kind == ServingVerdict::Kind::kLoadExplained)) {
    open_ = false;
    return last_;
  }
  return std::nullopt;
}

}  // namespace goodput::detect
