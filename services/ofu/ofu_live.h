// Live views of goodput-ofu: the latest job-level window of each job cached in Redis (for
// dashboards and schedulers polling many jobs), and the in-process hub that fans committed
// windows out to StreamJobOfu subscribers. Both are fed after each commit of the consumer;
// neither is a source of truth. Redis being down only makes GetLatestOfu read PostgreSQL.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "goodput/v1/ofu.pb.h"
#include "services/ofu/ofu_consumer.h"
#include "services/platform/redis_client.h"

namespace goodput::ofu {

class LatestCache {
 public:
  // `redis` may be null (no cache). Entries expire after `ttl`.
  LatestCache(platform::RedisClient* redis, absl::Duration ttl) : redis_(redis), ttl_(ttl) {}

  // Stores the newest job-level window of each job in `c` (never replacing a newer one this
  // process wrote). Redis errors are swallowed: the cache is optional.
  void Publish(const CommittedWindows& c, int32_t window_s);
  // The cached window, or nullopt on a miss or when Redis is unreachable.
  std::optional<v1::OfuWindow> Get(const std::string& cluster, const std::string& job_id);

  static std::string Key(const std::string& cluster, const std::string& job_id);

 private:
  platform::RedisClient* redis_;
  absl::Duration ttl_;
  absl::Mutex mu_;
  absl::flat_hash_map<int64_t, int64_t> newest_start_ms_ ABSL_GUARDED_BY(mu_);
};

class StreamHub {
 public:
  using Sink = std::function<void(const v1::StreamJobOfuResponse&)>;
  // Calls `sink` (under the hub's lock: it must not block) for each committed window of the
  // job from now on. Returns an id for Unsubscribe.
  int64_t Subscribe(int64_t job, bool include_per_gpu, Sink sink);
  // After it returns the sink is never called again.
  void Unsubscribe(int64_t id);
  void Publish(const CommittedWindows& c, int32_t window_s);

 private:
  struct Subscriber {
    int64_t job;
    bool include_per_gpu;
    Sink sink;
  };
  absl::Mutex mu_;
  int64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<int64_t, Subscriber> subscribers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace goodput::ofu
