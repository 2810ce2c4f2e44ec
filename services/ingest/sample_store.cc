#include "services/ingest/sample_store.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "services/ingest/fault_events.h"

namespace goodput::ingest {
namespace {

constexpr int64_t kDayMs = 86'400'000;

// Columns written by COPY, in row order.
const std::vector<std::string>& CopyColumns() {
  static const auto* const kColumns = new std::vector<std::string>{"sample_time",
                                                                   "batch_id",
                                                                   "cluster",
                                                                   "host",
                                                                   "gpu_index",
                                                                   "gpu_uuid",
                                                                   "gpu_model",
                                                                   "mig_profile",
                                                                   "mig_instance_id",
                                                                   "job",
                                                                   "tensor_active",
                                                                   "sm_clock_mhz",
                                                                   "sm_active",
                                                                   "sm_occupancy",
                                                                   "dram_active",
                                                                   "fp16_active",
                                                                   "fp32_active",
                                                                   "fp64_active",
                                                                   "gr_engine_active",
                                                                   "gpu_util",
                                                                   "fb_used_mib",
                                                                   "fb_free_mib",
                                                                   "power_w",
                                                                   "energy_mj",
                                                                   "temperature_c",
                                                                   "nvlink_tx_bytes",
                                                                   "nvlink_rx_bytes",
                                                                   "pcie_tx_bytes",
                                                                   "pcie_rx_bytes",
                                                                   "clock_throttle_reasons",
                                                                   "labels"};
  return *kColumns;
}
constexpr size_t kCopyColumnCount = 31;
constexpr size_t kFirstValueColumn = 10;  // tensor_active; SampleField order from here on

std::string FormatDouble(double value) {
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
  return std::string(buf, end);
}

// A `real` column's text as the 4-byte float PostgreSQL will store: values below the
// smallest float become 0 here rather than an "out of range" error that fails the COPY
// (validation has refused magnitudes above the largest float).
std::string FormatReal(double value) {
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), static_cast<float>(value));
  return std::string(buf, end);
}

// "2024-05-01 12:00:00.123+00"
std::string FormatTimestamp(int64_t unix_ms) {
  return absl::FormatTime("%Y-%m-%d %H:%M:%E3S+00", absl::FromUnixMillis(unix_ms),
                          absl::UTCTimeZone());
}

int64_t DayOf(int64_t unix_ms) {
  return unix_ms >= 0 ? unix_ms / kDayMs : (unix_ms - kDayMs + 1) / kDayMs;
}

// A PostgreSQL text[] literal of `values` ("{"a","b"}").
std::string TextArray(const std::vector<std::string>& values) {
  std::string out = "{";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out.push_back(',');
    out.push_back('"');
    for (char c : values[i]) {
      if (c == '"' || c == '\\') out.push_back('\\');
      out.push_back(c);
    }
    out.push_back('"');
  }
  out.push_back('}');
  return out;
}

std::array<std::optional<std::string>, kCopyColumnCount> Row(const BatchWrite& batch,
                                                             const Sample& s,
                                                             std::optional<int64_t> job) {
  std::array<std::optional<std::string>, kCopyColumnCount> row;
  row[0] = FormatTimestamp(s.time_unix_ms);
  row[1] = batch.batch_id;
  row[2] = batch.cluster;
  row[3] = s.gpu.host;
  if (s.gpu.gpu_index) row[4] = absl::StrCat(*s.gpu.gpu_index);
  if (!s.gpu.uuid.empty()) row[5] = s.gpu.uuid;
  if (!s.gpu_model.empty()) row[6] = s.gpu_model;
  if (s.gpu.mig) {
    row[7] = s.gpu.mig->profile;
    row[8] = absl::StrCat(s.gpu.mig->gpu_instance_id);
  }
  if (job) row[9] = absl::StrCat(*job);
  for (int f = 0; f < kSampleFieldCount; ++f) {
    const auto& v = s.values[f];
    if (!v.has_value()) continue;
    if (static_cast<SampleField>(f) == SampleField::kClockThrottleReasons) {
      // bigint column: keep the bit pattern of values above 2^63.
      row[kFirstValueColumn + f] = absl::StrCat(static_cast<int64_t>(static_cast<uint64_t>(*v)));
    } else if (StoredAsReal(static_cast<SampleField>(f))) {
      row[kFirstValueColumn + f] = FormatReal(*v);
    } else {
      row[kFirstValueColumn + f] = FormatDouble(*v);
    }
  }
  if (!s.labels.empty() || (s.gpu.mig && s.gpu.mig->compute_instance_id)) {
    nlohmann::json labels = nlohmann::json::object();
    for (const auto& [k, v] : s.labels) labels[k] = v;
    if (s.gpu.mig && s.gpu.mig->compute_instance_id) {
      labels["mig_compute_instance_id"] = absl::StrCat(*s.gpu.mig->compute_instance_id);
    }
    row[30] = labels.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  return row;
}

}  // namespace

