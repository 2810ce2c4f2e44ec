#include "services/ingest/attribution.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace goodput::ingest {
namespace {

bool Covers(const AllocationRecord& a, int64_t time_ms) {
  return time_ms >= a.start_unix_ms && (!a.end_unix_ms.has_value() || time_ms < *a.end_unix_ms);
}

const std::string* FindLabel(const Sample& sample, const char* name) {
  auto it = sample.labels.find(name);
  if (it == sample.labels.end() || it->second.empty()) return nullptr;
  return &it->second;
}

}  // namespace

bool SameGpu(const AllocationRecord& allocation, const GpuIdentity& gpu) {
  if (allocation.mig_instance.has_value() &&
      (!gpu.mig.has_value() || gpu.mig->gpu_instance_id != *allocation.mig_instance)) {
    return false;
  }
  if (!allocation.uuid.empty() && !gpu.uuid.empty()) return allocation.uuid == gpu.uuid;
  return allocation.host == gpu.host && allocation.gpu_index.has_value() &&
         gpu.gpu_index.has_value() && *allocation.gpu_index == *gpu.gpu_index;
}

std::vector<std::string> LabelJobIds(const Sample& sample,
                                     const std::vector<PodLabelPair>& pod_labels) {
  std::vector<std::string> ids;
  if (const std::string* hpc_job = FindLabel(sample, "hpc_job")) ids.push_back(*hpc_job);
  for (const char* name : {"osmo.workflow_id", "osmo_workflow_id", "label_osmo_workflow_id"}) {
    if (const std::string* workflow = FindLabel(sample, name)) {
      ids.push_back(*workflow);
      break;
    }
  }
  const std::string* pod = nullptr;
  const std::string* ns = nullptr;
  for (const PodLabelPair& pair : pod_labels) {
    pod = FindLabel(sample, pair.pod.c_str());
    ns = FindLabel(sample, pair.ns.c_str());
    if (pod != nullptr && ns != nullptr) break;
  }
  if (pod != nullptr && ns != nullptr) {
    std::string name = *pod;
    while (true) {
      ids.push_back(absl::StrCat(*ns, "/", name));
      const size_t dash = name.rfind('-');
      if (dash == std::string::npos || dash == 0) break;
      name.resize(dash);
    }
  }
  return ids;
}

Attributor::Attributor(std::vector<AllocationRecord> allocations,
                       absl::flat_hash_map<std::string, int64_t> jobs_by_id, IdentityRules rules)
    : jobs_by_id_(std::move(jobs_by_id)), rules_(std::move(rules)) {
  for (AllocationRecord& a : allocations) {
    a.host = CanonicalHost(a.host, rules_);
    if (!a.uuid.empty()) by_uuid_[a.uuid].push_back(a);
    if (a.gpu_index.has_value()) by_host_[a.host].push_back(std::move(a));
  }
}

std::optional<int64_t> Attributor::Attribute(const Sample& sample) const {
  if (!sample.gpu.uuid.empty()) {
    if (auto it = by_uuid_.find(sample.gpu.uuid); it != by_uuid_.end()) {
      for (const AllocationRecord& a : it->second) {
        if (SameGpu(a, sample.gpu) && Covers(a, sample.time_unix_ms)) return a.job_row_id;
      }
    }
  }
  if (sample.gpu.gpu_index.has_value()) {
    // Samples from IngestPipeline are canonical already: copy the identity only if not.
    std::optional<GpuIdentity> canonical;
    if (std::string host = CanonicalHost(sample.gpu.host, rules_); host != sample.gpu.host) {
      canonical = sample.gpu;
      canonical->host = std::move(host);
    }
    const GpuIdentity& gpu = canonical ? *canonical : sample.gpu;
    if (auto it = by_host_.find(gpu.host); it != by_host_.end()) {
      for (const AllocationRecord& a : it->second) {
        if (SameGpu(a, gpu) && Covers(a, sample.time_unix_ms)) return a.job_row_id;
      }
    }
  }
  for (const std::string& id : LabelJobIds(sample, rules_.pod_labels)) {
    if (auto it = jobs_by_id_.find(id); it != jobs_by_id_.end()) return it->second;
  }
  return std::nullopt;
}

}  // namespace goodput::ingest
