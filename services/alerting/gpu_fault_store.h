// alerting's reads of the GPU fault events goodput-ingest derives (`gpu_fault_events`,
// migration 20261128190000; services/ingest/fault_events.h), inside the engine's transaction.
//
// Why PostgreSQL, and why no watermark: ingest commits a batch's fault events with its samples,
// so they are durable (and visible to every alerting replica) before ofu has even read those
// samples. A job's `gpu_fault` alerts are a function of the job's whole set of alerting faults
// (one per faulty GPU, fingerprinted by the GPU), so the engine re-derives them from that set
// under the job's lock, and the lifecycle opens only what is not open yet: reading an event
// twice (two replicas, a restart, every sweep) changes nothing, and no watermark can skip an
// event committed out of order, because there is none. The candidates are few — running jobs
// with a recent alerting fault (a partial index holds only those), and jobs with an open
// gpu_fault alert.
//
//   std::vector<FaultObs> faults = JobFaults(tx, "eos", "4711");
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "goodput/v1/ofu.pb.h"
#include "pqxx/pqxx"
#include "services/alerting/job_detectors.h"

namespace goodput::alerting {

// The job's fault events, time order: those ingest attributed to it, and those attributed to
// no job on a GPU it was allocated at the time (MIG instances: the instance's and the whole
// GPU's). At most 10,000 (the first). A pending row remap that the GPU's state shows cleared
// since carries `cleared_ms`.
std::vector<FaultObs> JobFaults(pqxx::work& tx, const std::string& cluster,
                                const std::string& job_id);

// (cluster, job_id) of running, pending or unknown jobs with an alerting fault
// (gpu_fault_findings.h) of the last `horizon_s` on their GPUs, and of jobs with an open
// gpu_fault alert. An evaluated fault opens an alert that keeps its job a candidate, so the
// horizon only has to outlast an outage of every alerting replica.
pqxx::result GpuFaultCandidates(pqxx::work& tx, int64_t horizon_s);

// The API's form of a fault event, with the XID catalog's meaning, blame, action and source,
// and back (what the job reporter reads from ofu's ListFaultEvents).
::goodput::v1::FaultEvent FaultEventProto(const FaultObs& f, const std::string& cluster,
                                          const std::string& job_id);
::goodput::v1::GpuRef GpuRefOf(const FaultObs& f);
FaultObs FaultObsFromProto(const ::goodput::v1::FaultEvent& e);

}  // namespace goodput::alerting