namespace {

// The stored fault states of `keys` (a state that cannot be read is started again rather
// than failing every batch of its GPU); with `lock`, locked FOR UPDATE in key order.
absl::flat_hash_map<std::string, GpuFaultState> ReadFaultStates(pqxx::work& txn,
                                                                const BatchWrite& batch,
                                                                const std::string& keys_array,
                                                                bool lock) {
  pqxx::result rows = txn.exec_params(
      lock ? "SELECT gpu_key, signals::text FROM gpu_fault_state "
             "WHERE cluster = $1 AND gpu_key = ANY($2::text[]) ORDER BY gpu_key FOR UPDATE"
           : "SELECT gpu_key, signals::text FROM gpu_fault_state "
             "WHERE cluster = $1 AND gpu_key = ANY($2::text[])",
      batch.cluster, keys_array);
  absl::flat_hash_map<std::string, GpuFaultState> states;
  for (const auto& r : rows) {
    absl::StatusOr<GpuFaultState> state = DecodeFaultState(r[1].as<std::string>());
    states[r[0].as<std::string>()] = state.ok() ? *std::move(state) : GpuFaultState();
  }
  return states;
}

// Derives the batch's fault events against its GPUs' fault state and writes them and the
// changed states.
//
// First without locking: the states are read in one statement (one snapshot) and the batch
// is checked against them. A batch that changes no state, as nearly every batch of steady
// fault fields does, then writes and locks nothing: having written nothing, it is as if it
// ran before any concurrent batch of the same GPUs, which compare against the states it saw.
// (Locking every GPU's row for every batch cost PostgreSQL more than the samples' COPY: a
// row lock is a write of the row.) Otherwise the states are locked (the rows of GPUs seen
// for the first time created), read again and the batch is checked again, as the states may
// have moved meanwhile; keys are locked in sorted order, so two batches of overlapping GPUs
// lock in the same order.
int64_t WriteFaultEvents(pqxx::work& txn, const BatchWrite& batch) {
  const std::vector<std::string> keys = FaultGpuKeys(batch.samples);
  if (keys.empty()) return 0;
  const std::string keys_array = TextArray(keys);
  {
    absl::flat_hash_map<std::string, GpuFaultState> seen =
        ReadFaultStates(txn, batch, keys_array, /*lock=*/false);
    const FaultDetection unlocked = DetectFaultEvents(batch.samples, batch.job_row_ids, &seen);
    if (unlocked.changed_gpus.empty() && unlocked.events.empty()) return 0;
  }
  txn.exec_params(
      "INSERT INTO gpu_fault_state (cluster, gpu_key) "
      "SELECT $1, k FROM unnest($2::text[]) AS k ORDER BY k ON CONFLICT DO NOTHING",
      batch.cluster, keys_array);
  absl::flat_hash_map<std::string, GpuFaultState> states =
      ReadFaultStates(txn, batch, keys_array, /*lock=*/true);
  FaultDetection detected = DetectFaultEvents(batch.samples, batch.job_row_ids, &states);
  if (!detected.changed_gpus.empty()) {
    std::vector<std::string> changed_keys, encoded;
    for (const std::string& key : detected.changed_gpus) {
      changed_keys.push_back(key);
      encoded.push_back(EncodeFaultState(states[key]));
    }
    txn.exec_params(
        "UPDATE gpu_fault_state s SET signals = v.signals::jsonb, updated_at = now() "
        "FROM unnest($2::text[], $3::text[]) AS v(k, signals) "
        "WHERE s.cluster = $1 AND s.gpu_key = v.k",
        batch.cluster, TextArray(changed_keys), TextArray(encoded));
  }
  if (!detected.events.empty()) {
    pqxx::stream_to copy(
        txn, "gpu_fault_events",
        std::vector<std::string>{"cluster", "host", "gpu_index", "gpu_uuid", "mig_instance_id",
                                 "job", "event_time", "signal", "xid", "value", "previous_value",
                                 "count", "counter_reset", "batch_id", "source"});
    for (const FaultEvent& e : detected.events) {
      const Sample& s = *e.sample;
      std::array<std::optional<std::string>, 15> row;
      row[0] = batch.cluster;
      row[1] = s.gpu.host;
      if (s.gpu.gpu_index) row[2] = absl::StrCat(*s.gpu.gpu_index);
      if (!s.gpu.uuid.empty()) row[3] = s.gpu.uuid;
      if (s.gpu.mig) row[4] = absl::StrCat(s.gpu.mig->gpu_instance_id);
      if (e.job) row[5] = absl::StrCat(*e.job);
      row[6] = FormatTimestamp(s.time_unix_ms);
      row[7] = std::string(core::FaultSignalName(e.reading.signal));
      if (e.reading.signal == core::FaultSignal::kXid) {
        row[8] = absl::StrCat(static_cast<int64_t>(e.edge.value));
      } else if (e.reading.signal == core::FaultSignal::kXidCount) {
        row[8] = absl::StrCat(e.reading.xid);
      }
      row[9] = FormatDouble(e.edge.value);
      if (e.edge.previous_value) row[10] = FormatDouble(*e.edge.previous_value);
      row[11] = FormatDouble(e.edge.count);
      row[12] = e.edge.counter_reset ? "t" : "f";
      row[13] = batch.batch_id;
      row[14] = batch.source;
      copy << row;
    }
    copy.complete();
  }
  return static_cast<int64_t>(detected.events.size());
}

}  // namespace

