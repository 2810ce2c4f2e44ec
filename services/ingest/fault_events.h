// Fault events of a batch: the fault readings its samples carry, turned into events by edge
// detection (core/gpu_faults.h) against each GPU's last known state.
//
// Ingest derives them where samples are written, in the same transaction as the samples'
// COPY (sample_store.h), with the per-GPU state in PostgreSQL (`gpu_fault_state`, locked per
// GPU for the transaction): a batch is stored once (its id claims it), so each edge is an
// event once; a restart of ingest loses nothing (the state is durable); two ingest replicas
// writing one GPU serialize on its state row. Each event keeps the job the batch attributed
// its sample to (or none: a GPU no job holds).
//
//   absl::flat_hash_map<std::string, GpuFaultState> states = ...;  // read FOR UPDATE
//   FaultDetection d = DetectFaultEvents(batch.samples, batch.job_row_ids, &states);
//   // write d.events and the states of d.changed_gpus
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "services/core/gpu_faults.h"
#include "services/ingest/sample.h"

namespace goodput::ingest {

// A GPU's state per state key (core::FaultStateKey).
using GpuFaultState = std::map<std::string, core::SignalState>;

// The key of a GPU's fault state within its cluster: GpuKey (host, UUID or index, MIG
// instance).
std::string FaultGpuKey(const Sample& sample);

// The sample's fault readings: its `faults` and, from its clock-event mask, one flag per
// fault bit (core::FaultClockEventBits).
std::vector<core::FaultReading> FaultReadingsOf(const Sample& sample);

struct FaultEvent {
  const Sample* sample = nullptr;  // where and when (its GPU and time)
  std::optional<int64_t> job;      // jobs.id the sample was attributed to
  core::FaultReading reading;
  core::FaultEdge edge;
};

struct FaultDetection {
  std::vector<FaultEvent> events;
  std::set<std::string> changed_gpus;  // GPU keys whose state changed
};

// The GPU keys of the samples that carry fault readings, sorted (the order to lock them in).
std::vector<std::string> FaultGpuKeys(const std::vector<const Sample*>& samples);

// Applies the readings of `samples` (parallel to `jobs`), per GPU in time order, to `states`
// (GPU key -> state; missing GPUs start empty) and returns the events.
FaultDetection DetectFaultEvents(const std::vector<const Sample*>& samples,
                                 const std::vector<std::optional<int64_t>>& jobs,
                                 absl::flat_hash_map<std::string, GpuFaultState>* states);

// A GPU's state as stored (jsonb: {"xid": [79, 1714564800000], ...}) and back.
std::string EncodeFaultState(const GpuFaultState& state);
absl::StatusOr<GpuFaultState> DecodeFaultState(const std::string& json);

}  // namespace goodput::ingest
