#include "services/ingest/job_store.h"

#include "services/api/api_checks.h"
#include "services/api/api_convert.h"
#include "services/ingest/job_checks.h"

// GCC 12 reports a false maybe-uninitialized inside libpqxx's handling of std::optional
// statement parameters (type_utils.hxx) at -O2; the optional is always engaged there.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <algorithm>
#include <map>
#include <type_traits>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "services/platform/stored_json.h"

namespace goodput::ingest {
namespace {

using platform::PgExceptionToStatus;

// Queries, named in one place.
constexpr char kJobColumns[] =
    "id, cluster, job_id, scheduler, user_name, team, name, workload_fingerprint, gpu_model, "
    "state, (extract(epoch FROM start_time) * 1000)::bigint, "
    "(extract(epoch FROM end_time) * 1000)::bigint, labels::text, "
    "(extract(epoch FROM created_at) * 1000)::bigint, "
    "(extract(epoch FROM updated_at) * 1000)::bigint, gpu_count, "
    "COALESCE(workload_kind, ''), COALESCE(workload_kind_source, '')";

constexpr char kSelectAllocations[] =
    "SELECT host, gpu_index, gpu_uuid, (extract(epoch FROM lower(valid)) * 1000)::bigint, "
    "CASE WHEN upper_inf(valid) THEN NULL "
    "ELSE (extract(epoch FROM upper(valid)) * 1000)::bigint END, mig_instance, mig_profile "
    "FROM job_gpus WHERE job = $1 ORDER BY host, gpu_index, gpu_uuid, mig_instance, lower(valid)";

constexpr char kSelectHostsSeen[] =
    "SELECT host, reported_as FROM job_hosts_seen WHERE job = $1 ORDER BY host, reported_as";

// Samples of the allocated part: any sample of the GPU for a whole-GPU allocation, the
// instance's samples for a MIG allocation.
#define GOODPUT_SAMPLES_OF_SLOTS(param) \
  "(" param "::integer IS NULL OR mig_instance_id = " param "::integer)"

constexpr char kInsertJob[] =
    "INSERT INTO jobs (cluster, job_id, scheduler, user_name, team, name, "
    "workload_fingerprint, gpu_model, state, start_time, end_time, labels, gpu_count, "
    "workload_kind, workload_kind_source) "
    "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, to_timestamp($10::bigint / 1000.0), "
    "to_timestamp($11::bigint / 1000.0), $12::jsonb, $13, NULLIF($14, ''), NULLIF($15, '')) "
    "RETURNING id";

// A kind set by the scheduler wins over one taken from a label, which wins over an inferred
// one; a kind is only replaced by one of a stronger source.
constexpr char kSetWorkloadKind[] =
    "UPDATE jobs SET workload_kind = $2, workload_kind_source = $3, updated_at = now() "
    "WHERE id = $1";

// Registration is set-based: the allocations of one request are passed as arrays (one
// element per allocation, `ord` its position in the request) and each step below is one
// statement for all of them, so that a request of 1,000 GPUs costs a handful of round trips
// and plans, not five per GPU. `req` is the allocations not already held by the job itself
// (that is decided in memory against the job's stored allocations: NewAllocations).
#define GOODPUT_REQUESTED_ALLOCATIONS                                                         \
  "req AS (SELECT r.ord, r.host, r.gpu_index, r.gpu_uuid, r.start_ms, r.end_ms, r.mig, "      \
  "r.profile, tstzrange(to_timestamp(r.start_ms / 1000.0), to_timestamp(r.end_ms / 1000.0), " \
  "'[)') AS valid, CASE WHEN r.mig IS NULL THEN int4range(0, NULL) "                          \
  "ELSE int4range(r.mig, r.mig + 1) END AS slots "                                            \
  "FROM unnest($3::int[], $4::text[], $5::int[], $6::text[], $7::bigint[], $8::bigint[], "    \
  "$9::int[], $10::text[]) AS r(ord, host, gpu_index, gpu_uuid, start_ms, end_ms, mig, profile))"
// The allocations of requested allocation `r`'s GPU (`g`: row, job, slots, valid), named by
// host and index in the cluster ($2) or by UUID: one index probe each. Written as one join
// on `(host and index) OR uuid`, PostgreSQL scanned every allocation once per requested one
// (6 s for 1,000 against 8,000 stored).
#define GOODPUT_ALLOCATIONS_OF_GPU                                                      \
  "CROSS JOIN LATERAL (SELECT a.ctid AS row, a.job, a.slots, a.valid FROM job_gpus a "  \
  "WHERE a.cluster = $2 AND a.host = r.host AND a.gpu_index = r.gpu_index "             \
  "UNION ALL SELECT a.ctid, a.job, a.slots, a.valid FROM job_gpus a "                   \
  "WHERE a.gpu_uuid = r.gpu_uuid) g"

// The first requested allocation (in request order) that overlaps another job's.
constexpr char kOtherJobOverlaps[] =
    "WITH " GOODPUT_REQUESTED_ALLOCATIONS " "
    "SELECT r.ord, j.job_id FROM req r " GOODPUT_ALLOCATIONS_OF_GPU " "
    "JOIN jobs j ON j.id = g.job WHERE g.job <> $1 AND g.slots && r.slots "
    "AND g.valid && r.valid ORDER BY r.ord LIMIT 1";

// A job whose epilog never came (node rebooted, slurmctld lost it) still holds its GPUs
// open-ended. The next job registered on one of them closes that allocation where the new
// one starts (kCloseStaleAllocations), takes over the samples from then on
// (kTakeOverSamples), and ends the old job once it holds no GPU any more (kEndAbandonedJob,
// state 'ended': its real final state never arrived). Only allocations that started before
// the new one and have no end are closed; any other overlap is still refused.
// Each stale allocation is closed at the start of the first requested allocation (in request
// order) that takes its GPU; returns the old job and that allocation's `ord`.
constexpr char kCloseStaleAllocations[] =
    "WITH " GOODPUT_REQUESTED_ALLOCATIONS ", "
    "stale AS (SELECT DISTINCT ON (g.row) g.row, r.ord, lower(r.valid) AS new_end "
    "FROM req r " GOODPUT_ALLOCATIONS_OF_GPU " "
    "WHERE g.job <> $1 AND g.slots && r.slots AND upper_inf(g.valid) "
    "AND lower(g.valid) < lower(r.valid) ORDER BY g.row, r.ord) "
    "UPDATE job_gpus g SET valid = tstzrange(lower(g.valid), s.new_end, '[)') "
    "FROM stale s WHERE g.ctid = s.row RETURNING g.job, s.ord";

constexpr char kTakeOverSamples[] =
    "UPDATE samples SET job = $1, seq = nextval('samples_seq'), ingest_xid = pg_current_xact_id() "
    "WHERE job = $7 AND cluster = $2 AND host = $3 "
    "AND sample_time >= to_timestamp($6::bigint / 1000.0) "
    "AND (($5::text IS NOT NULL AND gpu_uuid = $5) OR "
    "($4::integer IS NOT NULL AND gpu_index = $4 AND (gpu_uuid IS NULL OR $5::text IS NULL))) "
    "AND " GOODPUT_SAMPLES_OF_SLOTS("$8");

constexpr char kEndAbandonedJob[] =
    "UPDATE jobs j SET end_time = GREATEST(to_timestamp($2::bigint / 1000.0), j.start_time), "
    "state = 'ended', labels = j.labels || '{\"ended_by\": \"next_job\"}', updated_at = now() "
    "WHERE j.id = $1 AND j.end_time IS NULL "
    "AND NOT EXISTS (SELECT 1 FROM job_gpus g WHERE g.job = $1 AND upper_inf(g.valid))";

// A job whose epilog never came and whose GPUs nobody registered again: it has held its open
// allocations since before $1 (the silence threshold; a requeued run that started later is
// not silent yet) and its GPUs have sent no sample attributed to it since. Its open
// allocations are closed, and it is ended, at its last sample, or where its current run
// started when it has none. Open jobs come from jobs_open_by_start (0053), their allocations
// from job_gpus_by_job, and the samples probes use samples_by_job, `sample_time >= $1`
// pruning them to the partitions after the threshold; the last sample is the first row of a
// backward scan (newest partition first: a bound on the run's start would make PostgreSQL
// aggregate every sample of the run instead). Rows locked by another ingest replica's sweep are
// skipped; up to $2 jobs.
constexpr char kEndSilentJobs[] =
    "WITH silent AS ("
    " SELECT j.id, j.start_time, held.since FROM jobs j"
    " CROSS JOIN LATERAL (SELECT max(lower(g.valid)) AS since FROM job_gpus g"
    "  WHERE g.job = j.id AND upper_inf(g.valid)) held"
    " WHERE j.end_time IS NULL AND j.state = 'running'"
    " AND j.start_time < to_timestamp($1::bigint / 1000.0)"
    " AND held.since < to_timestamp($1::bigint / 1000.0)"
    " AND NOT EXISTS (SELECT 1 FROM samples s WHERE s.job = j.id"
    "  AND s.sample_time >= to_timestamp($1::bigint / 1000.0))"
    " ORDER BY j.start_time, j.id LIMIT $2 FOR UPDATE OF j SKIP LOCKED"
    "), ends AS ("
    " SELECT s.id, GREATEST(s.start_time, s.since,"
    "  (SELECT max(x.sample_time) FROM samples x WHERE x.job = s.id"
    "   AND x.sample_time < to_timestamp($1::bigint / 1000.0))) AS end_time"
    " FROM silent s"
    "), closed AS ("
    " UPDATE job_gpus g SET valid = tstzrange(lower(g.valid),"
    "  GREATEST(e.end_time, lower(g.valid) + interval '1 millisecond'), '[)')"
    " FROM ends e WHERE g.job = e.id AND upper_inf(g.valid)"
    ") "
    "UPDATE jobs j SET end_time = e.end_time, state = 'ended', "
    "labels = j.labels || '{\"ended_by\": \"silent\"}', updated_at = now() "
    "FROM ends e WHERE j.id = e.id "
    "RETURNING j.cluster, j.job_id, (extract(epoch FROM e.end_time) * 1000)::bigint";

// A job that goodput ended on its own (kEndAbandonedJob, kEndSilentJobs) and whose real end
// arrives later: the allocations that guessed end closed ($3), and those reaching past the
// real end ($2), are set to end at the real end, but never into another job's later
// allocation of the GPU. Returns each moved allocation with its end before and after, so
// that the samples of a longer allocation are attached, and those past a shorter one let go.
constexpr char kMoveAllocationEnds[] =
    "UPDATE job_gpus g SET valid = tstzrange(lower(g.valid), GREATEST(lower(g.valid) + "
    "interval '1 millisecond', LEAST(to_timestamp($2::bigint / 1000.0), COALESCE((SELECT "
    "min(lower(o.valid)) FROM job_gpus o WHERE o.job <> g.job AND ((o.cluster = g.cluster AND "
    "o.host = g.host AND o.gpu_index = g.gpu_index) OR o.gpu_uuid = g.gpu_uuid) AND "
    "o.slots && g.slots AND lower(o.valid) >= upper(g.valid)), 'infinity'::timestamptz))), "
    "'[)') "
    "FROM (SELECT ctid AS row, upper(valid) AS old_end FROM job_gpus WHERE job = $1 "
    "AND NOT upper_inf(valid) AND (upper(valid) >= to_timestamp($3::bigint / 1000.0) OR "
    "upper(valid) > to_timestamp($2::bigint / 1000.0))) moved "
    "WHERE g.ctid = moved.row "
    "RETURNING g.host, g.gpu_index, g.gpu_uuid, "
    "(extract(epoch FROM moved.old_end) * 1000)::bigint, "
    "(extract(epoch FROM upper(g.valid)) * 1000)::bigint, g.mig_instance";

// Samples of the job from its (earlier) real end on: no longer the job's. New seq and
// transaction id, as when samples move between jobs, so that watermark readers see them.
constexpr char kReleaseSamplesAfter[] =
    "UPDATE samples SET job = NULL, seq = nextval('samples_seq'), "
    "ingest_xid = pg_current_xact_id() "
    "WHERE job = $1 AND sample_time >= to_timestamp($2::bigint / 1000.0)";

constexpr char kInsertAllocations[] =
    "WITH " GOODPUT_REQUESTED_ALLOCATIONS
    " "
    "INSERT INTO job_gpus (job, cluster, host, gpu_index, gpu_uuid, valid, mig_instance, "
    "mig_profile) SELECT $1, $2, host, gpu_index, gpu_uuid, valid, mig, profile FROM req "
    "ORDER BY ord";

// kAttachByAllocation for every requested allocation at once. $11 (the earliest start) and
// $12 (the latest end, NULL when one is open) are constants the planner prunes the samples'
// partitions by.
constexpr char kAttachByAllocations[] =
    "WITH " GOODPUT_REQUESTED_ALLOCATIONS
    " "
    "UPDATE samples s SET job = $1, seq = nextval('samples_seq'), "
    "ingest_xid = pg_current_xact_id() FROM req r "
    "WHERE s.job IS NULL AND s.cluster = $2 AND s.host = r.host "
    "AND s.sample_time >= to_timestamp($11::bigint / 1000.0) "
    "AND ($12::bigint IS NULL OR s.sample_time < to_timestamp($12::bigint / 1000.0)) "
    "AND s.sample_time >= lower(r.valid) AND (upper_inf(r.valid) OR s.sample_time < "
    "upper(r.valid)) "
    "AND ((r.gpu_uuid IS NOT NULL AND s.gpu_uuid = r.gpu_uuid) OR "
    "(r.gpu_index IS NOT NULL AND s.gpu_index = r.gpu_index AND "
    "(s.gpu_uuid IS NULL OR r.gpu_uuid IS NULL))) "
    "AND (r.mig IS NULL OR s.mig_instance_id = r.mig)";

// Samples of the allocated GPU within the allocation that no job has yet. Attaching one
// gives it a new seq and transaction id, so that readers following the samples watermark
// (goodput-ofu) see it again, now with its job (as kAttachByLabel does).
constexpr char kAttachByAllocation[] =
    "UPDATE samples SET job = $1, seq = nextval('samples_seq'), ingest_xid = pg_current_xact_id() "
    "WHERE job IS NULL AND cluster = $2 AND host = $3 "
    "AND sample_time >= to_timestamp($6::bigint / 1000.0) "
    "AND ($7::bigint IS NULL OR sample_time < to_timestamp($7::bigint / 1000.0)) "
    "AND (($5::text IS NOT NULL AND gpu_uuid = $5) OR "
    "($4::integer IS NOT NULL AND gpu_index = $4 AND (gpu_uuid IS NULL OR $5::text IS NULL))) "
    "AND " GOODPUT_SAMPLES_OF_SLOTS("$8");

// Samples whose dcgm-exporter hpc_job or Osmo workflow label names the job.
constexpr char kAttachByLabel[] =
    "UPDATE samples SET job = $1, seq = nextval('samples_seq'), ingest_xid = pg_current_xact_id() "
    "WHERE job IS NULL AND cluster = $2 AND "
    "(labels ->> 'hpc_job' = $3 OR labels ->> 'osmo_workflow_id' = $3 OR "
    "labels ->> 'osmo.workflow_id' = $3)";

constexpr char kCloseAllocations[] =
    "UPDATE job_gpus SET valid = tstzrange(lower(valid), "
    "GREATEST(to_timestamp($2::bigint / 1000.0), lower(valid) + interval '1 millisecond'), '[)') "
    "WHERE job = $1 AND upper_inf(valid)";

std::optional<int64_t> ToMs(const google::protobuf::Timestamp& t, bool present) {
  if (!present) return std::nullopt;
  return api::TimestampToUnixMs(t);
}

void SetMs(int64_t ms, google::protobuf::Timestamp* t) { *t = api::UnixMsToTimestamp(ms); }

// The stored name; a job registered without a scheduler kind is stored as "other".
std::string SchedulerName(v1::SchedulerKind kind) {
  std::string name = api::SchedulerKindName(kind);
  return name.empty() ? "other" : name;
}

v1::SchedulerKind SchedulerFromName(const std::string& name) {
  v1::SchedulerKind kind = api::SchedulerKindFromName(name);
  return kind == v1::SCHEDULER_KIND_UNSPECIFIED ? v1::SCHEDULER_KIND_OTHER : kind;
}

v1::JobState StateFromName(const std::string& name) { return api::JobStateFromName(name); }

std::string LabelsJson(const google::protobuf::Map<std::string, std::string>& labels) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [k, v] : labels) j[k] = v;
  return j.dump();
}

