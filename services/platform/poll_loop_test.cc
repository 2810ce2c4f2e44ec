#include "services/platform/poll_loop.h"

#include <atomic>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace goodput::platform {
namespace {

// True once `done` holds, false if it does not within a minute.
template <class F>
bool Eventually(F done) {
  const absl::Time deadline = absl::Now() + absl::Minutes(1);
  while (!done()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

TEST(PollLoop, StepsAtStartAndWhenWokenAndNotAfterStop) {
  std::atomic<int> steps{0};
  // Waits far longer than the test: every step after the first is one Wake asked for.
  PollLoop loop(
      [&] {
        ++steps;
        return true;
      },
      {.poll_interval = absl::Hours(1), .retry_backoff = absl::Hours(1)});
  loop.Start();
  loop.Start();  // once only
  ASSERT_TRUE(Eventually([&] { return steps.load() >= 1; }));
  loop.Wake();
  ASSERT_TRUE(Eventually([&] { return steps.load() >= 2; }));
  loop.Stop();
  const int after_stop = steps.load();
  loop.Wake();
  loop.Stop();
  EXPECT_EQ(steps.load(), after_stop);
}

TEST(PollLoop, AFailedStepWaitsForTheBackoffNotThePollInterval) {
  std::atomic<int> steps{0};
  PollLoop loop(
      [&] {
        ++steps;
        return false;
      },
      {.poll_interval = absl::Hours(1), .retry_backoff = absl::Milliseconds(1)});
  loop.Start();
  EXPECT_TRUE(Eventually([&] { return steps.load() >= 3; }));
}

}  // namespace
}  // namespace goodput::platform
