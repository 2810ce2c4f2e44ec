// Attribution: which job a GPU sample belongs to. A sample belongs to the job that held its
// GPU at the sample's time according to the scheduler's allocations; failing that, to the
// job its labels name: dcgm-exporter's `hpc_job` (Slurm job id), Osmo's workflow id pod
// label (`osmo.workflow_id`, or `osmo_workflow_id` as Prometheus sanitizes it), or a
// Kubernetes pod (the first pod/namespace label pair of IdentityRules::pod_labels present:
// `exported_pod`/`exported_namespace`, `pod`/`namespace`, `pod_name`/`pod_namespace` by
// default; matched against job ids "namespace/name" by dropping the pod name's trailing
// "-suffix" parts one at a time: "train-worker-0" -> "train-worker" -> "train"). Allocations
// win over labels because the scheduler is the source of truth. Hosts are compared as
// CanonicalHost names (identity_rules.h).
//
// The caller loads the allocations and label-named jobs relevant to a batch (storage), then
// attributes every sample with pure code:
//
//   Attributor attributor(allocations, jobs_by_id);
//   std::optional<int64_t> job_row = attributor.Attribute(sample);
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "services/ingest/identity_rules.h"
#include "services/ingest/sample.h"

namespace goodput::ingest {

// One GPU held by one job over [start_unix_ms, end_unix_ms) (no end = still held).
struct AllocationRecord {
  int64_t job_row_id = 0;  // jobs.id
  std::string host = {};
  std::optional<int> gpu_index = {};
  std::string uuid = {};
  int64_t start_unix_ms = 0;
  std::optional<int64_t> end_unix_ms = {};
  // Set when the job holds one MIG instance (GPU_I_ID) rather than the whole GPU.
  std::optional<int> mig_instance = {};
};

// True when an allocation of `gpu` covers `sample_gpu`: equal UUIDs when both carry one
// (different UUIDs never match), otherwise the same host and index. An allocation of a
// whole GPU covers its MIG slices; an allocation of a MIG instance covers only the samples
// of that instance (GPU_I_ID), never those of the whole GPU or of another instance.
bool SameGpu(const AllocationRecord& allocation, const GpuIdentity& sample_gpu);

// The job ids a sample's labels name, most specific first (see the file comment).
std::vector<std::string> LabelJobIds(const Sample& sample,
                                     const std::vector<PodLabelPair>& pod_labels =
                                         IdentityRules::DefaultPodLabels());

class Attributor {
 public:
  // `jobs_by_id`: job id (within the batch's cluster) -> jobs.id, for the label-named jobs.
  // Allocation hosts are canonicalized with `rules` (rows registered before hosts were
  // canonical at registration still match).
  Attributor(std::vector<AllocationRecord> allocations,
             absl::flat_hash_map<std::string, int64_t> jobs_by_id,
             IdentityRules rules = IdentityRules());

  // The jobs.id of the job the sample belongs to, or nullopt when none is known yet.
  std::optional<int64_t> Attribute(const Sample& sample) const;

 private:
  absl::flat_hash_map<std::string, std::vector<AllocationRecord>> by_host_;
  absl::flat_hash_map<std::string, std::vector<AllocationRecord>> by_uuid_;
  absl::flat_hash_map<std::string, int64_t> jobs_by_id_;
  IdentityRules rules_;
};

}  // namespace goodput::ingest