// The kind a registration asks for: its own field, else the first label named in
// `kind_labels` whose value names a kind.
struct RequestedKind {
  v1::WorkloadKind kind = v1::WORKLOAD_KIND_UNSPECIFIED;
  v1::WorkloadKindSource source = v1::WORKLOAD_KIND_SOURCE_UNSPECIFIED;
};

RequestedKind KindOf(const v1::Job& job, const std::vector<std::string>& kind_labels) {
  if (job.workload_kind() != v1::WORKLOAD_KIND_UNSPECIFIED) {
    return {job.workload_kind(), v1::WORKLOAD_KIND_SOURCE_REGISTERED};
  }
  for (const std::string& label : kind_labels) {
    auto it = job.labels().find(label);
    if (it == job.labels().end()) continue;
    const v1::WorkloadKind kind = api::WorkloadKindFromName(it->second);
    if (kind != v1::WORKLOAD_KIND_UNSPECIFIED) return {kind, v1::WORKLOAD_KIND_SOURCE_LABEL};
  }
  return {};
}

int KindRank(v1::WorkloadKindSource source) {
  switch (source) {
    case v1::WORKLOAD_KIND_SOURCE_REGISTERED:
      return 3;
    case v1::WORKLOAD_KIND_SOURCE_LABEL:
      return 2;
    case v1::WORKLOAD_KIND_SOURCE_INFERRED:
      return 1;
    default:
      return 0;
  }
}

