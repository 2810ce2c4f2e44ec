// JobWorkers: the threads JobService's calls run on, apart from gRPC's callback threads and
// from sample ingest, with a bound on the calls waiting for them.
//
// gRPC runs callback-API methods on a few shared threads (about half the cores); a
// registration that blocked one of them for its database work held up PushSamples streams
// served on the same threads. JobService's callback methods therefore only queue their work
// here and return; a worker runs it and finishes the call. Beyond `max_pending` calls queued
// or running, a call is refused at once (RESOURCE_EXHAUSTED; HTTP 429 with Retry-After),
// so a burst of registrations holds neither threads nor memory without bound.
//
//   JobWorkers workers(/*threads=*/2, /*max_pending=*/64);
//   if (!workers.TrySubmit([reactor, ...] { reactor->Finish(DoRegisterJob(...)); })) { ... }
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace goodput::ingest {

class JobWorkers {
 public:
  // Starts `threads` workers (at least 1); at most `max_pending` (at least 1) calls queued
  // or running at once.
  JobWorkers(int threads, int max_pending);
  // Runs what is queued, then joins the workers.
  ~JobWorkers();
  JobWorkers(const JobWorkers&) = delete;
  JobWorkers& operator=(const JobWorkers&) = delete;

  // Queues `work`; false (and `work` dropped) when `max_pending` calls are queued or running.
  bool TrySubmit(std::function<void()> work);

  int max_pending() const { return max_pending_; }

 private:
  void Run();

  const int max_pending_;
  absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  int pending_ ABSL_GUARDED_BY(mu_) = 0;  // queued or running
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace goodput::ingest