absl::StatusOr<Attributor> SampleStore::LoadAttributor(const std::string& cluster,
                                                       const std::vector<const Sample*>& samples,
                                                       const IdentityRules& rules) {
  if (samples.empty()) return Attributor({}, {}, rules);
  absl::flat_hash_set<std::string> hosts;
  absl::flat_hash_set<std::string> uuids;
  absl::flat_hash_set<std::string> label_ids;
  int64_t min_ms = samples.front()->time_unix_ms;
  int64_t max_ms = min_ms;
  for (const Sample* s : samples) {
    hosts.insert(s->gpu.host);  // canonical: IngestPipeline made it so
    if (!s->gpu.uuid.empty()) uuids.insert(s->gpu.uuid);
    min_ms = std::min(min_ms, s->time_unix_ms);
    max_ms = std::max(max_ms, s->time_unix_ms);
    for (std::string& id : LabelJobIds(*s, rules.pod_labels)) label_ids.insert(std::move(id));
  }
  const std::string hosts_array = TextArray({hosts.begin(), hosts.end()});
  const std::string uuids_array = TextArray({uuids.begin(), uuids.end()});
  const std::string ids_array = TextArray({label_ids.begin(), label_ids.end()});
  return pool_->RunTransactionFor<Attributor>([&](pqxx::work& txn) -> absl::StatusOr<Attributor> {
    std::vector<AllocationRecord> allocations;
    // The allocations of the batch's hosts and UUIDs: one index probe per host name, short
    // name and UUID (LATERAL ... OFFSET 0 keeps them probes), each on an index that its one
    // equality selects by, whatever PostgreSQL's statistics say: a set-wide lookup left the
    // plan to them, and for a cluster or a fleet registered since the last ANALYZE they made
    // it scan every allocation of the cluster for each batch (migration 0059). The time
    // overlap is tested as `(...) IS TRUE` so that no probe can be served by the exclusion
    // constraints' GiST indexes on it instead. UNION drops an allocation found twice.
    static constexpr char kColumns[] =
        "SELECT job, host, gpu_index, gpu_uuid, "
        "(extract(epoch FROM lower(valid)) * 1000)::bigint, "
        "CASE WHEN upper_inf(valid) THEN NULL "
        "ELSE (extract(epoch FROM upper(valid)) * 1000)::bigint END, mig_instance ";
    static constexpr char kDuring[] =
        "(g.valid && tstzrange(to_timestamp($4::bigint / 1000.0), "
        "to_timestamp($5::bigint / 1000.0), '[]')) IS TRUE";
    static const std::string kLookup = absl::StrCat(
        kColumns, "FROM unnest($2::text[]) AS k(name), LATERAL (SELECT * FROM job_gpus g ",
        "WHERE g.cluster = $1 AND g.host = k.name AND ", kDuring, " OFFSET 0) a UNION ",
        // Allocations registered before hosts were canonical at registration: found by their
        // short lower-case name too (the Attributor canonicalizes them).
        kColumns, "FROM unnest($2::text[]) AS k(name), LATERAL (SELECT * FROM job_gpus g ",
        "WHERE lower(split_part(g.host, '.', 1)) = k.name AND ", kDuring,
        " OFFSET 0) a WHERE a.cluster = $1 UNION ", kColumns,
        "FROM unnest($3::text[]) AS u(id), LATERAL (SELECT * FROM job_gpus g ",
        "WHERE g.gpu_uuid = u.id AND ", kDuring, " OFFSET 0) a WHERE a.cluster = $1");
    pqxx::result rows = txn.exec_params(
        kLookup,
        cluster, hosts_array, uuids_array, min_ms, max_ms);
    allocations.reserve(rows.size());
    for (const auto& r : rows) {
      AllocationRecord a;
      a.job_row_id = r[0].as<int64_t>();
      a.host = r[1].as<std::string>();
      if (!r[2].is_null()) a.gpu_index = r[2].as<int>();
      if (!r[3].is_null()) a.uuid = r[3].as<std::string>();
      a.start_unix_ms = r[4].as<int64_t>();
      if (!r[5].is_null()) a.end_unix_ms = r[5].as<int64_t>();
      if (!r[6].is_null()) a.mig_instance = r[6].as<int>();
      allocations.push_back(std::move(a));
    }
    absl::flat_hash_map<std::string, int64_t> jobs_by_id;
    if (!label_ids.empty()) {
      pqxx::result jobs = txn.exec_params(
          "SELECT job_id, id FROM jobs WHERE cluster = $1 AND job_id = ANY($2::text[])", cluster,
          ids_array);
      for (const auto& r : jobs) jobs_by_id[r[0].as<std::string>()] = r[1].as<int64_t>();
    }
    return Attributor(std::move(allocations), std::move(jobs_by_id), rules);
  });
}

