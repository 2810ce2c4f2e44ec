// The durable consumer of goodput-ofu: one background thread that reads attributed samples
// from PostgreSQL by watermark (see ofu_store.h), feeds them to the window engine, and
// commits the resulting windows, late counts, job progress and the new watermark in one
// transaction. PostgreSQL is the source of truth; a push from ingest (Wake) only makes the
// next read happen at once instead of after the poll interval.
//
// Late samples (for windows already final) are counted and their windows recomputed from the
// stored samples in the same commit (see RecomputeFinalWindows), so the revised windows reach
// mfu and alerting through the forwarding like any revision.
//
// Restart: Start() loads the watermark and restores, from the samples table, the samples of
// every window that was not final, so a restarted consumer continues exactly where the last
// commit left off: every sample is counted once. If a commit fails, the consumer throws its
// in-memory state away and restores it the same way before reading again.
//
//   OfuConsumer consumer(&store, &catalog, engine_options, {}, [&](const CommittedWindows& c) {
//     cache.Publish(c);
//   });
//   consumer.Start();
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "services/ofu/ofu_store.h"
#include "services/ofu/window_engine.h"
#include "services/platform/logging.h"

namespace goodput::ofu {

struct ConsumerOptions {
  int page_limit = 20'000;                          // samples per read and commit
  // Final windows that late samples reach are recomputed from the stored samples
  // (RecomputeFinalWindows), in spans of at most this many GPU-windows (at least one window,
  // at most an hour): what a recomputation holds in memory at once. 0: late samples are left
  // out (kFlagLateSamplesDropped), as before.
  int recompute_gpu_windows = 20'000;
  absl::Duration poll_interval = absl::Seconds(1);  // between reads when idle
  absl::Duration retry_backoff = absl::Seconds(1);  // after a PostgreSQL error
};

// What one commit produced, handed to the listener after the commit.
struct CommittedWindows {
  std::vector<WindowResult> windows;
  // Job id -> (cluster, job id) for the jobs of `windows`.
  absl::flat_hash_map<int64_t, std::pair<std::string, std::string>> job_keys;
};

struct ConsumerStats {
  int64_t rounds_completed = 0;
  int64_t samples_consumed = 0;
  int64_t late_samples = 0;
  int64_t windows_recomputed = 0;  // job-level windows recomputed for late samples
  int64_t windows_written = 0;
  int64_t commit_failures = 0;
};

class OfuConsumer {
 public:
  using Listener = std::function<void(const CommittedWindows&)>;
  // Arrival time source (unix ms); injectable for tests.
  using Clock = std::function<int64_t()>;

  OfuConsumer(OfuStore* store, const core::GpuCatalog* catalog, EngineOptions engine_options,
              ConsumerOptions options, Listener listener, platform::Logger logger,
              Clock clock = nullptr);
  ~OfuConsumer();

  // Starts the thread, which restores state first (retrying while PostgreSQL is unreachable
  // or not migrated yet, so the service can start before its database).
  absl::Status Start();
  // Stops the thread after the current step (no partial commit is left behind).
  void Stop();
  // Makes the thread read now (ingest pushed a batch).
  void Wake();

  // Runs one read-and-commit step on the caller's thread (for tests and tools; do not mix
  // with Start). True when the round was complete (nothing more to read right now).
  absl::StatusOr<bool> StepOnce();
  // Restores from PostgreSQL without starting the thread.
  absl::Status Restore();

  // Blocks until a round that began after this call has completed, or `timeout` passed.
  bool WaitForFreshRound(absl::Duration timeout);

  ConsumerStats Stats() const;
  size_t EngineMemoryBytes() const;

 private:
  void Run();
  absl::Status Feed(const std::vector<ConsumedSample>& page, int64_t now_ms);
  // Recomputes the final windows `late` reached, marks those counts recomputed and puts the
  // windows into `windows` (in place of any the engine emitted for the same window).
  absl::StatusOr<int64_t> RecomputeLate(std::vector<LateCount>& late,
                                        std::vector<WindowResult>& windows)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(engine_mu_);

  OfuStore* store_;
  const core::GpuCatalog* catalog_;
  EngineOptions engine_options_;
  ConsumerOptions options_;
  Listener listener_;
  platform::Logger logger_;
  Clock clock_;

  std::unique_ptr<WindowEngine> engine_;  // touched only by the consumer thread
  ConsumerState state_;
  absl::flat_hash_map<int64_t, JobRecord> jobs_;

  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool wake_ ABSL_GUARDED_BY(mu_) = false;
  ConsumerStats stats_ ABSL_GUARDED_BY(mu_);
  mutable absl::Mutex engine_mu_;
  std::thread thread_;
};

}  // namespace goodput::ofu
