#include "services/mfu/reconciler.h"

#include <utility>

namespace goodput::mfu {

Reconciler::Reconciler(ReconciliationStore* store, std::function<void()> on_events,
                       ReconcilerOptions options, platform::Logger logger)
    : store_(store),
      on_events_(std::move(on_events)),
      options_(options),
      logger_(std::move(logger)),
      loop_([this] { return StepOnce().ok(); },
            {.poll_interval = options_.poll_interval, .retry_backoff = options_.retry_backoff}) {}

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

void Reconciler::Start() { loop_.Start(); }

void Reconciler::Stop() { loop_.Stop(); }

void Reconciler::Wake() { loop_.Wake(); }

}  // namespace goodput::mfu
