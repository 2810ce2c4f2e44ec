#include "services/alerting/gpu_fault_store.h"

#include "services/alerting/gpu_fault_findings.h"
#include "services/api/api_convert.h"
#include "services/core/gpu_faults.h"
#include "services/core/xid_catalog.h"

namespace goodput::alerting {

namespace v1 = ::goodput::v1;

namespace {

// The events of job $1 (jobs.id): attributed to it, or to no job and on a GPU it held then
// (the allocation's UUID, or its host and index when either side has no UUID).
#define GP_JOB_EVENT_IDS(job)                                                    \
  "SELECT id FROM gpu_fault_events WHERE job = " job                             \
  " UNION SELECT e2.id FROM job_gpus g JOIN gpu_fault_events e2 "                \
  "ON e2.cluster = g.cluster AND e2.host = g.host AND e2.event_time <@ g.valid " \
  "AND e2.job IS NULL "                                                          \
  "AND ((g.gpu_uuid IS NOT NULL AND e2.gpu_uuid = g.gpu_uuid) OR "               \
  "(g.gpu_index IS NOT NULL AND e2.gpu_index = g.gpu_index AND "                 \
  "(e2.gpu_uuid IS NULL OR g.gpu_uuid IS NULL))) "                               \
  "AND (g.mig_instance IS NULL OR e2.mig_instance_id IS NULL OR "                \
  "e2.mig_instance_id = g.mig_instance) WHERE g.job = " job

// The signals that alert by themselves (FaultAlertSeverity; informational XIDs are filtered
// in C++).
#define GP_ALERTING(e)                                                              \
  "(" e                                                                             \
  ".signal IN ('ecc_dbe_volatile', 'ecc_dbe_aggregate', "                           \
  "'remapped_rows_uncorrectable', 'row_remap_failure', 'row_remap_pending') OR (" e \
  ".signal IN ('xid', 'xid_count') AND coalesce(" e ".xid, 0) <> 0))"

// ingest's GPU key of gpu_fault_state (services/ingest/sample.h GpuKey).
#define GP_STATE_KEY(e)                                  \
  e ".host || '|' || coalesce(" e ".gpu_uuid, '#' || " e \
    ".gpu_index::text, '') || "                          \
    "coalesce('|mig' || " e ".mig_instance_id::text, '')"

constexpr char kJobFaults[] =
    "WITH j AS (SELECT id FROM jobs WHERE cluster = $1 AND job_id = $2) "
    "SELECT e.id, e.host, e.gpu_index, e.gpu_uuid, e.mig_instance_id, "
    "(extract(epoch FROM e.event_time) * 1000)::bigint, e.signal, e.xid, e.value, "
    "e.previous_value, e.count, e.counter_reset, e.source, "
    "CASE WHEN e.signal = 'row_remap_pending' THEN ("
    "  SELECT (s.signals -> 'row_remap_pending' ->> 1)::bigint FROM gpu_fault_state s "
    "  WHERE s.cluster = e.cluster AND s.gpu_key = " GP_STATE_KEY("e") " "
    "  AND (s.signals -> 'row_remap_pending' ->> 0)::float8 = 0 "
    "  AND (s.signals -> 'row_remap_pending' ->> 1)::bigint > "
    "      (extract(epoch FROM e.event_time) * 1000)::bigint) END "
    "FROM gpu_fault_events e, j WHERE e.id IN (" GP_JOB_EVENT_IDS("j.id") ") "
    "ORDER BY e.event_time, e.id LIMIT 10000";

// From the alerting events of the last $1 ms (partial index gpu_fault_events_alerting,
// migration 20261128212000) to the running jobs that held their GPUs, plus the jobs with an
// open gpu_fault alert (the alert keeps an older fault's job a candidate until it resolves).
constexpr char kCandidates[] =
    "WITH e AS (SELECT * FROM gpu_fault_events e "
    "  WHERE event_time > now() - $1::bigint * interval '1 millisecond' AND " GP_ALERTING("e") ") "
    "SELECT j.cluster, j.job_id FROM e JOIN jobs j ON j.id = e.job "
    "WHERE j.state IN ('pending', 'running', 'unknown') "
    "UNION SELECT j.cluster, j.job_id FROM e JOIN job_gpus g "
    "  ON e.job IS NULL AND g.cluster = e.cluster AND g.host = e.host AND e.event_time <@ g.valid "
    "  AND ((g.gpu_uuid IS NOT NULL AND e.gpu_uuid = g.gpu_uuid) OR "
    "  (g.gpu_index IS NOT NULL AND e.gpu_index = g.gpu_index AND "
    "  (e.gpu_uuid IS NULL OR g.gpu_uuid IS NULL))) "
    "  AND (g.mig_instance IS NULL OR e.mig_instance_id IS NULL OR "
    "  e.mig_instance_id = g.mig_instance) "
    "JOIN jobs j ON j.id = g.job WHERE j.state IN ('pending', 'running', 'unknown') "
    "UNION SELECT cluster, job_id FROM alerts WHERE kind = 'gpu_fault' AND state <> 'resolved'";

}  // namespace

std::vector<FaultObs> JobFaults(pqxx::work& tx, const std::string& cluster,
                                const std::string& job_id) {
  std::vector<FaultObs> out;
  for (const pqxx::row& r : tx.exec_params(kJobFaults, cluster, job_id)) {
    FaultObs f;
    f.id = r[0].as<int64_t>();
    f.host = r[1].as<std::string>();
    if (!r[2].is_null()) f.gpu_index = r[2].as<int>();
    if (!r[3].is_null()) f.gpu_uuid = r[3].as<std::string>();
    if (!r[4].is_null()) f.mig_instance = r[4].as<int>();
    f.time_ms = r[5].as<int64_t>();
    f.signal = r[6].as<std::string>();
    if (!r[7].is_null()) f.xid = r[7].as<int64_t>();
    f.value = r[8].as<double>();
    if (!r[9].is_null()) f.previous_value = r[9].as<double>();
    f.count = r[10].as<double>();
    f.counter_reset = r[11].as<bool>();
    f.source = r[12].as<std::string>();
    if (!r[13].is_null()) f.cleared_ms = r[13].as<int64_t>();
    out.push_back(std::move(f));
  }
  return out;
}

pqxx::result GpuFaultCandidates(pqxx::work& tx, int64_t horizon_s) {
  return tx.exec_params(kCandidates, horizon_s * 1000);
}

v1::GpuRef GpuRefOf(const FaultObs& f) {
  v1::GpuRef g;
  g.set_host(f.host);
  if (f.gpu_index) g.set_gpu_index(*f.gpu_index);
  g.set_uuid(f.gpu_uuid);
  if (f.mig_instance) g.mutable_mig()->set_gpu_instance_id(*f.mig_instance);
  return g;
}

v1::FaultEvent FaultEventProto(const FaultObs& f, const std::string& cluster,
                               const std::string& job_id) {
  v1::FaultEvent e;
  e.set_cluster(cluster);
  *e.mutable_gpu() = GpuRefOf(f);
  if (!job_id.empty()) {
    e.mutable_job()->set_cluster(cluster);
    e.mutable_job()->set_job_id(job_id);
  }
  *e.mutable_time() = api::UnixMsToTimestamp(f.time_ms);
  if (std::optional<core::FaultSignal> s = core::FaultSignalFromName(f.signal)) {
    // The API's number is the core enum's position + 1 (common.proto).
    e.set_signal(static_cast<v1::FaultSignal>(static_cast<int>(*s) + 1));
    e.set_signal_description(std::string(core::FaultSignalDescription(*s)));
  }
  if (f.xid) e.set_xid(*f.xid);
  e.set_value(f.value);
  if (f.previous_value) e.set_previous_value(*f.previous_value);
  e.set_count(f.count);
  e.set_counter_reset(f.counter_reset);
  if (const core::XidInfo* info = f.xid ? core::FindXid(*f.xid) : nullptr) {
    e.set_xid_meaning(std::string(info->meaning));
    e.set_blame(std::string(core::XidBlameName(info->blame)));
    e.set_recommended_action(std::string(info->action));
    e.set_xid_source(std::string(info->source));
  } else {
    e.set_blame(FaultBlame(f));
  }
  e.set_source(f.source);
  return e;
}

FaultObs FaultObsFromProto(const v1::FaultEvent& e) {
  FaultObs f;
  f.host = e.gpu().host();
  if (e.gpu().has_gpu_index()) f.gpu_index = e.gpu().gpu_index();
  f.gpu_uuid = e.gpu().uuid();
  if (e.gpu().has_mig()) f.mig_instance = e.gpu().mig().gpu_instance_id();
  f.time_ms = api::TimestampToUnixMs(e.time());
  const int signal = static_cast<int>(e.signal()) - 1;
  if (signal >= 0 && signal < core::kFaultSignalCount) {
    f.signal = std::string(core::FaultSignalName(static_cast<core::FaultSignal>(signal)));
  }
  if (e.xid() != 0) f.xid = e.xid();
  f.value = e.value();
  if (e.has_previous_value()) f.previous_value = e.previous_value();
  f.count = e.count();
  f.counter_reset = e.counter_reset();
  f.source = e.source();
  return f;
}

}  // namespace goodput::alerting