std::string JobName(const v1::JobKey& key) {
  return absl::StrCat(key.cluster(), "/", key.job_id());
}

template <typename T>
std::optional<T> Opt(const pqxx::field& f) {
  if (f.is_null()) return std::nullopt;
  return f.as<T>();
}

// Reads a job row (kJobColumns) and its allocations.
v1::Job ReadJob(pqxx::work& txn, const pqxx::row& row, int64_t* row_id) {
  v1::Job job;
  *row_id = row[0].as<int64_t>();
  job.mutable_key()->set_cluster(row[1].as<std::string>());
  job.mutable_key()->set_job_id(row[2].as<std::string>());
  job.set_scheduler(SchedulerFromName(row[3].as<std::string>()));
  job.set_user(row[4].as<std::string>());
  job.set_team(row[5].as<std::string>());
  job.set_name(row[6].as<std::string>());
  job.set_workload_fingerprint(row[7].as<std::string>());
  job.set_gpu_model(row[8].as<std::string>());
  job.set_state(StateFromName(row[9].as<std::string>()));
  if (auto ms = Opt<int64_t>(row[10])) SetMs(*ms, job.mutable_start_time());
  if (auto ms = Opt<int64_t>(row[11])) SetMs(*ms, job.mutable_end_time());
  // A labels column that is not a bounded JSON object gives no labels.
  absl::StatusOr<nlohmann::json> labels = platform::ParseStoredJson(row[12].as<std::string>());
  if (labels.ok() && labels->is_object()) {
    for (auto it = labels->begin(); it != labels->end(); ++it) {
      if (it.value().is_string()) (*job.mutable_labels())[it.key()] = it.value().get<std::string>();
    }
  }
  SetMs(row[13].as<int64_t>(), job.mutable_create_time());
  SetMs(row[14].as<int64_t>(), job.mutable_update_time());
  const std::optional<int> stored_count = Opt<int>(row[15]);
  job.set_workload_kind(api::WorkloadKindFromName(row[16].as<std::string>()));
  job.set_workload_kind_source(api::WorkloadKindSourceFromName(row[17].as<std::string>()));

  pqxx::result allocations = txn.exec_params(kSelectAllocations, *row_id);
  std::vector<std::string> distinct;
  for (const auto& a : allocations) {
    v1::GpuAllocation* alloc = job.add_allocations();
    alloc->mutable_gpu()->set_host(a[0].as<std::string>());
    if (!a[1].is_null()) alloc->mutable_gpu()->set_gpu_index(a[1].as<int>());
    if (!a[2].is_null()) alloc->mutable_gpu()->set_uuid(a[2].as<std::string>());
    SetMs(a[3].as<int64_t>(), alloc->mutable_start_time());
    if (!a[4].is_null()) SetMs(a[4].as<int64_t>(), alloc->mutable_end_time());
    std::string gpu = !alloc->gpu().uuid().empty()
                          ? alloc->gpu().uuid()
                          : absl::StrCat(alloc->gpu().host(), "#", alloc->gpu().gpu_index());
    if (!a[5].is_null()) {
      v1::MigInstance* mig = alloc->mutable_gpu()->mutable_mig();
      mig->set_gpu_instance_id(a[5].as<int>());
      mig->set_profile(a[6].as<std::string>());
      absl::StrAppend(&gpu, "|mig", mig->gpu_instance_id());
    }
    distinct.push_back(std::move(gpu));
  }
  v1::HostSeen* seen = nullptr;
  for (const auto& h : txn.exec_params(kSelectHostsSeen, *row_id)) {
    if (seen == nullptr || seen->host() != h[0].c_str()) {
      seen = job.add_hosts_seen();
      seen->set_host(h[0].as<std::string>());
    }
    seen->add_reported_as(h[1].as<std::string>());
  }
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  job.set_gpu_count(!distinct.empty() ? static_cast<int32_t>(distinct.size())
                                      : stored_count.value_or(0));
  return job;
}

