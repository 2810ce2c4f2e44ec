#include "services/detect/divergence.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace goodput::detect {
namespace {

// `n` one-minute windows with MFU and OFU in percent and a small deterministic wobble.
std::vector<PairedWindow> Windows(double mfu_pct, double ofu_pct, int n = 60,
                                  double coverage = 1.0) {
  std::vector<PairedWindow> w;
  for (int i = 0; i < n; ++i) {
    const double wobble = 1.0 + 0.01 * std::sin(i * 0.7);
    w.push_back({i * 60, (i + 1) * 60, mfu_pct / 100 * wobble, ofu_pct / 100 * (2 - wobble), 0.002,
                 coverage});
  }
  return w;
}

DivergenceResult Classify(double mfu_pct, double ofu_pct) {
  auto w = Windows(mfu_pct, ofu_pct);
  absl::StatusOr<DivergenceResult> r = ClassifyDivergence(w);
  EXPECT_TRUE(r.ok()) << r.status();
  return *r;
}

TEST(Divergence, MoeLatentProjectionCaseIsOvercountWithMoeCause) {
  DivergenceResult r = Classify(54.27, 25.58);
  EXPECT_EQ(r.verdict, Verdict::kAppFlopsOvercount);
  EXPECT_NEAR(r.ratio, 2.12, 0.01);
  EXPECT_NEAR(r.correction_factor, 1 / 2.12, 0.005);
  ASSERT_FALSE(r.causes.empty());
  EXPECT_EQ(r.causes[0].cause, Cause::kLatentProjectionMoe);
  EXPECT_GT(r.confidence, 0.99);
}

TEST(Divergence, HybridLayerTypesCaseIsOvercountWithLayerTypesCause) {
  DivergenceResult r = Classify(24.51, 15.56);
  EXPECT_EQ(r.verdict, Verdict::kAppFlopsOvercount);
  EXPECT_NEAR(r.ratio, 1.575, 0.01);
  EXPECT_EQ(r.causes[0].cause, Cause::kLayerTypesAsAttentionMlp);
}

TEST(Divergence, RecomputeCaseIsUndercountWithRecomputeCause) {
  DivergenceResult r = Classify(26, 34);
  EXPECT_EQ(r.verdict, Verdict::kAppFlopsUndercount);
  EXPECT_NEAR(r.ratio, 0.765, 0.01);
  EXPECT_NEAR(r.correction_factor, 1.31, 0.01);
  EXPECT_EQ(r.causes[0].cause, Cause::kRecomputeNotCounted);
}

TEST(Divergence, TileQuantizationOverheadIsConsistent) {
  // The hybrid model after the fix: MFU 17.9% vs OFU 18.6%.
  DivergenceResult r = Classify(17.9, 18.6);
  EXPECT_EQ(r.verdict, Verdict::kConsistent);
  EXPECT_EQ(r.causes[0].cause, Cause::kTileQuantization);
  // Non-aligned GEMMs: OFU ~9% above MFU is still benign.
  EXPECT_EQ(Classify(40, 43.6).verdict, Verdict::kConsistent);
}

TEST(Divergence, FactorOfTwoErrorsRankTheExactCauses) {
  EXPECT_EQ(Classify(60, 30.6).causes[0].cause, Cause::kDoubledFlopsOrHalfPeak);
  DivergenceResult half = Classify(20, 41);
  EXPECT_EQ(half.verdict, Verdict::kAppFlopsUndercount);
  EXPECT_EQ(half.causes[0].cause, Cause::kHalvedFlopsOrDoublePeak);
}

TEST(Divergence, AFarOffRatioIsUnexplained) {
  DivergenceResult r = Classify(90, 9);
  EXPECT_EQ(r.verdict, Verdict::kAppFlopsOvercount);
  EXPECT_EQ(r.causes[0].cause, Cause::kUnexplained);
}

TEST(Divergence, CauseFitsSumToOne) {
  double total = 0;
  for (const CauseFit& f : RankCauses(1.3, 0.01)) total += f.fit;
  EXPECT_NEAR(total, 1.0, 1e-9);
}

TEST(Divergence, TooFewWindowsIsInsufficientEvidence) {
  auto w = Windows(54.27, 25.58, 3);
  absl::StatusOr<DivergenceResult> r = ClassifyDivergence(w);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->verdict, Verdict::kInsufficientEvidence);
  EXPECT_TRUE(r->causes.empty());
}

TEST(Divergence, LowGpuCoverageIsInsufficientEvidence) {
  auto w = Windows(54.27, 25.58, 60, 0.4);
  absl::StatusOr<DivergenceResult> r = ClassifyDivergence(w);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->verdict, Verdict::kInsufficientEvidence);
  EXPECT_NE(r->reason.find("coverage"), std::string::npos);
}

TEST(Divergence, NoisyRatioNearTheBandEdgeIsInsufficientEvidence) {
  std::vector<PairedWindow> w;
  for (int i = 0; i < 12; ++i) {
    const double mfu = (i % 2 == 0) ? 0.30 : 0.40;
    w.push_back({i * 60, (i + 1) * 60, mfu, 0.31, 0.01, 1.0});
  }
  absl::StatusOr<DivergenceResult> r = ClassifyDivergence(w);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->verdict, Verdict::kInsufficientEvidence);
}

TEST(Divergence, RefusesOutOfRangeValuesNamingTheField) {
  auto w = Windows(30, 30);
  w[7].ofu = NAN;
  absl::StatusOr<DivergenceResult> r = ClassifyDivergence(w);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("window 7"), std::string::npos);
  EXPECT_NE(r.status().message().find("ofu"), std::string::npos);
}

TEST(Divergence, PerIntervalVerdictsFollowAFixMidJob) {
  auto w = Windows(54.27, 25.58, 60);
  for (int i = 30; i < 60; ++i) w[i].app_mfu = w[i].ofu * 0.96;  // fixed formula
  absl::StatusOr<JobDivergence> r = ClassifyJobDivergence(w, 1800);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->intervals.size(), 2u);
  EXPECT_EQ(r->intervals[0].result.verdict, Verdict::kAppFlopsOvercount);
  EXPECT_EQ(r->intervals[1].result.verdict, Verdict::kConsistent);
}

}  // namespace
}  // namespace goodput::detect