namespace {

// The first delivery of (cluster, source, batch_id): rows written before batch ids were
// scoped by cluster have cluster '' and still count.
constexpr const char* kFindBatchSql =
    "SELECT stored_count, refused_count, unattributed_count, "
    "(extract(epoch FROM received_at) * 1000)::bigint FROM ingest_batches "
    "WHERE cluster IN ($1, '') AND source = $2 AND batch_id = $3 "
    "ORDER BY cluster DESC LIMIT 1";

std::optional<BatchWriteResult> FirstDelivery(pqxx::work& txn, const std::string& cluster,
                                              const std::string& source,
                                              const std::string& batch_id) {
  pqxx::result r = txn.exec_params(kFindBatchSql, cluster, source, batch_id);
  if (r.empty()) return std::nullopt;
  return BatchWriteResult{.duplicate = true,
                          .stored_count = r[0][0].as<int64_t>(),
                          .refused_count = r[0][1].as<int64_t>(),
                          .unattributed_count = r[0][2].as<int64_t>(),
                          .first_received_unix_ms = r[0][3].as<int64_t>()};
}

}  // namespace

absl::StatusOr<std::optional<BatchWriteResult>> SampleStore::FindBatch(
    const std::string& cluster, const std::string& source, const std::string& batch_id) {
  return pool_->RunTransactionFor<std::optional<BatchWriteResult>>(
      [&](pqxx::work& txn) -> absl::StatusOr<std::optional<BatchWriteResult>> {
        return FirstDelivery(txn, cluster, source, batch_id);
      });
}

