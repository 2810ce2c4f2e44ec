#include "services/platform/metrics.h"

#include <regex>
#include <sstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace goodput::platform {
namespace {

using ::testing::HasSubstr;

TEST(Metrics, CountersGaugesAndHistogramsRender) {
  MetricsRegistry registry;
  registry.AddCounter("goodput_test_events_total", "Events.", {"kind"})
      .WithLabels({"a"})
      .Increment(3);
  registry.AddGauge("goodput_test_depth", "Queue depth.").WithLabels({}).Set(-2.5);
  auto& latency = registry.AddHistogram("goodput_test_seconds", "Latency.", {"method"}, {0.1, 1});
  latency.WithLabels({"/a.B/C"}).Observe(0.05);
  latency.WithLabels({"/a.B/C"}).Observe(0.5);
  latency.WithLabels({"/a.B/C"}).Observe(5);

  std::string text = registry.Exposition();
  EXPECT_THAT(text, HasSubstr("# TYPE goodput_test_events_total counter\n"
                              "goodput_test_events_total{kind=\"a\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("goodput_test_depth -2.5\n"));
  EXPECT_THAT(text, HasSubstr("goodput_test_seconds_bucket{method=\"/a.B/C\",le=\"0.1\"} 1\n"
                              "goodput_test_seconds_bucket{method=\"/a.B/C\",le=\"1\"} 2\n"
                              "goodput_test_seconds_bucket{method=\"/a.B/C\",le=\"+Inf\"} 3\n"
                              "goodput_test_seconds_sum{method=\"/a.B/C\"} 5.55\n"
                              "goodput_test_seconds_count{method=\"/a.B/C\"} 3\n"));
}

TEST(Metrics, EscapesLabelValuesAndHelp) {
  MetricsRegistry registry;
  registry.AddCounter("goodput_test_total", "Line one\nback\\slash", {"path"})
      .WithLabels({"a\"b\\c\nd"})
      .Increment();
  std::string text = registry.Exposition();
  EXPECT_THAT(text, HasSubstr("# HELP goodput_test_total Line one\\nback\\\\slash\n"));
  EXPECT_THAT(text, HasSubstr("goodput_test_total{path=\"a\\\"b\\\\c\\nd\"} 1\n"));
}

TEST(Metrics, ReRegisteringReturnsTheSameFamily) {
  MetricsRegistry registry;
  auto& first = registry.AddCounter("goodput_test_total", "x", {"a"});
  auto& second = registry.AddCounter("goodput_test_total", "x", {"a"});
  EXPECT_EQ(&first, &second);
  EXPECT_EQ(&first.WithLabels({"v"}), &second.WithLabels({"v"}));
}

TEST(Metrics, CounterIgnoresNegativeIncrements) {
  Counter counter;
  counter.Increment(2);
  counter.Increment(-1);
  EXPECT_EQ(counter.Value(), 2);
}

TEST(Metrics, ConcurrentIncrementsAreNotLost) {
  MetricsRegistry registry;
  Counter& counter = registry.AddCounter("goodput_test_total", "x").WithLabels({});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) counter.Increment();
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(counter.Value(), 40000);
}

TEST(Metrics, FormatsSpecialValues) {
  EXPECT_EQ(FormatSampleValue(1.0 / 0.0), "+Inf");
  EXPECT_EQ(FormatSampleValue(-1.0 / 0.0), "-Inf");
  EXPECT_EQ(FormatSampleValue(0.0 / 0.0), "NaN");
  EXPECT_EQ(FormatSampleValue(123456789012.0), "123456789012");
}

}  // namespace
}  // namespace goodput::platform
