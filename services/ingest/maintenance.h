// Background upkeep of the samples table on a timer: daily partitions created ahead of time,
// partitions older than the retention period dropped, and batch ids older than the retry
// horizon forgotten. Failures are logged and retried at the next tick.
#pragma once

#include <cstdint>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "services/ingest/sample_store.h"
#include "services/platform/logging.h"

namespace goodput::ingest {

struct MaintenanceOptions {
  absl::Duration interval = absl::Minutes(5);
  int64_t partitions_ahead_days = 7;
  int64_t retention_ms = 30LL * 86'400'000;
  int64_t batch_id_retention_ms = 7LL * 86'400'000;
};

class Maintenance {
 public:
  // `store` must outlive this object.
  Maintenance(SampleStore* store, MaintenanceOptions options, std::function<int64_t()> now_unix_ms,
              platform::Logger logger);
  ~Maintenance();  // stops the timer

  // One round; returns the first error (the others are still attempted).
  absl::Status RunOnce();
  // Runs RunOnce now and then every `interval` on a background thread.
  void Start();
  // Stops the timer and joins the thread. Idempotent.
  void Stop();

 private:
  SampleStore* store_;
  MaintenanceOptions options_;
  std::function<int64_t()> now_unix_ms_;
  platform::Logger logger_;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace goodput::ingest