absl::Status SampleStore::EnsurePartitions(int64_t min_unix_ms, int64_t max_unix_ms) {
  const int64_t first = DayOf(min_unix_ms);
  const int64_t last = DayOf(max_unix_ms);
  {
    absl::MutexLock lock(&mu_);
    bool all_known = true;
    for (int64_t d = first; d <= last && all_known; ++d) all_known = known_days_.contains(d);
    if (all_known) return absl::OkStatus();
  }
  absl::StatusOr<int> created = CreatePartitions(min_unix_ms, max_unix_ms);
  if (!created.ok()) return created.status();
  absl::MutexLock lock(&mu_);
  for (int64_t d = first; d <= last; ++d) known_days_.insert(d);
  return absl::OkStatus();
}

absl::StatusOr<BatchWriteResult> SampleStore::WriteBatch(const BatchWrite& batch) {
  if (batch.samples.size() != batch.job_row_ids.size()) {
    return absl::InternalError("WriteBatch: samples and job_row_ids differ in length");
  }
  BatchWriteResult result;
  result.stored_count = static_cast<int64_t>(batch.samples.size());
  result.refused_count = batch.refused_count;
  for (const auto& job : batch.job_row_ids) result.unattributed_count += job.has_value() ? 0 : 1;
  if (!batch.samples.empty()) {
    int64_t min_ms = batch.samples.front()->time_unix_ms;
    int64_t max_ms = min_ms;
    for (const Sample* s : batch.samples) {
      min_ms = std::min(min_ms, s->time_unix_ms);
      max_ms = std::max(max_ms, s->time_unix_ms);
    }
    if (absl::Status s = EnsurePartitions(min_ms, max_ms); !s.ok()) return s;
  }
  return pool_->RunTransactionFor<BatchWriteResult>(
      [&](pqxx::work& txn) -> absl::StatusOr<BatchWriteResult> {
        // Claims the id unless it is taken, by this cluster or by a row stored before ids were
        // scoped by cluster (cluster ''). Two concurrent deliveries of one id serialize on the
        // primary key: the second waits for the first to commit, then inserts nothing and
        // reads its outcome.
        pqxx::result claimed = txn.exec_params(
            "INSERT INTO ingest_batches (cluster, batch_id, source, sample_count, stored_count, "
            "refused_count, unattributed_count) SELECT $1, $2, $3, $4, $5, $6, $7 "
            "WHERE NOT EXISTS (SELECT 1 FROM ingest_batches WHERE cluster = '' AND "
            "source = $3 AND batch_id = $2) "
            "ON CONFLICT (cluster, source, batch_id) DO NOTHING RETURNING batch_id",
            batch.cluster, batch.batch_id, batch.source, result.stored_count + result.refused_count,
            result.stored_count, result.refused_count, result.unattributed_count);
        if (claimed.empty()) {
          std::optional<BatchWriteResult> first =
              FirstDelivery(txn, batch.cluster, batch.source, batch.batch_id);
          return first.value_or(BatchWriteResult{.duplicate = true});
        }
        if (!batch.samples.empty()) {
          pqxx::stream_to copy(txn, "samples", CopyColumns());
          for (size_t i = 0; i < batch.samples.size(); ++i) {
            copy << Row(batch, *batch.samples[i], batch.job_row_ids[i]);
          }
          copy.complete();
        }
        result.fault_event_count = WriteFaultEvents(txn, batch);
        if (!batch.hosts_seen.empty()) {
          std::vector<std::string> jobs, hosts, forms;
          for (const BatchWrite::HostSeen& h : batch.hosts_seen) {
            jobs.push_back(absl::StrCat(h.job_row_id));
            hosts.push_back(h.host);
            forms.push_back(h.reported_as);
          }
          txn.exec_params(
              "INSERT INTO job_hosts_seen (job, host, reported_as) "
              "SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[]) "
              "ON CONFLICT DO NOTHING",
              TextArray(jobs), TextArray(hosts), TextArray(forms));
        }
        return result;
      });
}

