// The loop that keeps reconciliations current: it reconciles every job marked pending (a new
// or late report or OFU window) and wakes the event forwarder when a reconciliation appended
// divergence events. GetReconciliation also reconciles a pending job before answering, so a
// reader never sees a reconciliation older than the data it has been told is stored.
#pragma once

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "services/mfu/reconciliation_store.h"
#include "services/platform/logging.h"
#include "services/platform/poll_loop.h"

namespace goodput::mfu {

struct ReconcilerOptions {
  absl::Duration poll_interval = absl::Seconds(1);
  absl::Duration retry_backoff = absl::Seconds(5);
  int jobs_per_step = 100;
};

class Reconciler {
 public:
  // `store` must outlive the reconciler; `on_events` runs after a reconciliation that
  // appended events (e.g. waking the forwarder); may be empty.
  Reconciler(ReconciliationStore* store, std::function<void()> on_events, ReconcilerOptions options,
             platform::Logger logger);
  ~Reconciler();

  void Start();
  void Stop();
  // Inputs changed: reconcile now rather than at the next poll.
  void Wake();

  // Reconciles the pending jobs (up to jobs_per_step per batch) until none is left.
  absl::Status StepOnce();
  // Reconciles one job if it is pending.
  absl::Status ReconcileIfPending(const std::string& cluster, const std::string& job_id);

 private:
  absl::Status ReconcileOne(const std::string& cluster, const std::string& job_id);

  ReconciliationStore* store_;
  std::function<void()> on_events_;
  ReconcilerOptions options_;
  platform::Logger logger_;
  platform::PollLoop loop_;  // last: stopped before the rest goes
};

}  // namespace goodput::mfu
