#include "services/ingest/sample.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "services/api/api_checks.h"

namespace goodput::ingest {

absl::string_view SampleFieldName(SampleField field) {
  switch (field) {
    case SampleField::kTensorActive:
      return "tensor_active";
    case SampleField::kSmClockMhz:
      return "sm_clock_mhz";
    case SampleField::kSmActive:
      return "sm_active";
    case SampleField::kSmOccupancy:
      return "sm_occupancy";
    case SampleField::kDramActive:
      return "dram_active";
    case SampleField::kPipeFp16Active:
      return "pipe_fp16_active";
    case SampleField::kPipeFp32Active:
      return "pipe_fp32_active";
    case SampleField::kPipeFp64Active:
      return "pipe_fp64_active";
    case SampleField::kGrEngineActive:
      return "gr_engine_active";
    case SampleField::kGpuUtil:
      return "gpu_util";
    case SampleField::kFbUsedMib:
      return "fb_used_mib";
    case SampleField::kFbFreeMib:
      return "fb_free_mib";
    case SampleField::kPowerW:
      return "power_w";
    case SampleField::kTotalEnergyMj:
      return "total_energy_mj";
    case SampleField::kGpuTempC:
      return "gpu_temp_c";
    case SampleField::kNvlinkTxBytesPerS:
      return "nvlink_tx_bytes_per_s";
    case SampleField::kNvlinkRxBytesPerS:
      return "nvlink_rx_bytes_per_s";
    case SampleField::kPcieTxBytesPerS:
      return "pcie_tx_bytes_per_s";
    case SampleField::kPcieRxBytesPerS:
      return "pcie_rx_bytes_per_s";
    case SampleField::kClockThrottleReasons:
      return "clock_throttle_reasons";
  }
  return "unknown_field";
}

bool StoredAsReal(SampleField field) {
  switch (field) {
    case SampleField::kTotalEnergyMj:
    case SampleField::kNvlinkTxBytesPerS:
    case SampleField::kNvlinkRxBytesPerS:
    case SampleField::kPcieTxBytesPerS:
    case SampleField::kPcieRxBytesPerS:
    case SampleField::kClockThrottleReasons:
      return false;
    default:
      return true;
  }
}

std::string GpuKey(const GpuIdentity& gpu) {
  std::string key = absl::StrCat(gpu.host, "|");
  if (!gpu.uuid.empty()) {
    absl::StrAppend(&key, gpu.uuid);
  } else if (gpu.gpu_index.has_value()) {
    absl::StrAppend(&key, "#", *gpu.gpu_index);
  }
  if (gpu.mig.has_value()) absl::StrAppend(&key, "|mig", gpu.mig->gpu_instance_id);
  return key;
}

std::string SeriesKey(const Sample& sample) {
  std::string key = GpuKey(sample.gpu);
  for (const char* name : kWorkloadLabels) {
    if (auto it = sample.labels.find(name); it != sample.labels.end() && !it->second.empty()) {
      absl::StrAppend(&key, "|", name, "=", it->second);
    }
  }
  return key;
}

int64_t MarkSharedGpus(std::vector<Sample>& samples) {
  // Series differ only by workload labels: a batch without any (Slurm nodes, agents) has no
  // shared GPU, and its samples need no keys.
  const bool any_workload = std::any_of(samples.begin(), samples.end(), [](const Sample& s) {
    return std::any_of(kWorkloadLabels.begin(), kWorkloadLabels.end(),
                       [&](const char* name) { return s.labels.contains(name); });
  });
  if (!any_workload) return 0;
  // Nearly every (GPU, time) holds one sample: workload labels are compared only where it
  // holds several.
  absl::flat_hash_map<std::pair<std::string, int64_t>, std::vector<size_t>> at;
  at.reserve(samples.size());
  for (size_t i = 0; i < samples.size(); ++i) {
    at[{GpuKey(samples[i].gpu), samples[i].time_unix_ms}].push_back(i);
  }
  int64_t marked = 0;
  for (const auto& [gpu_time, indexes] : at) {
    if (indexes.size() < 2) continue;
    absl::flat_hash_set<std::string> series;
    for (size_t i : indexes) series.insert(SeriesKey(samples[i]));
    if (series.size() < 2) continue;
    for (size_t i : indexes) {
      samples[i].labels[kSharedByLabel] = absl::StrCat(series.size());
      ++marked;
    }
  }
  return marked;
}

bool Sample::HasAnyValue() const {
  if (!faults.empty()) return true;
  for (const auto& v : values) {
    if (v.has_value()) return true;
  }
  return false;
}

std::string TruncateForRefusal(absl::string_view value) { return api::Sanitize(value); }

}  // namespace goodput::ingest
