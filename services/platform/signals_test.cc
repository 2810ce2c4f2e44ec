#include "services/platform/signals.h"

#include <csignal>

#include "gtest/gtest.h"

namespace goodput::platform {
namespace {

TEST(SignalWatcher, ReturnsTheSignalRaisedBeforeWait) {
  absl::StatusOr<std::unique_ptr<SignalWatcher>> watcher = SignalWatcher::Install({SIGUSR1});
  ASSERT_TRUE(watcher.ok()) << watcher.status();
  ASSERT_EQ(std::raise(SIGUSR1), 0);
  EXPECT_EQ((*watcher)->Wait(), SIGUSR1);
}

TEST(SignalWatcher, NotifyWakesWait) {
  absl::StatusOr<std::unique_ptr<SignalWatcher>> watcher = SignalWatcher::Install({SIGUSR1});
  ASSERT_TRUE(watcher.ok());
  (*watcher)->Notify();
  EXPECT_EQ((*watcher)->Wait(), 0);
}

TEST(SignalWatcher, OnlyOneAtATime) {
  absl::StatusOr<std::unique_ptr<SignalWatcher>> first = SignalWatcher::Install({SIGUSR1});
  ASSERT_TRUE(first.ok());
  absl::StatusOr<std::unique_ptr<SignalWatcher>> second = SignalWatcher::Install({SIGUSR1});
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  first->reset();
  EXPECT_TRUE(SignalWatcher::Install({SIGUSR1}).ok());
}

}  // namespace
}  // namespace goodput::platform
