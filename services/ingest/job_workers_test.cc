#include "services/ingest/job_workers.h"

#include <atomic>
#include <thread>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace goodput::ingest {
namespace {

TEST(JobWorkers, RefusesBeyondThePendingBoundAndTakesMoreOnceCallsFinish) {
  JobWorkers workers(/*threads=*/1, /*max_pending=*/2);
  absl::Notification release, running;
  std::atomic<int> done{0};
  ASSERT_TRUE(workers.TrySubmit([&] {
    running.Notify();
    release.WaitForNotification();
    ++done;
  }));
  running.WaitForNotification();
  ASSERT_TRUE(workers.TrySubmit([&] { ++done; }));   // queued behind the running one
  EXPECT_FALSE(workers.TrySubmit([&] { ++done; }));  // a third: refused, never run
  release.Notify();
  absl::Notification last;
  // Polls (no sleep): the bound frees up as the two calls finish.
  while (!workers.TrySubmit([&] { last.Notify(); })) std::this_thread::yield();
  last.WaitForNotification();
  EXPECT_EQ(done.load(), 2);
}

TEST(JobWorkers, RunsWhatIsQueuedBeforeStopping) {
  std::atomic<int> done{0};
  {
    JobWorkers workers(/*threads=*/2, /*max_pending=*/100);
    for (int i = 0; i < 50; ++i) ASSERT_TRUE(workers.TrySubmit([&] { ++done; }));
  }
  EXPECT_EQ(done.load(), 50);
}

}  // namespace
}  // namespace goodput::ingest
