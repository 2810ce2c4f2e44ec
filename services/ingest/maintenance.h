// Background upkeep on a timer: daily samples partitions created ahead of time, partitions
// older than the retention period dropped, batch ids older than the retry horizon forgotten,
// and running jobs whose GPUs went silent ended (their epilog never came; see
// JobStore::EndSilentJobs). Failures are logged and retried at the next tick.
#pragma once

#include <cstdint>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "services/ingest/job_store.h"
#include "services/ingest/sample_store.h"
#include "services/platform/logging.h"

namespace goodput::ingest {

struct MaintenanceOptions {
  absl::Duration interval = absl::Minutes(5);
  int64_t partitions_ahead_days = 7;
  int64_t retention_ms = 30LL * 86'400'000;
  int64_t batch_id_retention_ms = 7LL * 86'400'000;
  // A running job with no sample for this long is ended (ingest.jobs.silent_after_s); 0: never.
  int64_t silent_job_after_ms = 6LL * 3'600'000;
  // Silent jobs ended per round, so that one round stays one short transaction; the rest
  // are ended at the next rounds.
  int silent_jobs_per_round = 500;
};

class Maintenance {
 public:
  // `samples` and `jobs` must outlive this object.
  Maintenance(SampleStore* samples, JobStore* jobs, MaintenanceOptions options,
              std::function<int64_t()> now_unix_ms, platform::Logger logger);
  ~Maintenance();  // stops the timer

  // One round; returns the first error (the others are still attempted).
  absl::Status RunOnce();
  // Runs RunOnce now and then every `interval` on a background thread.
  void Start();
  // Stops the timer and joins the thread. Idempotent.
  void Stop();

 private:
  SampleStore* store_;
  JobStore* jobs_;
  MaintenanceOptions options_;
  std::function<int64_t()> now_unix_ms_;
  platform::Logger logger_;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace goodput::ingest