absl::StatusOr<std::pair<v1::Job, int64_t>> LoadJob(pqxx::work& txn, const v1::JobKey& key,
                                                    bool for_update) {
  pqxx::result r = txn.exec_params(
      absl::StrCat("SELECT ", kJobColumns, " FROM jobs WHERE cluster = $1 AND job_id = $2",
                   for_update ? " FOR UPDATE" : ""),
      key.cluster(), key.job_id());
  if (r.empty())
    return absl::NotFoundError(absl::StrCat("job ", JobName(key), " is not registered"));
  int64_t id = 0;
  v1::Job job = ReadJob(txn, r[0], &id);
  return std::make_pair(std::move(job), id);
}

absl::Status CheckAllocations(const v1::Job& job) {
  for (int i = 0; i < job.allocations_size(); ++i) {
    const v1::GpuAllocation& a = job.allocations(i);
    if (a.gpu().host().empty()) {
      return absl::InvalidArgumentError(absl::StrCat("job.allocations[", i, "].gpu.host is empty"));
    }
    if (!a.gpu().has_gpu_index() && a.gpu().uuid().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("job.allocations[", i, "].gpu names no device: set gpu_index or uuid"));
    }
    if (a.gpu().has_gpu_index() && a.gpu().gpu_index() < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "job.allocations[", i, "].gpu.gpu_index=", a.gpu().gpu_index(), " is negative"));
    }
    auto start = ToMs(a.start_time(), a.has_start_time());
    auto end = ToMs(a.end_time(), a.has_end_time());
    if (start && end && *end <= *start) {
      return absl::InvalidArgumentError(
          absl::StrCat("job.allocations[", i, "].end_time is not after its start_time"));
    }
    if (a.gpu().has_mig()) {
      if (a.gpu().mig().gpu_instance_id() < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("job.allocations[", i, "].gpu.mig.gpu_instance_id=",
                         a.gpu().mig().gpu_instance_id(), " is negative"));
      }
      if (auto reason = api::CheckText(a.gpu().mig().profile(), api::kMaxMigProfileBytes)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "job.allocations[", i, "].gpu.mig.profile=\"",
            api::Sanitize(a.gpu().mig().profile()), "\" ", *reason));
      }
    }
  }
  return absl::OkStatus();
}

std::string DescribeGpu(const v1::GpuRef& gpu) {
  std::string s = gpu.host();
  if (gpu.has_gpu_index()) absl::StrAppend(&s, " GPU ", gpu.gpu_index());
  if (!gpu.uuid().empty()) absl::StrAppend(&s, " (", gpu.uuid(), ")");
  if (gpu.has_mig()) absl::StrAppend(&s, " MIG instance ", gpu.mig().gpu_instance_id());
  return s;
}

// One allocation as registration compares and stores it: times in ms, `end` empty while open.
struct Allocation {
  int ord = 0;  // position in the request
  std::string host;
  std::optional<int> index;
  std::optional<std::string> uuid;
  int64_t start = 0;
  std::optional<int64_t> end;
  std::optional<int> mig;
  std::string profile;
};

// Whether `a` and `b` hold a part of one GPU of one host at a common time: as the table's
// exclusion constraints see it, but within one job and one host (same host, and the same
// index or the same UUID).
bool SameJobOverlap(const Allocation& a, const Allocation& b) {
  if (a.host != b.host) return false;
  const bool same_gpu =
      (a.index && b.index && *a.index == *b.index) || (a.uuid && b.uuid && *a.uuid == *b.uuid);
  if (!same_gpu) return false;
  if (a.mig && b.mig && *a.mig != *b.mig) return false;
  return (!b.end || a.start < *b.end) && (!a.end || b.start < *a.end);
}

// The allocations of `job` that `held` (the job's stored allocations) and the ones before
// them in the request do not already hold: a retry, or another node's prolog repeating
// what was registered, adds nothing.
std::vector<Allocation> NewAllocations(const v1::Job& job, const v1::Job* held,
                                       std::optional<int64_t> job_start_ms, int64_t now_unix_ms) {
  std::vector<Allocation> kept;
  std::vector<Allocation> known;
  // Allocations by "host \0 #index" and "host \0 uuid", so that each is compared with those
  // of its own GPU only.
  absl::flat_hash_map<std::string, std::vector<size_t>> by_gpu;
  auto keys = [](const Allocation& a) {
    std::vector<std::string> k;
    if (a.index) k.push_back(absl::StrCat(a.host, std::string(1, '\0'), "#", *a.index));
    if (a.uuid) k.push_back(absl::StrCat(a.host, std::string(1, '\0'), "U", *a.uuid));
    return k;
  };
  auto remember = [&](Allocation a) {
    for (const std::string& k : keys(a)) by_gpu[k].push_back(known.size());
    known.push_back(std::move(a));
  };
  if (held != nullptr) {
    for (const v1::GpuAllocation& h : held->allocations()) {
      Allocation a;
      a.host = h.gpu().host();
      if (h.gpu().has_gpu_index()) a.index = h.gpu().gpu_index();
      if (!h.gpu().uuid().empty()) a.uuid = h.gpu().uuid();
      a.start = api::TimestampToUnixMs(h.start_time());
      a.end = ToMs(h.end_time(), h.has_end_time());
      if (h.gpu().has_mig()) a.mig = h.gpu().mig().gpu_instance_id();
      remember(std::move(a));
    }
  }
  for (int i = 0; i < job.allocations_size(); ++i) {
    const v1::GpuAllocation& r = job.allocations(i);
    Allocation a;
    a.ord = i;
    a.host = r.gpu().host();
    if (r.gpu().has_gpu_index()) a.index = r.gpu().gpu_index();
    if (!r.gpu().uuid().empty()) a.uuid = r.gpu().uuid();
    a.start = ToMs(r.start_time(), r.has_start_time()).value_or(job_start_ms.value_or(now_unix_ms));
    // An allocation without an end ends with the job when the job has ended.
    a.end = ToMs(r.end_time(), r.has_end_time());
    if (!a.end.has_value()) a.end = ToMs(job.end_time(), job.has_end_time());
    if (a.end.has_value() && *a.end <= a.start) a.end = a.start + 1;  // a range must not be empty
    if (r.gpu().has_mig()) {
      a.mig = r.gpu().mig().gpu_instance_id();
      a.profile = r.gpu().mig().profile();
    }
    bool held_already = false;
    for (const std::string& k : keys(a)) {
      auto it = by_gpu.find(k);
      if (it == by_gpu.end()) continue;
      for (size_t j : it->second) {
        if (SameJobOverlap(known[j], a)) {
          held_already = true;
          break;
        }
      }
      if (held_already) break;
    }
    if (held_already) continue;
    kept.push_back(a);
    remember(std::move(a));
  }
  return kept;
}

