#include "services/alerting/platform_lag.h"

#include <gtest/gtest.h>

#include <vector>

namespace goodput::alerting {
namespace {

constexpr int64_t kS = 1000;
constexpr int64_t kT0 = 1'790'000'000 * kS;  // a window end (unix ms)

// Windows of 60 s delivered by one producer, each `age_s` after it ends, from kT0 on.
ProducerProgress Deliver(ProducerProgress p, int windows, int64_t age_s,
                         const PlatformLagOptions& o, int64_t first_end_ms = kT0) {
  for (int i = 0; i < windows; ++i) {
    const int64_t end = first_end_ms + i * 60 * kS;
    p = AdvanceProgress(p, end, end + age_s * kS, o);
  }
  return p;
}

TEST(PlatformLag, WindowsArrivingAsUsualAreNoBacklog) {
  const PlatformLagOptions o;
  ProducerProgress p = Deliver({.producer = "ofu-0"}, 10, 170, o);
  EXPECT_EQ(*p.frontier_ms, kT0 + 9 * 60 * kS);
  EXPECT_EQ(p.backlog_ms, 0);
  EXPECT_FALSE(p.lagging_since_ms);
  const PlatformLag lag = AssessPlatformLag({p}, p.advanced_at_ms + 30 * kS, o);
  EXPECT_EQ(lag.backlog_ms, 0);
  EXPECT_EQ(lag.producers_active, 1);
  EXPECT_EQ(lag.producers_behind, 0);
  EXPECT_FALSE(lag.alert);
}

TEST(PlatformLag, ABacklogHeldOverAMinuteOfReceiptsOpensTheAlertAndClearsBelowHalf) {
  const PlatformLagOptions o;  // expected 180 s, alert at 300 s of backlog
  // Windows arriving 10 minutes after they end: 7 minutes of backlog.
  ProducerProgress p = Deliver({.producer = "ofu-0"}, 1, 600, o);
  EXPECT_EQ(p.backlog_ms, 420 * kS);
  EXPECT_EQ(p.lagging_since_ms, p.advanced_at_ms);
  // One slow delivery is not an overload.
  EXPECT_FALSE(AssessPlatformLag({p}, p.advanced_at_ms + 5 * kS, o).alert);
  const int64_t since = *p.lagging_since_ms;
  p = Deliver(p, 3, 600, o, kT0 + 60 * kS);
  EXPECT_EQ(p.lagging_since_ms, since);
  PlatformLag lag = AssessPlatformLag({p}, p.advanced_at_ms + 5 * kS, o);
  EXPECT_TRUE(lag.alert);
  EXPECT_EQ(lag.backlog_ms, 420 * kS);
  EXPECT_EQ(lag.window_age_ms, 600 * kS);
  EXPECT_EQ(lag.frontier_ms, kT0 + 3 * 60 * kS);
  EXPECT_EQ(lag.lagging_since_ms, since);
  EXPECT_EQ(lag.producer, "ofu-0");
  // Catching up: 200 s of backlog is above half the threshold, the spell goes on.
  p = AdvanceProgress(p, kT0 + 4 * 60 * kS, kT0 + 4 * 60 * kS + 380 * kS, o);
  EXPECT_EQ(p.backlog_ms, 200 * kS);
  EXPECT_EQ(p.lagging_since_ms, since);
  // 100 s is under half: cleared, and a new spell needs its minute again.
  p = AdvanceProgress(p, kT0 + 5 * 60 * kS, kT0 + 5 * 60 * kS + 280 * kS, o);
  EXPECT_FALSE(p.lagging_since_ms);
  lag = AssessPlatformLag({p}, p.advanced_at_ms, o);
  EXPECT_FALSE(lag.alert);
  EXPECT_EQ(lag.backlog_ms, 100 * kS);  // still judged 100 s behind the clock
}

TEST(PlatformLag, RevisionsOfOldWindowsAndClocksAheadNeverMoveTheBacklog) {
  const PlatformLagOptions o;
  ProducerProgress p = Deliver({.producer = "ofu-0"}, 5, 170, o);
  const ProducerProgress before = p;
  // A late sample revised a window of an hour ago: an older end, nothing moves.
  p = AdvanceProgress(p, kT0 - 3600 * kS, p.advanced_at_ms + 10 * kS, o);
  EXPECT_EQ(p.frontier_ms, before.frontier_ms);
  EXPECT_EQ(p.advanced_at_ms, before.advanced_at_ms);
  EXPECT_EQ(p.backlog_ms, 0);
  // A host whose clock runs ahead delivers a window "from the future": no negative backlog.
  p = AdvanceProgress(p, kT0 + 86400 * kS, kT0 + 10 * 60 * kS, o);
  EXPECT_EQ(p.backlog_ms, 0);
}

TEST(PlatformLag, TheProducerBehindTheMostCountsAndASilentOneNoLonger) {
  const PlatformLagOptions o;  // inactive after 600 s
  const ProducerProgress fresh = Deliver({.producer = "ofu-0"}, 10, 170, o, kT0 + 600 * kS);
  const ProducerProgress behind = Deliver({.producer = "ofu-1"}, 10, 900, o);
  const int64_t now = behind.advanced_at_ms + 10 * kS;
  PlatformLag lag = AssessPlatformLag({fresh, behind}, now, o);
  EXPECT_EQ(lag.producer, "ofu-1");
  EXPECT_EQ(lag.backlog_ms, 720 * kS);
  EXPECT_EQ(lag.producers_active, 2);
  EXPECT_EQ(lag.producers_behind, 1);
  EXPECT_TRUE(lag.alert);
  // ofu-1 delivered nothing for longer than telemetry_stopped_after_s (its shard retired, or
  // its jobs ended): it no longer holds the platform back.
  lag = AssessPlatformLag({fresh, behind}, behind.advanced_at_ms + 601 * kS, o);
  EXPECT_EQ(lag.producers_active, 0);  // ofu-0 delivered last even earlier
  EXPECT_EQ(lag.backlog_ms, 0);
  EXPECT_FALSE(lag.alert);
  // A producer that never delivered a window (a watermark row alone) is not counted.
  EXPECT_EQ(AssessPlatformLag({{.producer = "ofu-2"}}, now, o).producers_active, 0);
}

}  // namespace
}  // namespace goodput::alerting