absl::StatusOr<std::string> SampleStore::ElectHaReplica(const std::string& cluster,
                                                       const std::string& replica,
                                                       int64_t failover_timeout_ms) {
  // In ON CONFLICT DO UPDATE, h.* is the row before the update: the sender takes over when it
  // is the elected replica already or the elected one has been silent too long.
  static constexpr char kElect[] =
      "INSERT INTO ingest_ha_replicas AS h (cluster, replica, last_seen) VALUES ($1, $2, now()) "
      "ON CONFLICT (cluster) DO UPDATE SET "
      "replica = CASE WHEN h.replica = EXCLUDED.replica OR h.last_seen < now() - "
      "$3::bigint * interval '1 millisecond' THEN EXCLUDED.replica ELSE h.replica END, "
      "last_seen = CASE WHEN h.replica = EXCLUDED.replica OR h.last_seen < now() - "
      "$3::bigint * interval '1 millisecond' THEN now() ELSE h.last_seen END "
      "RETURNING replica";
  return pool_->RunTransactionFor<std::string>(
      [&](pqxx::work& txn) -> absl::StatusOr<std::string> {
        return txn.exec_params(kElect, cluster, replica, failover_timeout_ms)[0][0]
            .as<std::string>();
      });
}

absl::StatusOr<int> SampleStore::CreatePartitions(int64_t from_unix_ms, int64_t to_unix_ms) {
  return pool_->RunTransactionFor<int>([&](pqxx::work& txn) -> absl::StatusOr<int> {
    pqxx::result r = txn.exec_params(
        "SELECT samples_create_partitions(to_timestamp($1::bigint / 1000.0), "
        "to_timestamp($2::bigint / 1000.0))",
        from_unix_ms, to_unix_ms);
    return r[0][0].as<int>();
  });
}

absl::StatusOr<int> SampleStore::DropPartitionsBefore(int64_t cutoff_unix_ms) {
  absl::StatusOr<int> dropped =
      pool_->RunTransactionFor<int>([&](pqxx::work& txn) -> absl::StatusOr<int> {
        pqxx::result r = txn.exec_params(
            "SELECT samples_drop_partitions_before(to_timestamp($1::bigint / 1000.0))",
            cutoff_unix_ms);
        return r[0][0].as<int>();
      });
  if (dropped.ok() && *dropped > 0) {
    absl::MutexLock lock(&mu_);
    known_days_.clear();  // re-checked against the database on the next write
  }
  return dropped;
}

absl::StatusOr<int64_t> SampleStore::ForgetBatchesBefore(int64_t cutoff_unix_ms) {
  return pool_->RunTransactionFor<int64_t>([&](pqxx::work& txn) -> absl::StatusOr<int64_t> {
    return static_cast<int64_t>(txn.exec_params("DELETE FROM ingest_batches WHERE received_at < "
                                                "to_timestamp($1::bigint / 1000.0)",
                                                cutoff_unix_ms)
                                    .affected_rows());
  });
}

absl::StatusOr<int64_t> SampleStore::DeleteFaultEventsBefore(int64_t cutoff_unix_ms, int limit) {
  return pool_->RunTransactionFor<int64_t>([&](pqxx::work& txn) -> absl::StatusOr<int64_t> {
    return static_cast<int64_t>(
        txn.exec_params("DELETE FROM gpu_fault_events WHERE id IN (SELECT id FROM "
                        "gpu_fault_events WHERE event_time < to_timestamp($1::bigint / 1000.0) "
                        "ORDER BY event_time LIMIT $2)",
                        cutoff_unix_ms, limit)
            .affected_rows());
  });
}

}  // namespace goodput::ingest
