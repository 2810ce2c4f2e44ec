#include "services/mfu/fleet.h"

#include <vector>

#include "gtest/gtest.h"

namespace goodput::mfu {
namespace {

using detect::Verdict;

// Five jobs, figures in percent; job D is the paper's MoE overcount (54.27% vs 25.58%).
// Expected values computed by hand (Python's statistics module) from these numbers.
std::vector<FleetJob> SmallFleet() {
  return {
      {"c", "A", 8, 0.30, 0.28, Verdict::kConsistent, {}},
      {"c", "B", 16, 0.40, 0.35, Verdict::kConsistent, {}},
      {"c", "C", 64, 0.20, 0.24, Verdict::kConsistent, {}},
      {"c", "D", 256, 0.5427, 0.2558, Verdict::kAppFlopsOvercount,
       detect::Cause::kLatentProjectionMoe},
      {"c", "E", 1024, 0.25, 0.31, Verdict::kInsufficientEvidence, {}},
  };
}

TEST(FleetReport, MatchesHandComputedStatistics) {
  absl::StatusOr<FleetReport> r = BuildFleetReport(SmallFleet(), {1, 64, 256, 768});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->overall.job_count, 5);
  ASSERT_TRUE(r->overall.pearson_r.has_value());
  EXPECT_NEAR(*r->overall.pearson_r, 0.0939662, 1e-6);
  EXPECT_NEAR(r->overall.mae_pp, 9.138, 1e-9);
  EXPECT_NEAR(r->overall.abs_error_sd_pp, 11.0295159, 1e-6);
  EXPECT_NEAR(r->overall.share_within_10pp, 0.8, 1e-12);
  EXPECT_NEAR(r->overall.share_beyond_20pp, 0.2, 1e-12);
  EXPECT_NEAR(r->overall.mfu_mean, 0.33854, 1e-9);
  EXPECT_NEAR(r->overall.mfu_sd, 0.135993228, 1e-8);
  EXPECT_NEAR(r->overall.ofu_mean, 0.28716, 1e-9);
  EXPECT_NEAR(r->overall.ofu_sd, 0.0439582529, 1e-8);
  // Without the miscount, MFU and OFU agree far better.
  EXPECT_EQ(r->miscount_job_count, 1);
  EXPECT_EQ(r->excluding_miscounts.job_count, 4);
  ASSERT_TRUE(r->excluding_miscounts.pearson_r.has_value());
  EXPECT_NEAR(*r->excluding_miscounts.pearson_r, 0.8595936, 1e-6);
}

TEST(FleetReport, GroupsByGpuCountWithEmptyAndOpenGroups) {
  absl::StatusOr<FleetReport> r = BuildFleetReport(SmallFleet(), {1, 64, 256, 768, 4096});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->groups.size(), 5u);
  EXPECT_EQ(r->groups[0].min_gpu_count, 1);
  EXPECT_EQ(r->groups[0].max_gpu_count, 63);
  EXPECT_EQ(r->groups[0].job_count, 2);
  EXPECT_NEAR(r->groups[0].mae_pp, 3.5, 1e-9);       // |30-28| and |40-35|
  EXPECT_FALSE(r->groups[0].pearson_r.has_value());  // fewer than 3 jobs
  EXPECT_EQ(r->groups[1].job_count, 1);
  EXPECT_EQ(r->groups[2].job_count, 1);
  EXPECT_EQ(r->groups[3].job_count, 1);
  EXPECT_EQ(r->groups[3].max_gpu_count, 4095);
  EXPECT_EQ(r->groups[4].job_count, 0);
  EXPECT_EQ(r->groups[4].max_gpu_count, 0);  // open-ended
}

TEST(FleetReport, RefusesBoundsThatDoNotIncrease) {
  absl::StatusOr<FleetReport> r = BuildFleetReport(SmallFleet(), {8, 8});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("gpu_count_group_lower_bounds[1]=8"), std::string::npos)
      << r.status();
}

TEST(FleetReport, AnEmptyFleetHasNoCorrelation) {
  absl::StatusOr<FleetReport> r = BuildFleetReport({}, {1});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->overall.job_count, 0);
  EXPECT_FALSE(r->overall.pearson_r.has_value());
}

}  // namespace
}  // namespace goodput::mfu
