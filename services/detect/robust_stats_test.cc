#include "services/detect/robust_stats.h"

#include <vector>

#include "gtest/gtest.h"

namespace goodput::detect {
namespace {

TEST(RobustStats, MedianOfOddAndEvenSamples) {
  std::vector<double> odd = {3, 1, 2};
  std::vector<double> even = {4, 1, 3, 2};
  EXPECT_DOUBLE_EQ(Median(odd), 2);
  EXPECT_DOUBLE_EQ(Median(even), 2.5);
  EXPECT_DOUBLE_EQ(Median(std::vector<double>{}), 0);
}

TEST(RobustStats, MadIgnoresOneOutlier) {
  std::vector<double> v = {1, 1, 2, 2, 4, 6, 9, 1000};
  EXPECT_DOUBLE_EQ(MedianAbsDeviation(v, Median(v)), 2);  // deviations from 3
}

TEST(RobustStats, HistogramMedianWithinItsResolution) {
  FractionHistogram h;
  for (int i = 0; i < 1000; ++i) h.Add(0.30 + 0.0001 * (i % 100));
  for (int i = 0; i < 200; ++i) h.Add(0.0);  // checkpoints
  EXPECT_NEAR(h.Quantile(0.5), 0.305, 0.002);
  EXPECT_EQ(h.count(), 1200);
  EXPECT_LT(h.MedianAbsDeviation(), 0.01);
}

}  // namespace
}  // namespace goodput::detect
