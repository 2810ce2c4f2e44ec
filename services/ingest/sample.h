// The ingest service's own picture of telemetry: one GPU sample with the DCGM fields it
// may carry, the GPU it came from, and the refusal a bad sample or line turns into.
// Plain structs with no protobuf or database types, so validation, exposition parsing and
// attribution are pure code that tests can drive directly.
//
//   Sample s;
//   s.gpu = {.host = "gpu-node-042", .gpu_index = 3};
//   s.time_unix_ms = 1714564800000;
//   s.set(SampleField::kTensorActive, 0.42);
//   s.set(SampleField::kSmClockMhz, 1755);
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "services/core/gpu_faults.h"

namespace goodput::ingest {

// The per-GPU measurements a sample may carry; see GpuSample in goodput/v1/ingest.proto for
// units and the DCGM field behind each one.
enum class SampleField {
  kTensorActive,
  kSmClockMhz,
  kSmActive,
  kSmOccupancy,
  kDramActive,
  kPipeFp16Active,
  kPipeFp32Active,
  kPipeFp64Active,
  kGrEngineActive,
  kGpuUtil,
  kFbUsedMib,
  kFbFreeMib,
  kPowerW,
  kTotalEnergyMj,
  kGpuTempC,
  kNvlinkTxBytesPerS,
  kNvlinkRxBytesPerS,
  kPcieTxBytesPerS,
  kPcieRxBytesPerS,
  kClockThrottleReasons,
};
inline constexpr int kSampleFieldCount = 20;

// The API's field name ("tensor_active", "sm_clock_mhz", ...), used in refusals.
absl::string_view SampleFieldName(SampleField field);

// True for fields stored in PostgreSQL `real` (4-byte float) columns; the cumulative energy
// and byte counters are double precision and the throttle mask bigint.
bool StoredAsReal(SampleField field);

// One MIG slice of a physical GPU.
struct MigSlice {
  int gpu_instance_id = 0;
  std::optional<int> compute_instance_id = {};
  std::string profile = {};  // "1g.10gb"
};

// A GPU within a cluster: host plus index and/or UUID, optionally one MIG slice of it.
struct GpuIdentity {
  std::string host = {};
  std::optional<int> gpu_index = {};
  std::string uuid = {};
  std::optional<MigSlice> mig = {};
};

// A stable text key for one GPU (or MIG slice), used to group and deduplicate samples:
// "host|uuid-or-#index|mig-instance".
std::string GpuKey(const GpuIdentity& gpu);

// One sample of one GPU at one instant. Unset fields were not reported.
struct Sample {
  GpuIdentity gpu;
  int64_t time_unix_ms = 0;
  std::string gpu_model;                      // dcgm-exporter modelName; may be empty
  std::map<std::string, std::string> labels;  // hpc_job, pod, namespace, driver version, ...
  std::array<std::optional<double>, kSampleFieldCount> values{};
  // Fault signals read with the sample (XID, ECC, row remapping, NVLink and PCIe error
  // counters): not stored in `samples`, turned into fault events by ingest (fault_events.h).
  std::vector<core::FaultReading> faults;

  const std::optional<double>& get(SampleField field) const {
    return values[static_cast<int>(field)];
  }
  void set(SampleField field, double value) { values[static_cast<int>(field)] = value; }
  // True when at least one measurement or fault reading is present.
  bool HasAnyValue() const;
};

// Labels that name the workload a series belongs to: the Kubernetes pod, namespace and
// container in each spelling dcgm-exporter and Prometheus use (`pod`, `exported_pod`,
// `pod_name`, ...). With GPU time-slicing dcgm-exporter prints one series per pod for one
// GPU (with `--kubernetes-virtual-gpus`, also a `vgpu` replica label); those are distinct
// series, not duplicates.
inline constexpr std::array<const char*, 10> kWorkloadLabels = {
    "exported_namespace", "exported_pod", "exported_container", "namespace", "pod",
    "container",          "pod_namespace", "pod_name",          "container_name", "vgpu"};

// GpuKey plus the workload labels present: the key under which samples of one GPU at one
// instant are duplicates of each other.
std::string SeriesKey(const Sample& sample);

// The label ingest sets on samples of a GPU that several workloads (pods) reported at the
// same instant (time-slicing): the number of workloads, e.g. "2".
inline constexpr char kSharedByLabel[] = "gpu_shared_by";

// Sets kSharedByLabel on every sample whose GPU and timestamp occur under more than one
// SeriesKey among `samples`, to that count. Returns the samples marked.
int64_t MarkSharedGpus(std::vector<Sample>& samples);

// Why an item was refused; mirrors goodput.v1.RefusalCode.
enum class RefusalCode {
  kMalformed = 1,
  kMissingField = 2,
  kNotFinite = 3,
  kOutOfRange = 4,
  kUnknownGpuModel = 5,
  kUnknownValue = 6,
  kFutureTimestamp = 7,
  kTooOld = 8,
  kDuplicate = 9,
  kInconsistent = 10,
};

// One refused sample or line: where it was, which field and value, and a sentence.
struct Refusal {
  std::string batch_id;
  int64_t index = 0;        // 0-based position in the batch (or among sample lines)
  int64_t line_number = 0;  // 1-based line of a text body; 0 for non-text input
  std::string field;
  std::string value;  // as received, at most 200 bytes
  RefusalCode code = RefusalCode::kMalformed;
  std::string message;
};

// Truncates a received value to the 200 bytes a refusal may carry.
std::string TruncateForRefusal(absl::string_view value);

}  // namespace goodput::ingest