// A PostgreSQL array literal of `values` (NULL for an empty optional); `quote` for text.
template <typename T>
std::string ArrayLiteral(const std::vector<std::optional<T>>& values) {
  std::string out = "{";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out.push_back(',');
    if (!values[i].has_value()) {
      out += "NULL";
    } else if constexpr (std::is_same_v<T, std::string>) {
      out.push_back('"');
      for (char c : *values[i]) {
        if (c == '"' || c == '\\') out.push_back('\\');
        out.push_back(c);
      }
      out.push_back('"');
    } else {
      absl::StrAppend(&out, *values[i]);
    }
  }
  out.push_back('}');
  return out;
}

// The parameters $3..$10 of GOODPUT_REQUESTED_ALLOCATIONS for `allocations`.
struct AllocationArrays {
  std::string ord, host, index, uuid, start, end, mig, profile;
};

AllocationArrays ToArrays(const std::vector<Allocation>& allocations) {
  std::vector<std::optional<int64_t>> ord, index, start, end, mig;
  std::vector<std::optional<std::string>> host, uuid, profile;
  for (const Allocation& a : allocations) {
    ord.push_back(a.ord);
    host.push_back(a.host);
    index.push_back(a.index);
    uuid.push_back(a.uuid);
    start.push_back(a.start);
    end.push_back(a.end);
    mig.push_back(a.mig);
    profile.push_back(a.profile);
  }
  return {ArrayLiteral(ord),   ArrayLiteral(host), ArrayLiteral(index), ArrayLiteral(uuid),
          ArrayLiteral(start), ArrayLiteral(end),  ArrayLiteral(mig),   ArrayLiteral(profile)};
}

// Adds the allocations of `job` to job row `row_id`, skipping ones it already has (`held`,
// the job as stored, may be null for a new job); returns the samples attached to the job.
absl::StatusOr<int64_t> MergeAllocations(pqxx::work& txn, int64_t row_id, const v1::Job& job,
                                         const v1::Job* held, std::optional<int64_t> job_start_ms,
                                         int64_t now_unix_ms) {
  const std::vector<Allocation> added = NewAllocations(job, held, job_start_ms, now_unix_ms);
  if (added.empty()) return 0;
  const AllocationArrays arrays = ToArrays(added);
  const std::string& cluster = job.key().cluster();
  int64_t attached = 0;
  // Allocations of jobs whose epilog never came, closed where the new ones start; each such
  // job takes the samples from then on and ends once it holds no GPU (at the start of the
  // last of its allocations taken over, in request order).
  std::map<int64_t, const Allocation*> last_taken;  // old job -> its last taker
  for (const pqxx::row& stale : txn.exec_params(
           kCloseStaleAllocations, row_id, cluster, arrays.ord, arrays.host, arrays.index,
           arrays.uuid, arrays.start, arrays.end, arrays.mig, arrays.profile)) {
    const int64_t old_job = stale[0].as<int64_t>();
    const int ord = stale[1].as<int>();
    const Allocation* a = &*std::find_if(added.begin(), added.end(),
                                         [ord](const Allocation& x) { return x.ord == ord; });
    attached += txn.exec_params(kTakeOverSamples, row_id, cluster, a->host, a->index, a->uuid,
                                a->start, old_job, a->mig)
                    .affected_rows();
    const Allocation*& last = last_taken.try_emplace(old_job, a).first->second;
    if (a->ord > last->ord) last = a;
  }
  for (const auto& [old_job, taker] : last_taken) {
    txn.exec_params(kEndAbandonedJob, old_job, taker->start);
  }
  pqxx::result other =
      txn.exec_params(kOtherJobOverlaps, row_id, cluster, arrays.ord, arrays.host, arrays.index,
                      arrays.uuid, arrays.start, arrays.end, arrays.mig, arrays.profile);
  if (!other.empty()) {
    const v1::GpuAllocation& a = job.allocations(other[0][0].as<int>());
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job.key().job_id(), " in cluster ", cluster, ": allocation of ",
                     DescribeGpu(a.gpu()), " overlaps job ", other[0][1].as<std::string>(),
                     ", which holds that GPU", a.gpu().has_mig() ? " or instance" : ""));
  }
  txn.exec_params(kInsertAllocations, row_id, cluster, arrays.ord, arrays.host, arrays.index,
                  arrays.uuid, arrays.start, arrays.end, arrays.mig, arrays.profile);
  int64_t earliest = added.front().start;
  std::optional<int64_t> latest = added.front().end;
  for (const Allocation& a : added) {
    earliest = std::min(earliest, a.start);
    latest = a.end && latest ? std::optional<int64_t>(std::max(*latest, *a.end)) : std::nullopt;
  }
  attached += txn.exec_params(kAttachByAllocations, row_id, cluster, arrays.ord, arrays.host,
                              arrays.index, arrays.uuid, arrays.start, arrays.end, arrays.mig,
                              arrays.profile, earliest, latest)
                  .affected_rows();
  return attached;
}

absl::StatusOr<std::string> Merged(absl::string_view field, const std::string& stored,
                                   const std::string& requested) {
  if (requested.empty() || requested == stored) return stored;
  if (stored.empty()) return requested;
  return absl::AlreadyExistsError(absl::StrCat("job is registered with ", field, "=\"", stored,
                                               "\", not \"", requested,
                                               "\"; use UpdateJob to change it"));
}

}  // namespace

