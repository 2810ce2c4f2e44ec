// Reads of the GPU fault events goodput-ingest derives (`gpu_fault_events`, migration 20261128190000;
// services/ingest/fault_events.h): a job's events and a cluster's or host's over a time range.
//
// A job's events are those attributed to it when their sample was stored and those on the
// GPUs it was allocated, within its allocations: a job registered after its GPUs' telemetry
// arrived (its samples attributed later) still finds the faults of its GPUs.
//
//   FaultEventStore faults(&pool);
//   ASSIGN_OR_RETURN(FaultEventPage page, faults.ForJob(job_row_id, {.limit = 100}));
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "services/platform/pg_pool.h"

namespace goodput::ofu {

struct StoredFaultEvent {
  int64_t id = 0;
  std::string cluster;
  std::string host;
  std::optional<int> gpu_index;
  std::string gpu_uuid;
  std::optional<int> mig_instance;
  std::optional<std::string> job_cluster;  // the job's key, when a job held the GPU
  std::optional<std::string> job_id;
  int64_t time_ms = 0;
  std::string signal;  // core::FaultSignalName
  std::optional<int64_t> xid;
  double value = 0;
  std::optional<double> previous_value;
  double count = 0;
  bool counter_reset = false;
  std::string source;
};

struct FaultEventQuery {
  int64_t from_ms = 0;              // event_time >= from
  int64_t to_ms = 253402300799999;  // event_time < to (year 9999)
  int limit = 1000;
  // Resume after this (time, id) (the last event of the previous page).
  std::optional<std::pair<int64_t, int64_t>> after = {};
};

struct FaultEventPage {
  std::vector<StoredFaultEvent> events;
  bool more = false;  // events follow the last one
  int64_t total = 0;  // events matching the query without paging (ForJob only)
};

class FaultEventStore {
 public:
  explicit FaultEventStore(platform::PgPool* pool) : pool_(pool) {}

  // The events of job `job_row_id` (jobs.id), time order.
  absl::StatusOr<FaultEventPage> ForJob(int64_t job_row_id, const FaultEventQuery& query);
  // The events of `cluster` (of `host` when not empty), time order.
  absl::StatusOr<FaultEventPage> ForCluster(const std::string& cluster, const std::string& host,
                                            const FaultEventQuery& query);

 private:
  platform::PgPool* pool_;
};

}  // namespace goodput::ofu
