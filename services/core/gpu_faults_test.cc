#include "services/core/gpu_faults.h"

#include <vector>

#include "gtest/gtest.h"

namespace goodput::core {
namespace {

constexpr int64_t kMinute = 60'000;

// Feeds `values` a minute apart and returns the events' counts (0 where none).
std::vector<double> Feed(FaultSignal signal, const std::vector<double>& values,
                         SignalState* state = nullptr, int64_t window_ms = 0) {
  SignalState local;
  if (state == nullptr) state = &local;
  std::vector<double> out;
  int64_t t = 1'700'000'000'000;
  for (double v : values) {
    bool changed = false;
    auto edge = DetectFaultEdge({.signal = signal, .value = v, .xid = 79, .window_ms = window_ms},
                                t, state, &changed);
    out.push_back(edge ? edge->count : 0);
    t += kMinute;
  }
  return out;
}

TEST(FaultEdges, XidGaugeStuckForHoursIsOneEvent) {
  std::vector<double> values(240, 79);  // four hours of scrapes
  values.insert(values.begin(), 0);
  std::vector<double> counts = Feed(FaultSignal::kXid, values);
  double total = 0;
  for (double c : counts) total += c;
  EXPECT_EQ(total, 1);
  EXPECT_EQ(counts[1], 1);
}

TEST(FaultEdges, XidFirstSeenNonZeroIsAnEvent) {
  EXPECT_EQ(Feed(FaultSignal::kXid, {13, 13}), (std::vector<double>{1, 0}));
  EXPECT_EQ(Feed(FaultSignal::kXid, {0, 0}), (std::vector<double>{0, 0}));
}

TEST(FaultEdges, XidThroughZeroIsANewEventAndANewCodeToo) {
  // 79, exporter restart prints 0, a new 79; then 48 replaces it.
  EXPECT_EQ(Feed(FaultSignal::kXid, {79, 0, 79, 48, 48}), (std::vector<double>{1, 0, 1, 1, 0}));
}

TEST(FaultEdges, XidSameValueAfterAnOutageIsTheSameFault) {
  SignalState state;
  Feed(FaultSignal::kXid, {79}, &state);
  // Hours later (the series was absent), DCGM's cached last XID again.
  bool changed = false;
  auto edge = DetectFaultEdge({.signal = FaultSignal::kXid, .value = 79},
                              state.changed_unix_ms + 6 * 60 * kMinute, &state, &changed);
  EXPECT_FALSE(edge.has_value());
  EXPECT_FALSE(changed);
}

TEST(FaultEdges, CounterFirstValueIsABaselineThenIncreasesAreEvents) {
  EXPECT_EQ(Feed(FaultSignal::kEccDbeVolatile, {5, 5, 7, 7, 10}),
            (std::vector<double>{0, 0, 2, 0, 3}));
}

TEST(FaultEdges, CounterResetCountsTheNewValueAsTheIncrease) {
  SignalState state;
  std::vector<double> counts = Feed(FaultSignal::kNvlinkCrcFlitErrors, {5, 7, 0, 0, 2}, &state);
  EXPECT_EQ(counts, (std::vector<double>{0, 2, 0, 0, 2}));
  SignalState s2;
  Feed(FaultSignal::kPcieReplays, {10}, &s2);
  bool changed = false;
  auto edge = DetectFaultEdge({.signal = FaultSignal::kPcieReplays, .value = 3},
                              s2.changed_unix_ms + kMinute, &s2, &changed);
  ASSERT_TRUE(edge.has_value());
  EXPECT_TRUE(edge->counter_reset);
  EXPECT_EQ(edge->count, 3);
  EXPECT_EQ(edge->previous_value, 10);
}

TEST(FaultEdges, FlagRisesOnceAndZeroRearmsIt) {
  EXPECT_EQ(Feed(FaultSignal::kRowRemapFailure, {0, 1, 1, 1, 0, 1}),
            (std::vector<double>{0, 1, 0, 0, 0, 1}));
  EXPECT_EQ(Feed(FaultSignal::kRowRemapPending, {1, 1}), (std::vector<double>{1, 0}));
}

TEST(FaultEdges, WindowCountCountsGrowthAndRestartsAfterTheWindow) {
  // Window of 5 minutes; readings a minute apart.
  EXPECT_EQ(Feed(FaultSignal::kXidCount, {1, 1, 2, 2, 1, 0, 1}, nullptr, 5 * kMinute),
            (std::vector<double>{1, 0, 1, 0, 0, 0, 1}));
  // Stored 1; the series disappears; 1 again after more than the window: a new XID.
  SignalState state;
  Feed(FaultSignal::kXidCount, {1}, &state, 5 * kMinute);
  bool changed = false;
  auto edge = DetectFaultEdge(
      {.signal = FaultSignal::kXidCount, .value = 1, .xid = 79, .window_ms = 5 * kMinute},
      state.changed_unix_ms + 10 * kMinute, &state, &changed);
  ASSERT_TRUE(edge.has_value());
  EXPECT_EQ(edge->count, 1);
  EXPECT_TRUE(changed);
}

TEST(FaultEdges, LateReadingChangesNothing) {
  SignalState state;
  Feed(FaultSignal::kXid, {79}, &state);
  bool changed = true;
  auto edge = DetectFaultEdge({.signal = FaultSignal::kXid, .value = 48},
                              state.changed_unix_ms - kMinute, &state, &changed);
  EXPECT_FALSE(edge.has_value());
  EXPECT_FALSE(changed);
  EXPECT_EQ(state.value, 79);
}

TEST(FaultSignals, MetricNamesAndStableNames) {
  EXPECT_EQ(FaultSignalForMetric("DCGM_FI_DEV_XID_ERRORS"), FaultSignal::kXid);
  EXPECT_EQ(FaultSignalForMetric("DCGM_EXP_XID_ERRORS_COUNT"), FaultSignal::kXidCount);
  EXPECT_EQ(FaultSignalForMetric("DCGM_FI_DEV_XID_ERRORS_ACTIVE"), FaultSignal::kXidCount);
  EXPECT_EQ(FaultSignalForMetric("DCGM_FI_DEV_ROW_REMAP_PENDING"), FaultSignal::kRowRemapPending);
  EXPECT_EQ(FaultSignalForMetric("DCGM_FI_DEV_GPU_TEMP"), std::nullopt);
  for (int i = 0; i < kFaultSignalCount; ++i) {
    const auto signal = static_cast<FaultSignal>(i);
    EXPECT_EQ(FaultSignalFromName(FaultSignalName(signal)), signal) << FaultSignalName(signal);
  }
  EXPECT_EQ(FaultStateKey({.signal = FaultSignal::kXidCount, .xid = 79}), "xid_count:79");
}

}  // namespace
}  // namespace goodput::core
