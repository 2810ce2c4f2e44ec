// Delivery decisions that need no I/O: when to retry a failed send (exponential backoff with
// jitter), when to give up, and a token bucket for per-target rate limits. The worker
// (delivery_worker.h) injects the clock and the random source, so tests drive time.
//
//   RetryPolicy policy{.initial_backoff = absl::Seconds(5), .max_backoff = absl::Minutes(10)};
//   absl::Duration wait = BackoffDelay(policy, /*attempt=*/3, /*uniform01=*/0.4);
#pragma once

#include <optional>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace goodput::alerting {

struct RetryPolicy {
  absl::Duration initial_backoff = absl::Seconds(5);  // wait after the first failure
  absl::Duration max_backoff = absl::Minutes(10);     // the doubling stops here
  // Part of each wait that is random, in [0, 1]: 0.5 waits between half and all of the
  // doubled delay, so that many rows failing together do not retry together.
  double jitter = 0.5;
  int max_attempts = 20;                     // a row that failed this many times is given up
  absl::Duration max_age = absl::Hours(24);  // ... and one this old (since it was queued)
};

// INVALID_ARGUMENT naming the field when the policy cannot work (non-positive backoff,
// jitter outside [0, 1], max_attempts < 1, ...).
absl::Status ValidateRetryPolicy(const RetryPolicy& policy);

// The wait before attempt `attempt` + 1 after attempt `attempt` (1-based) failed:
// initial * 2^(attempt-1), capped at max_backoff, of which the `jitter` part is scaled by
// `uniform01` (a draw from [0, 1)).
absl::Duration BackoffDelay(const RetryPolicy& policy, int attempt, double uniform01);

// True when a row that has had `attempts` attempts and was queued at `created` must not be
// tried again at `now`.
bool ShouldGiveUp(const RetryPolicy& policy, int attempts, absl::Time created, absl::Time now);

// True for errors that another attempt cannot fix (the peer refused the request itself, the
// job or workflow does not exist, the payload is malformed); false for outages, timeouts,
// throttling and authentication problems, which an operator or time can fix.
bool IsPermanentError(const absl::Status& status);

// A token bucket: `burst` tokens at most, refilled at `rate_per_s`. Not thread-safe.
class TokenBucket {
 public:
  TokenBucket(double rate_per_s, double burst) : rate_per_s_(rate_per_s), burst_(burst) {}

  // Takes one token at `now`: nullopt when there was one, else how long until there is.
  std::optional<absl::Duration> Take(absl::Time now);

 private:
  double rate_per_s_;
  double burst_;
  double tokens_ = -1;  // < 0: not used yet (full)
  absl::Time last_ = absl::InfinitePast();
};

}  // namespace goodput::alerting
