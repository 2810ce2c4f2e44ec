// Per-target rate limits for delivery: a token bucket per target, kept in Redis so that all
// replicas share it (one Lua script, atomic), with an in-process bucket per target when Redis
// cannot be reached. Redis being down makes the limit per replica instead of global; it never
// blocks or loses a notification: a row over its limit just waits (the worker postpones it).
#pragma once

#include <map>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "services/alerting/delivery_policy.h"
#include "services/alerting/targets/targets_config.h"
#include "services/platform/logging.h"
#include "services/platform/metrics.h"
#include "services/platform/redis_client.h"

namespace goodput::alerting {

class RateLimiter {
 public:
  // `redis` may be null (in-process buckets only); it must outlive the limiter.
  RateLimiter(platform::RedisClient* redis, platform::Logger logger)
      : redis_(redis), logger_(std::move(logger)) {}

  // Sets the limit of `target`; targets without one are never limited.
  void SetLimit(const std::string& target, RateLimit limit);

  // Takes a send for `target` at `now`: nullopt when it may send, else how long to wait.
  // Thread-safe.
  std::optional<absl::Duration> Take(const std::string& target, absl::Time now);

  // True while the last Redis call failed and the in-process buckets are in use.
  bool using_fallback() const;
  // Set to 1 while using_fallback() (metrics); may stay unset.
  void set_fallback_gauge(platform::Gauge* gauge) { fallback_gauge_ = gauge; }

 private:
  platform::RedisClient* redis_;
  platform::Logger logger_;
  mutable absl::Mutex mu_;
  std::map<std::string, RateLimit> limits_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, TokenBucket> local_ ABSL_GUARDED_BY(mu_);
  bool fallback_ ABSL_GUARDED_BY(mu_) = false;
  platform::Gauge* fallback_gauge_ = nullptr;
};

}  // namespace goodput::alerting
