// Raw samples in PostgreSQL: the attribution context of a batch, durable batch writes with
// COPY into the time-partitioned `samples` table, batch-id idempotency, and partition and
// batch-id maintenance.
//
// A batch is written in one transaction: its (cluster, source, id) goes into `ingest_batches`
// first (already there means a retry: nothing is written and the first outcome is returned
// with `duplicate = true`; two concurrent deliveries of one id serialize on the primary key), then
// its rows are streamed with COPY, its fault readings become fault events against the GPUs'
// state (fault_events.h, tables `gpu_fault_state` and `gpu_fault_events`), then it commits. Only
// after WriteBatch returns OK is the batch durable, and only then may the caller acknowledge it.
//
//   SampleStore store(pool);
//   ASSIGN_OR_RETURN(Attributor attributor, store.LoadAttributor("eos", samples));
//   ...
//   ASSIGN_OR_RETURN(BatchWriteResult r, store.WriteBatch(batch));
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "services/ingest/attribution.h"
#include "services/ingest/sample.h"
#include "services/platform/pg_pool.h"

namespace goodput::ingest {

// One batch ready to store: validated samples with the job each was attributed to.
struct BatchWrite {
  std::string batch_id;
  std::string cluster;
  std::string source;  // "grpc", "exposition", "scrape", "remote_write"
  std::vector<const Sample*> samples;
  std::vector<std::optional<int64_t>> job_row_ids;  // parallel to `samples`
  int64_t refused_count = 0;                        // refused before storage
  // Host names as printed, per job and canonical host, to record (job_hosts_seen) with the
  // batch: only forms the writer has not recorded yet.
  struct HostSeen {
    int64_t job_row_id = 0;
    std::string host;
    std::string reported_as;
  };
  std::vector<HostSeen> hosts_seen = {};
};

struct BatchWriteResult {
  bool duplicate = false;
  int64_t stored_count = 0;
  int64_t refused_count = 0;
  int64_t unattributed_count = 0;
  // Fault events derived from the batch's fault readings (fault_events.h).
  int64_t fault_event_count = 0;
  // For a duplicate: when the first delivery was committed.
  int64_t first_received_unix_ms = 0;
};

class SampleStore {
 public:
  // `pool` must outlive the store.
  explicit SampleStore(platform::PgPool* pool) : pool_(pool) {}

  // The allocations of `cluster` covering the samples' hosts and time span, and the jobs
  // their labels name, ready to attribute them.
  // Hosts are matched as CanonicalHost names under `rules`; the samples' hosts are canonical
  // already (IngestPipeline::Ingest).
  absl::StatusOr<Attributor> LoadAttributor(const std::string& cluster,
                                            const std::vector<const Sample*>& samples,
                                            const IdentityRules& rules = IdentityRules());

  // The stored outcome of `batch_id` of `cluster` and `source`, or nullopt if it was never
  // stored. Batch ids are scoped by (cluster, source): equal ids of two clusters are two
  // batches.
  absl::StatusOr<std::optional<BatchWriteResult>> FindBatch(const std::string& cluster,
                                                            const std::string& source,
                                                            const std::string& batch_id);

  // Writes the batch as described in the file comment (creating missing daily partitions
  // first). The result counts refused samples as given by the caller.
  absl::StatusOr<BatchWriteResult> WriteBatch(const BatchWrite& batch);

  // The elected replica of a Prometheus HA pair for `cluster` (remote_write.h, HaOptions),
  // given that `replica` sends now: `replica` if it is the elected one or the elected one has
  // been silent for `failover_timeout_ms`, else the elected one.
  absl::StatusOr<std::string> ElectHaReplica(const std::string& cluster, const std::string& replica,
                                             int64_t failover_timeout_ms);

  // Creates the daily partitions for [from, to] that do not exist; returns how many.
  absl::StatusOr<int> CreatePartitions(int64_t from_unix_ms, int64_t to_unix_ms);
  // Drops the daily partitions that end at or before `cutoff`; returns how many.
  absl::StatusOr<int> DropPartitionsBefore(int64_t cutoff_unix_ms);
  // Forgets batch ids received before `cutoff` (their retries are then stored again).
  absl::StatusOr<int64_t> ForgetBatchesBefore(int64_t cutoff_unix_ms);

 private:
  absl::Status EnsurePartitions(int64_t min_unix_ms, int64_t max_unix_ms);

  platform::PgPool* pool_;
  absl::Mutex mu_;
  std::set<int64_t> known_days_ ABSL_GUARDED_BY(mu_);  // UTC days with a partition
};

}  // namespace goodput::ingest
