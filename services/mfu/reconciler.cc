#include "services/mfu/reconciler.h"

#include <utility>

namespace goodput::mfu {

Reconciler::Reconciler(ReconciliationStore* store, std::function<void()> on_events,
                       ReconcilerOptions options, platform::Logger logger)
    : store_(store),
      on_events_(std::move(on_events)),
      options_(options),
      logger_(std::move(logger)) {}

Reconciler::~Reconciler() { Stop(); }

absl::Status Reconciler::ReconcileOne(const std::string& cluster, const std::string& job_id) {
  absl::StatusOr<int> events = store_->ReconcileJob(cluster, job_id);
  if (!events.ok()) {
    logger_.Warn("reconciliation failed",
                 {{"cluster", cluster}, {"job_id", job_id}, {"error", events.status().ToString()}});
    return events.status();
  }
  if (*events > 0 && on_events_) on_events_();
  return absl::OkStatus();
}

absl::Status Reconciler::StepOnce() {
  while (true) {
    absl::StatusOr<std::vector<std::pair<std::string, std::string>>> jobs =
        store_->PendingJobs(options_.jobs_per_step);
    if (!jobs.ok()) return jobs.status();
    // A job that cannot be reconciled (PostgreSQL down, or data it cannot use) must not hold
    // up the others: go on, report the first failure, and retry after the backoff.
    absl::Status first_error;
    for (const auto& [cluster, job_id] : *jobs) {
      absl::Status s = ReconcileOne(cluster, job_id);
      if (!s.ok() && first_error.ok()) first_error = s;
    }
    if (!first_error.ok()) return first_error;
    if (static_cast<int>(jobs->size()) < options_.jobs_per_step) return absl::OkStatus();
  }
}

absl::Status Reconciler::ReconcileIfPending(const std::string& cluster, const std::string& job_id) {
  absl::StatusOr<bool> pending = store_->IsPending(cluster, job_id);
  if (!pending.ok()) return pending.status();
  if (!*pending) return absl::OkStatus();
  return ReconcileOne(cluster, job_id);
}

void Reconciler::Run() {
  while (true) {
    const bool failed = !StepOnce().ok();
    absl::MutexLock lock(&mu_);
    if (stop_) return;
    auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stop_ || wake_; };
    mu_.AwaitWithTimeout(absl::Condition(&ready),
                         failed ? options_.retry_backoff : options_.poll_interval);
    wake_ = false;
    if (stop_) return;
  }
}

void Reconciler::Start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] { Run(); });
}

void Reconciler::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void Reconciler::Wake() {
  absl::MutexLock lock(&mu_);
  wake_ = true;
}

}  // namespace goodput::mfu
