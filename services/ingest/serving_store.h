// Stores serving-engine samples (serving_metrics.h) in PostgreSQL, attributed to jobs, and
// infers the workload kind of the jobs they show to be services.
//
// A sample belongs to the first job its labels name (`job_id`, `slurm_job_id`, `hpc_job`, the
// Kubernetes pod as "namespace/name" with its suffixes dropped one at a time) that is
// registered in its cluster; failing that, to the one job that held a GPU on its host at its
// time (a host whose GPUs two jobs held then, or none, leaves it unattributed: `job` NULL).
// A job with no workload kind that has run for `infer_after_ms` by the time of a serving
// sample attributed to it becomes WORKLOAD_KIND_INFERENCE with source INFERRED; a kind the
// scheduler or a label gave is never changed.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "services/ingest/serving_metrics.h"
#include "services/platform/pg_pool.h"

namespace goodput::ingest {

struct ServingOutcome {
  int64_t stored = 0;
  int64_t duplicates = 0;  // already stored (a retried batch)
  int64_t unattributed = 0;
  int64_t refused = 0;  // text PostgreSQL cannot hold; named in `refusals`
  int64_t inferred_jobs = 0;
  std::vector<Refusal> refusals;
};

class ServingStore {
 public:
  // `pool` must outlive the store.
  ServingStore(platform::PgPool* pool, int64_t infer_after_ms)
      : pool_(pool), infer_after_ms_(infer_after_ms) {}

  // Stores `batch` (its cluster must be set) under `batch_id` in one transaction.
  absl::StatusOr<ServingOutcome> Store(const ServingBatch& batch, const std::string& batch_id);

  // Deletes up to `limit` samples older than `cutoff_unix_ms` (the samples' retention), one
  // transaction; returns how many.
  absl::StatusOr<int64_t> ForgetBefore(int64_t cutoff_unix_ms, int64_t limit);

 private:
  platform::PgPool* pool_;
  int64_t infer_after_ms_;
};

}  // namespace goodput::ingest
