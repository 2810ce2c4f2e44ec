// A background loop for the services' catch-up work (forwarding, reconciling): it runs a step,
// then waits `poll_interval` (`retry_backoff` after a failed step) or until woken, and again,
// until stopped. What a step does, and what it logs, is the owner's business.
//
//   PollLoop loop([this] { return StepOnce().ok(); }, {.poll_interval = absl::Seconds(1)});
//   loop.Start();   // and loop.Wake() when there is new work
#pragma once

#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace goodput::platform {

struct PollLoopOptions {
  absl::Duration poll_interval = absl::Seconds(1);
  absl::Duration retry_backoff = absl::Seconds(5);
};

class PollLoop {
 public:
  // `step` returns false when it failed (the next one waits `retry_backoff`).
  PollLoop(std::function<bool()> step, PollLoopOptions options);
  ~PollLoop();

  // Runs the loop on its own thread (once).
  void Start();
  // Stops and joins the loop; the step under way finishes first.
  void Stop();
  // Runs the next step now rather than at the end of the wait.
  void Wake();

 private:
  void Run();

  std::function<bool()> step_;
  PollLoopOptions options_;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool wake_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace goodput::platform
