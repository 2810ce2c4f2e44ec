#include "services/detect/robust_stats.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace goodput::detect {

double Median(std::span<const double> values) {
  if (values.empty()) return 0;
  std::vector<double> v(values.begin(), values.end());
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + mid, v.end());
  const double upper = v[mid];
  if (v.size() % 2 == 1) return upper;
  const double lower = *std::max_element(v.begin(), v.begin() + mid);
  return 0.5 * (lower + upper);
}

double MedianAbsDeviation(std::span<const double> values, double center) {
  std::vector<double> dev;
  dev.reserve(values.size());
  for (double x : values) dev.push_back(std::abs(x - center));
  return Median(dev);
}

void FractionHistogram::Add(double fraction) {
  if (!std::isfinite(fraction)) return;
  int bin = static_cast<int>(fraction / kBinWidth);
  bin = std::clamp(bin, 0, kBins - 1);
  ++bins_[bin];
  ++count_;
}

double FractionHistogram::Quantile(double q) const {
  if (count_ == 0) return 0;
  const double target = std::clamp(q, 0.0, 1.0) * static_cast<double>(count_);
  int64_t seen = 0;
  for (int i = 0; i < kBins; ++i) {
    if (bins_[i] == 0) continue;
    if (static_cast<double>(seen + bins_[i]) >= target) {
      // Interpolate inside the bin.
      const double within = (target - static_cast<double>(seen)) / static_cast<double>(bins_[i]);
      return (i + std::clamp(within, 0.0, 1.0)) * kBinWidth;
    }
    seen += bins_[i];
  }
  return kBins * kBinWidth;
}

double FractionHistogram::MedianAbsDeviation() const {
  if (count_ == 0) return 0;
  const double median = Quantile(0.5);
  // Deviations binned at the same resolution.
  std::array<int64_t, kBins> dev{};
  for (int i = 0; i < kBins; ++i) {
    if (bins_[i] == 0) continue;
    const double center = (i + 0.5) * kBinWidth;
    int d = static_cast<int>(std::abs(center - median) / kBinWidth);
    dev[std::clamp(d, 0, kBins - 1)] += bins_[i];
  }
  const double target = 0.5 * static_cast<double>(count_);
  int64_t seen = 0;
  for (int i = 0; i < kBins; ++i) {
    seen += dev[i];
    if (static_cast<double>(seen) >= target) return (i + 0.5) * kBinWidth;
  }
  return 0;
}

}  // namespace goodput::detect
