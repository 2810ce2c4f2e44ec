#include "services/ingest/job_workers.h"

#include <algorithm>
#include <utility>

namespace goodput::ingest {

JobWorkers::JobWorkers(int threads, int max_pending) : max_pending_(std::max(1, max_pending)) {
  for (int i = 0; i < std::max(1, threads); ++i) threads_.emplace_back([this] { Run(); });
}

JobWorkers::~JobWorkers() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& t : threads_) t.join();
}

bool JobWorkers::TrySubmit(std::function<void()> work) {
  absl::MutexLock lock(&mu_);
  if (pending_ >= max_pending_) return false;
  ++pending_;
  queue_.push_back(std::move(work));
  return true;
}

void JobWorkers::Run() {
  for (;;) {
    std::function<void()> work;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](JobWorkers* w)
               ABSL_EXCLUSIVE_LOCKS_REQUIRED(w->mu_) { return w->stopping_ || !w->queue_.empty(); },
          this));
      if (queue_.empty()) return;  // stopping, nothing left
      work = std::move(queue_.front());
      queue_.pop_front();
    }
    work();
    absl::MutexLock lock(&mu_);
    --pending_;
  }
}

}  // namespace goodput::ingest
