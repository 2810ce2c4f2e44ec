// The job registry in PostgreSQL (tables `jobs` and `job_gpus`): register, update, end,
// read and list jobs, keeping GPU allocations consistent.
//
// Registration is idempotent on the job key: a second registration merges its allocations
// into the stored ones (each node's prolog may register its own GPUs) and fills fields that
// were empty; a field that differs from a stored non-empty value is ALREADY_EXISTS naming
// the field. An allocation overlapping in time a GPU held by another job is
// FAILED_PRECONDITION naming both job ids (the table's exclusion constraints keep concurrent
// registrations honest too). Samples stored before the job was registered whose GPU and time
// fall in a new allocation, or whose `hpc_job`/Osmo workflow label names the job, are
// attached to it in the same transaction.
//
// goodput ends a job on its own when its epilog evidently never came: when another job is
// registered on one of its GPUs (see RegisterJob in job.proto), and when its GPUs have been
// silent for long (EndSilentJobs, run by Maintenance). Such a job is JOB_STATE_ENDED with
// `labels["ended_by"]` = "next_job" or "silent"; a later EndJob with the scheduler's end
// replaces the guess (End).
//
// This adapter speaks the API's message types (goodput.v1.Job) so that the RPC layer stays a
// thin translation; times are passed to SQL as milliseconds since the epoch.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "goodput/v1/job.pb.h"
#include "services/platform/pg_pool.h"

namespace goodput::ingest {

struct RegisterJobResult {
  v1::Job job;
  bool created = false;
  int64_t attached_sample_count = 0;
};

// A job EndSilentJobs ended, and where.
struct SilentJob {
  v1::JobKey key;
  int64_t end_unix_ms = 0;
};

struct ListJobsResult {
  std::vector<v1::Job> jobs;
  std::string next_page_token;
};

class JobStore {
 public:
  // `pool` must outlive the store.
  // Labels a registration's kind may come from when it sets none (Kubernetes pod labels an
  // operator copies to the job), first present wins.
  static std::vector<std::string> DefaultWorkloadKindLabels() {
    return {"goodput.io/workload-kind", "goodput_workload_kind"};
  }
  explicit JobStore(platform::PgPool* pool,
                    std::vector<std::string> workload_kind_labels = DefaultWorkloadKindLabels())
      : pool_(pool), workload_kind_labels_(std::move(workload_kind_labels)) {}

  // See the file comment. INVALID_ARGUMENT for a request without key, scheduler, or a start
  // time (unless PENDING), or with an allocation without host or device.
  absl::StatusOr<RegisterJobResult> Register(const v1::Job& job, int64_t now_unix_ms);

  // Changes the fields named by `paths` ("user", "team", "name", "workload_fingerprint",
  // "gpu_model", "labels", "state", "start_time", "end_time", "gpu_count", "scheduler",
  // "allocations" = merge more allocations, "workload_kind" = set by the scheduler, or cleared
  // when unspecified). NOT_FOUND for an unknown job.
  absl::StatusOr<v1::Job> Update(const v1::Job& job, const std::vector<std::string>& paths,
                                 int64_t now_unix_ms);

  // Sets the end time (`end_unix_ms`, or now) and final state, and closes open allocations.
  // Ending an ended job again returns it unchanged unless a different end time is given
  // (FAILED_PRECONDITION naming both), except a JOB_STATE_ENDED job given a real final
  // state, or one goodput ended on its own (`labels["ended_by"]`): it takes the given end
  // and state, and its allocations closed by the earlier end move to the new end (up to the
  // GPU's next job), taking along the samples they then cover, or letting go of those after
  // an earlier end. NOT_FOUND for an unknown job.
  absl::StatusOr<v1::Job> End(const v1::JobKey& key, std::optional<int64_t> end_unix_ms,
                              v1::JobState final_state, int64_t now_unix_ms);

  // Ends up to `limit` running jobs whose epilog evidently never came: they have held open
  // allocations since before `silent_since_unix_ms` and have no sample attributed at or
  // after it. Each is ended, its open allocations closed, at its last sample (or the start
  // of its current run when it has none): state JOB_STATE_ENDED, `labels["ended_by"]` =
  // "silent". Samples that arrive later for those GPUs stay unattributed until the GPUs are
  // registered again or the scheduler's EndJob moves the end (End).
  absl::StatusOr<std::vector<SilentJob>> EndSilentJobs(int64_t silent_since_unix_ms, int limit);

  // NOT_FOUND naming the job when unknown.
  absl::StatusOr<v1::Job> Get(const v1::JobKey& key);

  // Jobs matching every filter of `request`, newest start first, paginated.
  absl::StatusOr<ListJobsResult> List(const v1::ListJobsRequest& request);

 private:
  platform::PgPool* pool_;
  std::vector<std::string> workload_kind_labels_;
};

}  // namespace goodput::ingest
