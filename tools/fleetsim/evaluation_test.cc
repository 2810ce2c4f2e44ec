#include "tools/fleetsim/evaluation.h"

#include "gtest/gtest.h"

namespace goodput::sim {
namespace {

// A small deterministic evaluation: one developed and one held-out fleet of small jobs.
// Asserts the detection targets (not timing).
class SmallEvaluation : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::vector<EvaluationResult> results;
    for (uint64_t seed : {11, 12}) {
      auto r = EvaluateFleet(SmallFleetConfig(seed));
      ASSERT_TRUE(r.ok()) << r.status();
      results.push_back(*r);
    }
    FleetConfig held_out = HeldOutFleetConfig(1011);
    held_out.workloads = SmallFleetConfig(0).workloads;
    held_out.gpu_counts = SmallFleetConfig(0).gpu_counts;
    auto r = EvaluateFleet(held_out);
    ASSERT_TRUE(r.ok()) << r.status();
    results.push_back(*r);
    combined_ = new EvaluationResult(CombineResults(results, "small"));
  }
  static void TearDownTestSuite() { delete combined_; }
  static EvaluationResult* combined_;
};
EvaluationResult* SmallEvaluation::combined_ = nullptr;

TEST_F(SmallEvaluation, FleetHasTheInjectedPhenomena) {
  ASSERT_NE(combined_, nullptr);
  EXPECT_GT(combined_->drops_eligible, 3);
  EXPECT_GT(combined_->precision_switches, 0);
  EXPECT_GT(combined_->job_hours, 100);
}

TEST_F(SmallEvaluation, RecallOfSustainedDropsIsAtLeast95Percent) {
  ASSERT_NE(combined_, nullptr);
  EXPECT_GE(combined_->Recall(), 0.95) << FormatEvaluationTable({*combined_});
}

TEST_F(SmallEvaluation, AtMostOneFalseAlarmPer1000JobHours) {
  ASSERT_NE(combined_, nullptr);
  EXPECT_LE(combined_->FalseAlarmsPer1000JobHours(), 1.0) << FormatEvaluationTable({*combined_});
}

TEST_F(SmallEvaluation, EveryDivergenceVerdictAndTopCauseIsRight) {
  ASSERT_NE(combined_, nullptr);
  for (const auto& [name, tally] : combined_->verdicts) {
    EXPECT_EQ(tally.right_cause, tally.jobs) << name << "\n" << FormatEvaluationTable({*combined_});
  }
}

TEST_F(SmallEvaluation, AlertingFindsTheSameLiveInBurstsAndAfterAnEarlyEndJob) {
  ASSERT_NE(combined_, nullptr);
  const DeliveryTally& live = combined_->delivery[static_cast<int>(Delivery::kLive)];
  for (Delivery d : {Delivery::kLive, Delivery::kBursts, Delivery::kEarlyEnd}) {
    const DeliveryTally& t = combined_->delivery[static_cast<int>(d)];
    EXPECT_GE(DeliveryRecall(*combined_, d), 0.95) << FormatDeliveryTable(*combined_);
    EXPECT_LE(DeliveryFalseAlarmsPer1000JobHours(*combined_, d), 1.0)
        << FormatDeliveryTable(*combined_);
    EXPECT_EQ(t.drops_detected, live.drops_detected) << FormatDeliveryTable(*combined_);
    EXPECT_EQ(t.miscounts_found, t.miscount_jobs) << FormatDeliveryTable(*combined_);
    EXPECT_EQ(t.miscount_false, 0) << FormatDeliveryTable(*combined_);
  }
  // After an early EndJob, what is confirmed from the last burst is recorded, marked as
  // found after the job's end.
  EXPECT_GT(combined_->delivery[static_cast<int>(Delivery::kEarlyEnd)].found_after_end, 0);
  EXPECT_EQ(live.found_after_end, 0);
}

TEST_F(SmallEvaluation, OfuTracksTheTruthWithinAFractionOfAPoint) {
  ASSERT_NE(combined_, nullptr);
  EXPECT_LT(combined_->ofu_abs_error_mean_pp, 0.5);
}

}  // namespace
}  // namespace goodput::sim
