#include "services/ingest/maintenance.h"

#include <utility>

namespace goodput::ingest {

namespace {
constexpr int64_t kDayMs = 86'400'000;
}

Maintenance::Maintenance(SampleStore* samples, JobStore* jobs, MaintenanceOptions options,
                         std::function<int64_t()> now_unix_ms, platform::Logger logger)
    : store_(samples),
      jobs_(jobs),
      options_(options),
      now_unix_ms_(std::move(now_unix_ms)),
      logger_(std::move(logger)) {}

Maintenance::~Maintenance() { Stop(); }

absl::Status Maintenance::RunOnce() {
  const int64_t now = now_unix_ms_();
  absl::Status first;
  absl::StatusOr<int> created =
      store_->CreatePartitions(now - kDayMs, now + options_.partitions_ahead_days * kDayMs);
  if (!created.ok()) {
    first.Update(created.status());
  } else if (*created > 0) {
    logger_.Info("samples partitions created", {{"count", static_cast<int64_t>(*created)}});
  }
  if (options_.retention_ms > 0) {
    absl::StatusOr<int> dropped = store_->DropPartitionsBefore(now - options_.retention_ms);
    if (!dropped.ok()) {
      first.Update(dropped.status());
    } else if (*dropped > 0) {
      logger_.Info("samples partitions dropped by retention",
                   {{"count", static_cast<int64_t>(*dropped)}});
    }
  }
  if (options_.batch_id_retention_ms > 0) {
    absl::StatusOr<int64_t> forgotten =
        store_->ForgetBatchesBefore(now - options_.batch_id_retention_ms);
    if (!forgotten.ok()) first.Update(forgotten.status());
  }
  if (options_.silent_job_after_ms > 0) {
    absl::StatusOr<std::vector<SilentJob>> ended =
        jobs_->EndSilentJobs(now - options_.silent_job_after_ms, options_.silent_jobs_per_round);
    if (!ended.ok()) {
      first.Update(ended.status());
    } else {
      for (const SilentJob& job : *ended) {
        logger_.Info("job ended: its GPUs sent no sample and no epilog came",
                     {{"cluster", job.key.cluster()},
                      {"job_id", job.key.job_id()},
                      {"end_unix_ms", job.end_unix_ms},
                      {"silent_after_s", options_.silent_job_after_ms / 1000}});
      }
    }
  }
  if (!first.ok()) {
    logger_.Warn("ingest maintenance failed; retrying at the next tick",
                 {{"error", std::string(first.message())}});
  }
  return first;
}

void Maintenance::Start() {
  thread_ = std::thread([this] {
    while (true) {
      (void)RunOnce();
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&stop_), options_.interval)) return;
    }
  });
}

void Maintenance::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

}  // namespace goodput::ingest
