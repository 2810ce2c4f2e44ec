// The delivery worker: sends outbox rows (outbox.h) through their targets, at least once,
// and records every attempt.
//
// One loop per configured target claims that target's due rows (delivery_store.h), takes a
// token from the target's rate limit (a row over the limit is postponed, not counted as an
// attempt, never dropped), records the attempt, sends, and then marks the row delivered, due
// again after a backoff with jitter, or failed (permanent error, or max attempts / max age
// reached). A firing notification to a target that wants re-sends (Alertmanager) is sent
// again at its interval until the alert's resolution for that target exists. A slow or down
// target delays only its own rows.
//
// At-least-once: a sender that stops between the send and the mark sends the row again when
// its lease ends; every retry carries the row's idempotency key so that the peer (or, for
// Slurm, the job comment) recognises it.
//
//   DeliveryWorker worker(&store, std::move(targets), &limiter, options, logger);
//   worker.Start();   ...   worker.Stop();
//   // tests: worker.StepOnce("am-prod") with an injected clock and random source
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "services/alerting/delivery_policy.h"
#include "services/alerting/delivery_store.h"
#include "services/alerting/rate_limiter.h"
#include "services/alerting/targets/target.h"
#include "services/platform/logging.h"

namespace goodput::alerting {

struct DeliveryOptions {
  RetryPolicy retry;
  absl::Duration poll_interval = absl::Seconds(1);  // how often an idle loop looks for rows
  absl::Duration claim_lease = absl::Seconds(120);  // longer than any send can take
  int batch_size = 50;
  std::function<absl::Time()> clock = [] { return absl::Now(); };
  std::function<double()> uniform01 = {};  // a draw from [0, 1); default: a seeded engine
  // Told of every outcome: "delivered", "retry", "failed", "postponed", "resent",
  // "resend_failed", "skipped" (metrics); may be empty.
  std::function<void(const std::string& target, const char* outcome)> on_outcome = {};
};

// What one step did, for tests and metrics.
struct StepResult {
  int delivered = 0;
  int retrying = 0;
  int failed = 0;
  int postponed = 0;  // over the rate limit
  int resent = 0;
  int skipped = 0;  // rows of a job of another cluster than the target's (dropped, not sent)
};

class DeliveryWorker {
 public:
  // Targets are owned by the worker; the store and limiter must outlive it.
  DeliveryWorker(DeliveryStore* store, std::vector<std::unique_ptr<Target>> targets,
                 RateLimiter* limiter, DeliveryOptions options, platform::Logger logger);
  ~DeliveryWorker();

  // One loop thread per target.
  void Start();
  // Stops the loops after their current send.
  void Stop();
  // Rows were enqueued: look now instead of at the next poll.
  void Wake();

  // Processes the due rows and re-sends of `target` once; NOT_FOUND for an unknown target,
  // the store's error when PostgreSQL is down.
  absl::StatusOr<StepResult> StepOnce(const std::string& target);

  std::vector<std::string> target_names() const;
  // The target of that name; nullptr when none.
  const Target* FindTarget(const std::string& name) const { return Find(name); }

 private:
  Target* Find(const std::string& name) const;
  void Run(Target* target);
  absl::StatusOr<StepResult> Step(Target* target);
  bool Stopping();
  void Report(const std::string& target, const char* outcome);
  struct WaitState {
    DeliveryWorker* worker;
    int64_t generation;
  };
  static bool WokenOrStopped(WaitState* state) ABSL_NO_THREAD_SAFETY_ANALYSIS;

  DeliveryStore* store_;
  std::vector<std::unique_ptr<Target>> targets_ = {};
  RateLimiter* limiter_;
  DeliveryOptions options_;
  platform::Logger logger_;
  absl::Mutex rng_mu_;  // guards options_.uniform01 across target loops
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  int64_t wake_generation_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::thread> threads_ = {};
};

}  // namespace goodput::alerting
