#pragma once
// Small robust-statistics helpers shared by the detectors: median and MAD of a small sample,
// and a fixed-memory histogram for medians of unbounded streams of OFU values.

#include <array>
#include <cstdint>
#include <span>

namespace goodput::detect {

// Median of `values` (copied; NaN-free input). 0 for an empty input.
double Median(std::span<const double> values);

// Median absolute deviation around `center` (unscaled). 0 for an empty input.
double MedianAbsDeviation(std::span<const double> values, double center);

// Streaming median of fractions in [0, 1.5] with 0.1 pp resolution and fixed memory (~12 KiB),
// so a job of any length summarizes in bounded space.
struct StateCodec;

class FractionHistogram {
  friend struct StateCodec;

 public:
  void Add(double fraction);
  int64_t count() const { return count_; }
  // Value below which `q` of the added values lie (q in [0, 1]); 0 when empty.
  double Quantile(double q) const;
  // Median absolute deviation around the median, from the histogram.
  double MedianAbsDeviation() const;

 private:
  static constexpr int kBins = 1500;
  static constexpr double kBinWidth = 1.5 / kBins;
  std::array<int64_t, kBins> bins_{};
  int64_t count_ = 0;
};

}  // namespace goodput::detect