absl::StatusOr<std::vector<SilentJob>> JobStore::EndSilentJobs(int64_t silent_since_unix_ms,
                                                               int limit) {
  return pool_->RunTransactionFor<std::vector<SilentJob>>(
      [&](pqxx::work& txn) -> absl::StatusOr<std::vector<SilentJob>> {
        std::vector<SilentJob> ended;
        for (const pqxx::row& r : txn.exec_params(kEndSilentJobs, silent_since_unix_ms, limit)) {
          SilentJob job;
          job.key.set_cluster(r[0].as<std::string>());
          job.key.set_job_id(r[1].as<std::string>());
          job.end_unix_ms = r[2].as<int64_t>();
          ended.push_back(std::move(job));
        }
        return ended;
      });
}

absl::StatusOr<RegisterJobResult> JobStore::Register(const v1::Job& job, int64_t now_unix_ms) {
  if (absl::Status s = CheckJobKey(job.key()); !s.ok()) return s;
  if (!job.has_start_time() && job.state() != v1::JOB_STATE_PENDING) {
    return absl::InvalidArgumentError(
        "job.start_time is unset: a registered job needs a start time unless its state is "
        "JOB_STATE_PENDING");
  }
  if (job.gpu_count() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("job.gpu_count=", job.gpu_count(), " is negative"));
  }
  if (absl::Status s = CheckAllocations(job); !s.ok()) return s;
  const std::optional<int64_t> start_ms = ToMs(job.start_time(), job.has_start_time());
  const std::optional<int64_t> end_ms = ToMs(job.end_time(), job.has_end_time());
  if (start_ms && end_ms && *end_ms < *start_ms) {
    return absl::InvalidArgumentError("job.end_time is before job.start_time");
  }
  std::string state = api::JobStateName(job.state());
  if (state.empty()) state = end_ms ? "ended" : (start_ms ? "running" : "pending");
  const RequestedKind kind = KindOf(job, workload_kind_labels_);

  return pool_->RunTransactionFor<RegisterJobResult>([&](pqxx::work& txn)
                                                         -> absl::StatusOr<RegisterJobResult> {
    RegisterJobResult result;
    // Serializes registrations of one job key (the row may not exist yet).
    txn.exec_params("SELECT pg_advisory_xact_lock(hashtext($1))", JobName(job.key()));
    pqxx::result existing =
        txn.exec_params(absl::StrCat("SELECT ", kJobColumns,
                                     " FROM jobs WHERE cluster = $1 AND job_id = $2 FOR UPDATE"),
                        job.key().cluster(), job.key().job_id());
    int64_t row_id = 0;
    std::optional<int64_t> effective_start = start_ms;
    std::optional<v1::Job> stored;  // the job as registered before, with its allocations
    if (existing.empty()) {
      pqxx::result inserted = txn.exec_params(
          kInsertJob, job.key().cluster(), job.key().job_id(), SchedulerName(job.scheduler()),
          job.user(), job.team(), job.name(), job.workload_fingerprint(), job.gpu_model(), state,
          start_ms, end_ms, LabelsJson(job.labels()),
          job.gpu_count() > 0 ? std::optional<int>(job.gpu_count()) : std::nullopt,
          api::WorkloadKindName(kind.kind), api::WorkloadKindSourceName(kind.source));
      row_id = inserted[0][0].as<int64_t>();
      result.created = true;
    } else {
      stored = ReadJob(txn, existing[0], &row_id);
      struct Text {
        const char* field;
        const std::string& stored;
        const std::string& requested;
        const char* column;
      };
      const std::string stored_scheduler =
          stored->scheduler() == v1::SCHEDULER_KIND_OTHER ? "" : SchedulerName(stored->scheduler());
      const std::string requested_scheduler =
          job.scheduler() == v1::SCHEDULER_KIND_UNSPECIFIED ? "" : SchedulerName(job.scheduler());
      const Text texts[] = {
          {"scheduler", stored_scheduler, requested_scheduler, "scheduler"},
          {"user", stored->user(), job.user(), "user_name"},
          {"team", stored->team(), job.team(), "team"},
          {"name", stored->name(), job.name(), "name"},
          {"workload_fingerprint", stored->workload_fingerprint(), job.workload_fingerprint(),
           "workload_fingerprint"},
          {"gpu_model", stored->gpu_model(), job.gpu_model(), "gpu_model"},
      };
      for (const Text& t : texts) {
        absl::StatusOr<std::string> merged = Merged(t.field, t.stored, t.requested);
        if (!merged.ok()) return merged.status();
        if (*merged != t.stored) {
          txn.exec_params(
              absl::StrCat("UPDATE jobs SET ", t.column, " = $2, updated_at = now() WHERE id = $1"),
              row_id, *merged);
        }
      }
      if (kind.kind != v1::WORKLOAD_KIND_UNSPECIFIED) {
        if (kind.source == v1::WORKLOAD_KIND_SOURCE_REGISTERED &&
            stored->workload_kind_source() == v1::WORKLOAD_KIND_SOURCE_REGISTERED &&
            stored->workload_kind() != kind.kind) {
          return absl::AlreadyExistsError(
              absl::StrCat("job is registered with workload_kind=",
                           api::WorkloadKindName(stored->workload_kind()), ", not ",
                           api::WorkloadKindName(kind.kind), "; use UpdateJob to change it"));
        }
        if (KindRank(kind.source) > KindRank(stored->workload_kind_source())) {
          txn.exec_params(kSetWorkloadKind, row_id, api::WorkloadKindName(kind.kind),
                          api::WorkloadKindSourceName(kind.source));
        }
      }
      for (const auto& [k, v] : job.labels()) {
        auto it = stored->labels().find(k);
        if (it != stored->labels().end() && it->second != v) {
          return absl::AlreadyExistsError(absl::StrCat("job is registered with labels[\"", k,
                                                       "\"]=\"", it->second, "\", not \"", v,
                                                       "\"; use UpdateJob to change it"));
        }
      }
      if (!job.labels().empty()) {
        txn.exec_params(
            "UPDATE jobs SET labels = labels || $2::jsonb, updated_at = now() "
            "WHERE id = $1",
            row_id, LabelsJson(job.labels()));
      }
      // Prologs on different nodes report slightly different start times: keep the first.
      const std::optional<int64_t> stored_start =
          ToMs(stored->start_time(), stored->has_start_time());
      if (start_ms && (!stored_start || *start_ms < *stored_start)) {
        txn.exec_params(
            "UPDATE jobs SET start_time = to_timestamp($2::bigint / 1000.0), "
            "state = CASE WHEN state = 'pending' THEN 'running' ELSE state END, "
            "updated_at = now() WHERE id = $1",
            row_id, *start_ms);
      } else {
        effective_start = stored_start;
      }
      if (job.gpu_count() > 0 && stored->gpu_count() == 0) {
        txn.exec_params("UPDATE jobs SET gpu_count = $2 WHERE id = $1", row_id, job.gpu_count());
      }
      // Slurm requeue: the same job id starts again after it ended (node failure, preemption,
      // `scontrol requeue`). The job runs again from the new start; the first run stays
      // visible through its closed allocations, and `labels["requeues"]` counts the runs.
      // How goodput guessed the first run's end (`ended_by`) is no longer true of the job.
      const std::optional<int64_t> stored_end = ToMs(stored->end_time(), stored->has_end_time());
      if (stored_end && start_ms && *start_ms >= *stored_end && !end_ms) {
        txn.exec_params(
            "UPDATE jobs SET end_time = NULL, state = 'running', "
            "labels = (labels - 'ended_by') || jsonb_build_object('requeues', "
            "(coalesce((labels ->> 'requeues')::int, 0) + 1)::text), updated_at = now() "
            "WHERE id = $1",
            row_id);
        effective_start = start_ms;
      }
    }
    absl::StatusOr<int64_t> attached = MergeAllocations(
        txn, row_id, job, stored ? &*stored : nullptr, effective_start, now_unix_ms);
    if (!attached.ok()) return attached.status();
    result.attached_sample_count = *attached;
    result.attached_sample_count +=
        txn.exec_params(kAttachByLabel, row_id, job.key().cluster(), job.key().job_id())
            .affected_rows();
    absl::StatusOr<std::pair<v1::Job, int64_t>> loaded = LoadJob(txn, job.key(), false);
    if (!loaded.ok()) return loaded.status();
    result.job = std::move(loaded->first);
    return result;
  });
}

