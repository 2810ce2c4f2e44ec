#include "services/detect/serving_efficiency.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "services/detect/regression.h"

namespace goodput::detect {
namespace {

using ::testing::HasSubstr;

// An 8-GPU service window of 60 s serving `tokens_per_s`, busy for `busy` of the time, at `ofu`.
ServingWindow Window(int i, double tokens_per_s, double busy, double ofu) {
  return {.start_s = i * 60,
          .end_s = i * 60 + 60,
          .ofu = ofu,
          .tokens_per_s = tokens_per_s,
          .gpu_busy = busy,
          .gpu_count = 8};
}

// Day: 4000 tokens/s, GPUs busy 60%, OFU 30%; night: half the traffic, half the busy time and
// half the OFU (the same cost per token).
std::vector<ServingWindow> Day(int first, int n) {
  std::vector<ServingWindow> out;
  for (int i = 0; i < n; ++i) out.push_back(Window(first + i, 4000 + 10 * (i % 3), 0.6, 0.30));
  return out;
}

TEST(ServingEfficiency, LoadHalvingOvernightIsNoRegressionWhileTheSameOfuDropOfATrainingJobIs) {
  std::vector<ServingWindow> day = Day(0, 60);
  std::vector<ServingWindow> night;
  for (int i = 0; i < 30; ++i) night.push_back(Window(60 + i, 2000, 0.3, 0.15));
  ServingVerdict v = JudgeServing(day, night);
  EXPECT_FALSE(v.is_regression()) << v.annotation;
  EXPECT_EQ(v.kind, ServingVerdict::Kind::kNoComparableLoad);

  // The same OFU series read as a training run: the in-job detector confirms a 2x drop.
  InJobRegressionDetector training;
  std::optional<RegressionEvent> drop;
  for (const std::vector<ServingWindow>* part : {&day, &night}) {
    for (const ServingWindow& w : *part) {
      std::optional<RegressionEvent> e =
          training.Add({.start_s = w.start_s, .end_s = w.end_s, .ofu = w.ofu});
      if (e && e->is_regression()) drop = e;
    }
  }
  ASSERT_TRUE(drop.has_value());
  EXPECT_NEAR(drop->factor, 2.0, 0.05);
}

TEST(ServingEfficiency, LowerLoadSeenBeforeIsExplainedByTheLoad) {
  // The service has served a night before: the second night compares with the first.
  std::vector<ServingWindow> reference = Day(0, 30);
  for (int i = 0; i < 20; ++i) reference.push_back(Window(30 + i, 2000, 0.3, 0.15));
  reference = [&] {
    std::vector<ServingWindow> r = reference;
    std::vector<ServingWindow> more = Day(50, 30);
    r.insert(r.end(), more.begin(), more.end());
    return r;
  }();
  std::vector<ServingWindow> night;
  for (int i = 0; i < 20; ++i) night.push_back(Window(80 + i, 2100, 0.31, 0.155));
  ServingVerdict v = JudgeServing(reference, night);
  EXPECT_EQ(v.kind, ServingVerdict::Kind::kLoadExplained) << v.annotation;
  EXPECT_EQ(v.comparable_windows, 20);
  EXPECT_NEAR(v.factor, 1.0, 0.05);
  EXPECT_THAT(v.annotation, HasSubstr("follows the load"));
}

TEST(ServingEfficiency, AServiceTwoAndAHalfTimesSlowerPerTokenAtEqualLoadIsARegression) {
  // The same traffic served with the GPUs busy 2.5x as long per token (e.g. CUDA graphs
  // lost after an upgrade), tensor work per token unchanged.
  std::vector<ServingWindow> day;
  for (int i = 0; i < 60; ++i) day.push_back(Window(i, 4000, 0.36, 0.18));
  std::vector<ServingWindow> slower;
  for (int i = 0; i < 20; ++i) slower.push_back(Window(60 + i, 4000, 0.9, 0.19));
  ServingVerdict v = JudgeServing(day, slower);
  EXPECT_TRUE(v.is_regression()) << v.annotation;
  EXPECT_NEAR(v.factor, 2.5, 0.01);
  EXPECT_THAT(v.annotation, HasSubstr("2.50x"));
  // OFU barely moved: the OFU path alone would not have seen it.
  InJobRegressionDetector ofu_only;
  bool dropped = false;
  for (const std::vector<ServingWindow>* part : {&day, &slower}) {
    for (const ServingWindow& w : *part) {
      std::optional<RegressionEvent> e =
          ofu_only.Add({.start_s = w.start_s, .end_s = w.end_s, .ofu = w.ofu});
      dropped = dropped || (e && e->is_regression());
    }
  }
  EXPECT_FALSE(dropped);
}

TEST(ServingEfficiency, OfuStandsInForBusyTimeAndIdleWindowsAreSkipped) {
  ServingWindow w = Window(0, 1000, -1, 0.25);
  EXPECT_DOUBLE_EQ(BusyGpuSecondsPerToken(w, {}), 0.25 * 8 / 1000);
  w.tokens_per_s = 0;
  EXPECT_LT(BusyGpuSecondsPerToken(w, {}), 0);
  std::vector<ServingWindow> idle = {Window(100, 0, 0, 0)};
  EXPECT_EQ(JudgeServing(Day(0, 10), idle).kind, ServingVerdict::Kind::kNoComparableLoad);
}

// The detector the evaluator of a service asks, fed a day, a night at half the load, the next
// day, then a release that makes each token cost 2.5x the GPU time at the same load, then the
// fix: one regression opened at the release, closed at the fix, none for the night.
TEST(ServingEfficiency, TheServiceDetectorOpensOnlyForWorkPerTokenAndClosesOnTheFix) {
  ServingRegressionDetector d;
  std::vector<std::pair<int, ServingVerdict>> events;
  int i = 0;
  auto feed = [&](int n, double tokens_per_s, double busy, double ofu) {
    for (int k = 0; k < n; ++k, ++i) {
      if (std::optional<ServingVerdict> v = d.Add(Window(i, tokens_per_s, busy, ofu))) {
        events.emplace_back(i, *v);
      }
    }
  };
  feed(240, 4000, 0.36, 0.18);  // day
  feed(240, 2000, 0.18, 0.09);  // night: OFU halves with the load
  feed(120, 4000, 0.36, 0.18);  // next morning
  EXPECT_TRUE(events.empty()) << events.front().second.annotation;
  EXPECT_FALSE(d.open());
  feed(60, 4000, 0.90, 0.19);  // the slow release: same load, 2.5x busy time per token
  ASSERT_EQ(events.size(), 1u);
  EXPECT_TRUE(events[0].second.is_regression());
  // It opens once most recent windows are slow (their median crosses the factor) ...
  EXPECT_GE(events[0].second.factor, 1.35);
  EXPECT_LE(events[0].first, 600 + 10);  // within the ten recent windows
  // The onset is the release's first window, not the start of the recent ones.
  EXPECT_EQ(events[0].second.onset_s, 600 * 60);
  EXPECT_TRUE(d.open());
  // ... and reads the whole 2.5x once the recent windows are all slow.
  EXPECT_NEAR(d.last().factor, 2.5, 0.01);
  feed(60, 4000, 0.36, 0.18);  // fixed
  ASSERT_EQ(events.size(), 2u);
  EXPECT_FALSE(events[1].second.is_regression());
  EXPECT_FALSE(d.open());
}

}  // namespace
}  // namespace goodput::detect
