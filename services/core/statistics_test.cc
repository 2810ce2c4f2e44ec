#include "services/core/statistics.h"

#include <cmath>
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace goodput::core {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(RunningStats, MatchesTextbookValuesAndIsStableAtLargeOffsets) {
  RunningStats s;
  for (double v : {4.0, 7.0, 13.0, 16.0}) s.Add(v);
  EXPECT_DOUBLE_EQ(s.mean(), 10);
  EXPECT_DOUBLE_EQ(s.variance(), 30);
  EXPECT_DOUBLE_EQ(s.population_variance(), 22.5);
  EXPECT_EQ(s.min(), 4);
  EXPECT_EQ(s.max(), 16);

  // The naive sum-of-squares formula loses everything here; Welford does not.
  RunningStats big;
  for (double v : {4.0, 7.0, 13.0, 16.0}) big.Add(1e9 + v);
  EXPECT_NEAR(big.variance(), 30, 1e-6);
}

TEST(RunningStats, EmptyAndSingleValue) {
  RunningStats s;
  EXPECT_EQ(s.count(), 0);
  EXPECT_EQ(s.mean(), 0);
  EXPECT_EQ(s.variance(), 0);
  s.Add(3.5);
  EXPECT_EQ(s.mean(), 3.5);
  EXPECT_EQ(s.variance(), 0);
  EXPECT_EQ(s.stddev(), 0);
}

TEST(RunningStats, MergeEqualsOnePass) {
  RunningStats a, b, all;
  for (int i = 0; i < 100; ++i) {
    const double v = std::sin(i) * 10 + i;
    (i < 37 ? a : b).Add(v);
    all.Add(v);
  }
  a.Merge(b);
  EXPECT_EQ(a.count(), 100);
  EXPECT_NEAR(a.mean(), all.mean(), 1e-12);
  EXPECT_NEAR(a.variance(), all.variance(), 1e-9);
  EXPECT_EQ(a.min(), all.min());
  RunningStats empty;
  empty.Merge(all);
  EXPECT_EQ(empty.count(), 100);
}

TEST(Correlation, PearsonKnownValue) {
  // sxy = 6, sxx = 10, syy = 6: r = 6 / sqrt(60).
  EXPECT_NEAR(*PearsonCorrelation({1, 2, 3, 4, 5}, {2, 4, 5, 4, 5}), 6 / std::sqrt(60.0), 1e-12);
  EXPECT_NEAR(*PearsonCorrelation({1, 2, 3}, {3, 2, 1}), -1, 1e-12);
  EXPECT_NEAR(*PearsonCorrelation({1, 2, 3}, {10, 20, 30}), 1, 1e-12);
}

TEST(Correlation, SpearmanRanksTiesByAverage) {
  EXPECT_THAT(AverageRanks({10, 20, 20, 30}), ElementsAre(1, 2.5, 2.5, 4));
  EXPECT_THAT(AverageRanks({5, 1, 5, 5}), ElementsAre(3, 1, 3, 3));
  // y ranks [1, 2.5, 4.5, 2.5, 4.5]: sxy = 7, sxx = 10, syy = 9.
  EXPECT_NEAR(*SpearmanCorrelation({1, 2, 3, 4, 5}, {2, 4, 5, 4, 5}), 7 / std::sqrt(90.0), 1e-12);
  // Monotone but non-linear: Spearman 1, Pearson below 1.
  EXPECT_NEAR(*SpearmanCorrelation({1, 2, 3, 4}, {1, 8, 27, 64}), 1, 1e-12);
  EXPECT_LT(*PearsonCorrelation({1, 2, 3, 4}, {1, 8, 27, 64}), 1 - 1e-3);
}

TEST(Correlation, RefusesUndefinedCases) {
  EXPECT_THAT(PearsonCorrelation({1}, {2}).status().message(), HasSubstr("at least 2"));
  EXPECT_THAT(PearsonCorrelation({}, {}).status().message(), HasSubstr("at least 2"));
  EXPECT_THAT(PearsonCorrelation({1, 2}, {1, 2, 3}).status().message(), HasSubstr("x has 2"));
  EXPECT_THAT(PearsonCorrelation({1, 1, 1}, {1, 2, 3}).status().message(),
              HasSubstr("x is constant"));
  EXPECT_THAT(PearsonCorrelation({1, std::nan(""), 3}, {1, 2, 3}).status().message(),
              HasSubstr("x[1]=nan"));
  EXPECT_THAT(SpearmanCorrelation({1, 2, 3}, {1, 2, std::numeric_limits<double>::infinity()})
                  .status()
                  .message(),
              HasSubstr("y[2]=inf"));
}

TEST(Errors, MaeAndFractionWithinK) {
  const std::vector<double> mfu = {54.27, 24.51, 26, 30, 10};
  const std::vector<double> ofu = {25.58, 15.56, 34, 31, 10};
  EXPECT_NEAR(*MeanAbsoluteError(mfu, ofu), (28.69 + 8.95 + 8 + 1 + 0) / 5, 1e-12);
  EXPECT_DOUBLE_EQ(*FractionWithin(mfu, ofu, 10), 0.8);
  EXPECT_DOUBLE_EQ(*FractionBeyond(mfu, ofu, 20), 0.2);
  EXPECT_DOUBLE_EQ(*FractionWithin(mfu, ofu, 0), 0.2);  // inclusive: |10 - 10| <= 0
  EXPECT_DOUBLE_EQ(*MeanAbsoluteError({42}, {40}), 2);  // a single pair is fine
  EXPECT_THAT(MeanAbsoluteError({}, {}).status().message(), HasSubstr("at least 1"));
  EXPECT_THAT(FractionWithin({1}, {1}, -1).status().message(), HasSubstr("k=-1"));
  EXPECT_THAT(FractionWithin({1}, {1}, std::nan("")).status().message(), HasSubstr("k=nan"));
}

TEST(FleetComparison, GroupsJobsByGpuCountLikeTableIII) {
  std::vector<JobComparison> jobs = {
      {8, 30, 20},    {32, 20, 24},                   // group 1-63
      {128, 25, 25},                                  // group 64-255
      {1024, 18, 19}, {5888, 22, 20}, {768, 20, 21},  // group 768+
  };
  absl::StatusOr<FleetComparison> report = CompareMfuOfu(jobs);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_EQ(report->groups.size(), 4u);
  const GroupStats& small = report->groups[0];
  EXPECT_EQ(small.label, "1-63");
  EXPECT_EQ(small.max_gpu_count, 63);
  EXPECT_EQ(small.job_count, 2);
  EXPECT_DOUBLE_EQ(small.mean_mfu_percent, 25);
  EXPECT_NEAR(small.sd_mfu_percent, std::sqrt(50.0), 1e-12);
  EXPECT_DOUBLE_EQ(small.mean_ofu_percent, 22);
  EXPECT_DOUBLE_EQ(small.mae_percent, 7);
  EXPECT_NEAR(small.sd_abs_error_percent, std::sqrt(18.0), 1e-12);

  EXPECT_EQ(report->groups[1].job_count, 1);
  EXPECT_EQ(report->groups[1].sd_mfu_percent, 0);  // single job: no spread
  EXPECT_FALSE(report->groups[1].pearson_r.has_value());
  EXPECT_EQ(report->groups[2].label, "256-767");
  EXPECT_EQ(report->groups[2].job_count, 0);
  EXPECT_EQ(report->groups[3].label, "768+");
  EXPECT_FALSE(report->groups[3].max_gpu_count.has_value());
  EXPECT_EQ(report->groups[3].job_count, 3);
  EXPECT_DOUBLE_EQ(report->groups[3].mean_mfu_percent, 20);
  EXPECT_NEAR(report->groups[3].mae_percent, 4.0 / 3, 1e-12);

  EXPECT_EQ(report->overall.job_count, 6);
  EXPECT_NEAR(report->overall.mae_percent, (10 + 4 + 0 + 1 + 2 + 1) / 6.0, 1e-12);
  EXPECT_NEAR(report->fraction_within_10pp, 1.0, 1e-12);
  EXPECT_EQ(report->fraction_beyond_20pp, 0);
  EXPECT_TRUE(report->overall.pearson_r.has_value());
  EXPECT_TRUE(report->spearman_rho.has_value());
}

TEST(FleetComparison, CustomGroupsAndInvalidInput) {
  absl::StatusOr<FleetComparison> r = CompareMfuOfu({{8, 1, 2}, {16, 3, 4}}, {8, 16});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->groups[0].label, "8-15");
  EXPECT_EQ(r->groups[1].label, "16+");

  EXPECT_THAT(CompareMfuOfu({}).status().message(), HasSubstr("jobs is empty"));
  EXPECT_THAT(CompareMfuOfu({{0, 1, 2}}).status().message(), HasSubstr("jobs[0].gpu_count=0"));
  EXPECT_THAT(CompareMfuOfu({{4, 1, 2}}, {8, 16}).status().message(),
              HasSubstr("below the first group"));
  EXPECT_THAT(CompareMfuOfu({{8, std::nan(""), 2}}).status().message(),
              HasSubstr("jobs[0].mfu_percent=nan"));
  EXPECT_THAT(CompareMfuOfu({{8, 1, 2}}, {8, 8}).status().message(),
              HasSubstr("group_lower_bounds[1]=8"));
}

}  // namespace
}  // namespace goodput::core