absl::StatusOr<v1::Job> JobStore::Update(const v1::Job& job, const std::vector<std::string>& paths,
                                         int64_t now_unix_ms) {
  if (absl::Status s = CheckJobKey(job.key()); !s.ok()) return s;
  if (paths.empty()) {
    return absl::InvalidArgumentError("update_mask is empty: name the fields to change");
  }
  static const std::map<std::string, std::string> kTextColumns = {
      {"user", "user_name"},
      {"team", "team"},
      {"name", "name"},
      {"workload_fingerprint", "workload_fingerprint"},
      {"gpu_model", "gpu_model"}};
  for (const std::string& path : paths) {
    if (path == "key" || path == "create_time" || path == "update_time") {
      return absl::InvalidArgumentError(
          absl::StrCat("update_mask path \"", path, "\" cannot be changed"));
    }
    if (!kTextColumns.contains(path) && path != "labels" && path != "state" &&
        path != "start_time" && path != "end_time" && path != "gpu_count" && path != "scheduler" &&
        path != "allocations" && path != "workload_kind") {
      return absl::InvalidArgumentError(
          absl::StrCat("update_mask path \"", path, "\" is not a field of Job"));
    }
  }
  if (absl::Status s = CheckAllocations(job); !s.ok()) return s;
  return pool_->RunTransactionFor<v1::Job>([&](pqxx::work& txn) -> absl::StatusOr<v1::Job> {
    absl::StatusOr<std::pair<v1::Job, int64_t>> loaded = LoadJob(txn, job.key(), true);
    if (!loaded.ok()) return loaded.status();
    const int64_t row_id = loaded->second;
    for (const std::string& path : paths) {
      if (auto it = kTextColumns.find(path); it != kTextColumns.end()) {
        const std::string& value = path == "user"                   ? job.user()
                                   : path == "team"                 ? job.team()
                                   : path == "name"                 ? job.name()
                                   : path == "workload_fingerprint" ? job.workload_fingerprint()
                                                                    : job.gpu_model();
        txn.exec_params(absl::StrCat("UPDATE jobs SET ", it->second, " = $2 WHERE id = $1"), row_id,
                        value);
      } else if (path == "labels") {
        txn.exec_params("UPDATE jobs SET labels = $2::jsonb WHERE id = $1", row_id,
                        LabelsJson(job.labels()));
      } else if (path == "state") {
        const std::string state = api::JobStateName(job.state());
        if (state.empty()) return absl::InvalidArgumentError("job.state is unspecified");
        txn.exec_params("UPDATE jobs SET state = $2 WHERE id = $1", row_id, state);
      } else if (path == "start_time" || path == "end_time") {
        const bool start = path == "start_time";
        txn.exec_params(absl::StrCat("UPDATE jobs SET ", path,
                                     " = to_timestamp($2::bigint / 1000.0) WHERE id = $1"),
                        row_id,
                        start ? ToMs(job.start_time(), job.has_start_time())
                              : ToMs(job.end_time(), job.has_end_time()));
      } else if (path == "gpu_count") {
        txn.exec_params("UPDATE jobs SET gpu_count = $2 WHERE id = $1", row_id, job.gpu_count());
      } else if (path == "scheduler") {
        txn.exec_params("UPDATE jobs SET scheduler = $2 WHERE id = $1", row_id,
                        SchedulerName(job.scheduler()));
      } else if (path == "workload_kind") {
        const std::string kind = api::WorkloadKindName(job.workload_kind());
        txn.exec_params(
            "UPDATE jobs SET workload_kind = NULLIF($2, ''), "
            "workload_kind_source = CASE WHEN $2 = '' THEN NULL ELSE 'registered' END WHERE id = "
            "$1",
            row_id, kind);
      } else if (path == "allocations") {
        absl::StatusOr<int64_t> attached = MergeAllocations(
            txn, row_id, job, &loaded->first,
            ToMs(loaded->first.start_time(), loaded->first.has_start_time()), now_unix_ms);
        if (!attached.ok()) return attached.status();
      }
    }
    txn.exec_params("UPDATE jobs SET updated_at = now() WHERE id = $1", row_id);
    absl::StatusOr<std::pair<v1::Job, int64_t>> updated = LoadJob(txn, job.key(), false);
    if (!updated.ok()) return updated.status();
    return std::move(updated->first);
  });
}

absl::StatusOr<v1::Job> JobStore::End(const v1::JobKey& key, std::optional<int64_t> end_unix_ms,
                                      v1::JobState final_state, int64_t now_unix_ms) {
  if (absl::Status s = CheckJobKey(key); !s.ok()) return s;
  if (final_state == v1::JOB_STATE_UNSPECIFIED) final_state = v1::JOB_STATE_ENDED;
  if (final_state == v1::JOB_STATE_PENDING || final_state == v1::JOB_STATE_RUNNING) {
    return absl::InvalidArgumentError(
        absl::StrCat("final_state=", v1::JobState_Name(final_state), " is not a final state"));
  }
  return pool_->RunTransactionFor<v1::Job>([&](pqxx::work& txn) -> absl::StatusOr<v1::Job> {
    absl::StatusOr<std::pair<v1::Job, int64_t>> loaded = LoadJob(txn, key, true);
    if (!loaded.ok()) return loaded.status();
    const v1::Job& stored = loaded->first;
    const int64_t end = end_unix_ms.value_or(now_unix_ms);
    // The scheduler's word wins over an end that goodput guessed (labels["ended_by"]: the
    // next job on a GPU, or silence) or that said nothing of how the job ended.
    const bool restate =
        stored.has_end_time() && stored.state() == v1::JOB_STATE_ENDED &&
        (final_state != v1::JOB_STATE_ENDED || stored.labels().contains("ended_by"));
    if (stored.has_end_time() && !restate) {
      const int64_t stored_end = *ToMs(stored.end_time(), true);
      if (!end_unix_ms.has_value() || *end_unix_ms == stored_end) return stored;
      return absl::FailedPreconditionError(absl::StrCat("job ", JobName(key), " already ended at ",
                                                        stored_end, " ms, not ", *end_unix_ms,
                                                        " ms"));
    }
    if (auto start = ToMs(stored.start_time(), stored.has_start_time()); start && end < *start) {
      return absl::InvalidArgumentError(
          absl::StrCat("end_time ", end, " ms is before the job's start_time ", *start, " ms"));
    }
    txn.exec_params(
        "UPDATE jobs SET end_time = to_timestamp($2::bigint / 1000.0), state = $3, "
        "labels = labels - 'ended_by', updated_at = now() WHERE id = $1",
        loaded->second, end, api::JobStateName(final_state));
    if (restate) {
      const int64_t guessed_end = *ToMs(stored.end_time(), true);
      for (const pqxx::row& moved :
           txn.exec_params(kMoveAllocationEnds, loaded->second, end, guessed_end)) {
        const int64_t before = moved[3].as<int64_t>();
        const int64_t after = moved[4].as<int64_t>();
        if (after <= before) continue;
        txn.exec_params(kAttachByAllocation, loaded->second, key.cluster(),
                        moved[0].as<std::string>(), Opt<int>(moved[1]), Opt<std::string>(moved[2]),
                        before, after, Opt<int>(moved[5]));
      }
      if (end < guessed_end) txn.exec_params(kReleaseSamplesAfter, loaded->second, end);
    }
    txn.exec_params(kCloseAllocations, loaded->second, end);
    absl::StatusOr<std::pair<v1::Job, int64_t>> updated = LoadJob(txn, key, false);
    if (!updated.ok()) return updated.status();
    return std::move(updated->first);
  });
}

absl::StatusOr<v1::Job> JobStore::Get(const v1::JobKey& key) {
  if (absl::Status s = CheckJobKey(key); !s.ok()) return s;
  return pool_->RunTransactionFor<v1::Job>([&](pqxx::work& txn) -> absl::StatusOr<v1::Job> {
    absl::StatusOr<std::pair<v1::Job, int64_t>> loaded = LoadJob(txn, key, false);
    if (!loaded.ok()) return loaded.status();
    return std::move(loaded->first);
  });
}

absl::StatusOr<ListJobsResult> JobStore::List(const v1::ListJobsRequest& request) {
  int page_size = request.page_size() <= 0 ? 100 : std::min(request.page_size(), 1000);
  std::optional<std::pair<std::string, int64_t>> after;
  if (!request.page_token().empty()) {
    std::string decoded;
    std::vector<std::string> parts;
    if (absl::WebSafeBase64Unescape(request.page_token(), &decoded)) {
      parts = absl::StrSplit(decoded, absl::MaxSplits('|', 1));
    }
    int64_t id = 0;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &id)) {
      return absl::InvalidArgumentError(
          absl::StrCat("page_token \"", request.page_token(), "\" is not a token of ListJobs"));
    }
    after = std::make_pair(parts[1], id);
  }
  return pool_->RunTransactionFor<ListJobsResult>([&](pqxx::work& txn)
                                                      -> absl::StatusOr<ListJobsResult> {
    std::vector<std::string> where = {"TRUE"};
    if (!request.cluster().empty()) where.push_back("cluster = " + txn.quote(request.cluster()));
    if (!request.user().empty()) where.push_back("user_name = " + txn.quote(request.user()));
    if (!request.team().empty()) where.push_back("team = " + txn.quote(request.team()));
    if (!request.workload_fingerprint().empty()) {
      where.push_back("workload_fingerprint = " + txn.quote(request.workload_fingerprint()));
    }
    if (!request.gpu_model().empty()) {
      where.push_back("gpu_model = " + txn.quote(request.gpu_model()));
    }
    if (request.workload_kind() == v1::WORKLOAD_KIND_TRAINING) {
      where.push_back("(workload_kind IS NULL OR workload_kind = 'training')");
    } else if (request.workload_kind() != v1::WORKLOAD_KIND_UNSPECIFIED) {
      const std::string kind = api::WorkloadKindName(request.workload_kind());
      if (kind.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("workload_kind=", static_cast<int>(request.workload_kind()),
                         " is not a workload kind"));
      }
      where.push_back("workload_kind = " + txn.quote(kind));
    }
    if (request.scheduler() != v1::SCHEDULER_KIND_UNSPECIFIED) {
      where.push_back("scheduler = " + txn.quote(SchedulerName(request.scheduler())));
    }
    if (request.states_size() > 0) {
      std::vector<std::string> states;
      for (int s : request.states()) {
        const std::string name = api::JobStateName(static_cast<v1::JobState>(s));
        if (name.empty()) {
          return absl::InvalidArgumentError(
              absl::StrCat("states contains ", s, ", not a job state"));
        }
        states.push_back(txn.quote(name));
      }
      where.push_back(absl::StrCat("state IN (", absl::StrJoin(states, ", "), ")"));
    }
    if (!request.labels().empty()) {
      where.push_back("labels @> " + txn.quote(LabelsJson(request.labels())) + "::jsonb");
    }
    if (request.has_active_in()) {
      if (request.active_in().has_end_time()) {
        where.push_back(absl::StrCat("start_time < to_timestamp(",
                                     *ToMs(request.active_in().end_time(), true), " / 1000.0)"));
      }
      if (request.active_in().has_start_time()) {
        where.push_back(absl::StrCat("(end_time IS NULL OR end_time > to_timestamp(",
                                     *ToMs(request.active_in().start_time(), true), " / 1000.0))"));
      }
    }
    if (after.has_value()) {
      where.push_back(absl::StrCat("(COALESCE(start_time, '-infinity'::timestamptz), id) < (",
                                   txn.quote(after->first), "::timestamptz, ", after->second, ")"));
    }
    pqxx::result rows = txn.exec(absl::StrCat(
        "SELECT ", kJobColumns,
        ", COALESCE(start_time, '-infinity'::timestamptz)::text "
        "FROM jobs WHERE ",
        absl::StrJoin(where, " AND "),
        " ORDER BY COALESCE(start_time, '-infinity'::timestamptz) DESC, id DESC LIMIT ",
        page_size + 1));
    ListJobsResult result;
    for (int i = 0; i < static_cast<int>(rows.size()) && i < page_size; ++i) {
      int64_t id = 0;
      result.jobs.push_back(ReadJob(txn, rows[i], &id));
      if (i == page_size - 1 && static_cast<int>(rows.size()) > page_size) {
        result.next_page_token =
            absl::WebSafeBase64Escape(absl::StrCat(id, "|", rows[i][18].as<std::string>()));
      }
    }
    return result;
  });
}

}  // namespace goodput::ingest
