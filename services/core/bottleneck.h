// What bounds a job: a bottleneck class per window and for the job, from the DCGM profiling
// fields goodput already stores (mean over the job's GPUs for the window).
//
// Which fields tell which class apart (fields a site may not export are optional; SM
// activity and SM occupancy are commented out in dcgm-exporter's default metric list,
// default-counters.csv):
//
//   class                  needs                              falls back to
//   idle                   GR engine active                   SM active, tensor, DRAM
//   launch-/CPU-bound      GR engine active + SM active       GR engine with tensor and DRAM ~0
//   input-bound            GR engine active + SM active       GR engine alone (gaps)
//   memory-bound           DRAM active + tensor active        -
//   communication-bound    NVLink or PCIe bytes/s + link peak -
//   compute-bound          tensor active (or SM active)       -
//
// A class read through a fallback has its confidence lowered, and the verdict names the
// fields that were missing. Thresholds, and what they rest on (the field descriptions are
// the NVIDIA DCGM User Guide's, "Profiling Metrics"; the cut-offs are goodput's own,
// uncalibrated until a lent GPU measures them, see below):
//   - GR engine active < 0.05: idle. GR engine active is the share of time any kernel ran;
//     5% is 50 ms of kernels a second, nothing a job that computes does.
//   - SM active < 0.4 x GR engine active: kernels run, but on few SMs — small kernels one
//     after another: the host cannot launch work fast enough (launch-bound small-batch
//     inference, as characterised by the CPU-GPU coupled inference study). The guide reads SM
//     active below 0.5 as ineffective use and 0.8 or more as necessary for effective use.
//     Without SM active: GR engine active with tensor and DRAM activity both below 0.02.
//   - GR engine active in [0.05, 0.5) with SM active >= 0.6 x GR active: full kernels with
//     gaps between them: the GPU waits for its input (data loader, host-to-device copies).
//     Without SM active: GR engine below 0.5 with tensor or DRAM activity.
//   - DRAM active >= 0.5 and >= 1.5 x tensor active: memory-bound. The guide puts DRAM
//     active's practical peak near 0.8, so 0.5 is well over half the bandwidth one can get;
//     characterization.h's roofline class reads the same field against FLOP/s.
//   - NVLink or PCIe traffic (the busier direction) >= 0.4 of the link's peak per direction
//     with tensor active < 0.3: communication-bound, checked first: copy engines move data
//     with the GR engine idle.
//   - tensor active >= 0.3, or SM active >= 0.8 with SM occupancy >= 0.3: compute-bound.
// Calibrated on an H200 (tests/data/calibration/h200_bottleneck_2026-11-28.json, written by
// tools/calibration/bottleneck_calibrate.py, replayed by bottleneck_test.cc): idle, a tiny-
// kernel loop, a CPU-heavy loader, a device-to-device copy loop, pinned host-to-device
// copies and bf16 GEMMs each land in their class, with and without the optional SM fields.
//
//   BottleneckVerdict v = ClassifyBottleneck({.gr_engine_active = 0.9, .sm_active = 0.12});
//   // v.cls == BottleneckClass::kLaunchBound
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace goodput::core {

enum class BottleneckClass {
  kUnknown,
  kIdle,
  kLaunchBound,
  kInputBound,
  kMemoryBound,
  kCommunicationBound,
  kComputeBound,
};

// "unknown", "idle", "launch_bound", "input_bound", "memory_bound", "communication_bound",
// "compute_bound".
absl::string_view BottleneckClassName(BottleneckClass cls);
// What to try, one sentence per class (empty for unknown and compute-bound).
absl::string_view BottleneckAdvice(BottleneckClass cls);

// One window of a job: means over its GPUs, fractions in [0, 1]; nullopt when not exported.
struct BottleneckInputs {
  std::optional<double> gr_engine_active = std::nullopt;
  std::optional<double> sm_active = std::nullopt;
  std::optional<double> sm_occupancy = std::nullopt;
  std::optional<double> tensor_active = std::nullopt;
  std::optional<double> dram_active = std::nullopt;
  // Link traffic of the busier direction (tx or rx) per GPU, and the link's peak per
  // direction (0 when unknown): H100/H200 NVLink 450e9, PCIe Gen5 x16 about 63e9.
  std::optional<double> nvlink_bytes_per_s = std::nullopt;
  std::optional<double> pcie_bytes_per_s = std::nullopt;
  double nvlink_peak_bytes_per_s = 0;
  double pcie_peak_bytes_per_s = 0;
};

struct BottleneckVerdict {
  BottleneckClass cls = BottleneckClass::kUnknown;
  double confidence = 0;             // (0, 1]; lowered for each fallback used
  std::string reason;                // the figures that decided it
  std::vector<std::string> missing;  // fields that were not there ("sm_active", ...)
};

BottleneckVerdict ClassifyBottleneck(const BottleneckInputs& in);

// The job's class: the class of most windows (ties: the more specific of them, idle last),
// its confidence the mean of those windows' confidence times their share. kUnknown with
// confidence 0 when no window was classified.
BottleneckVerdict ClassifyJobBottleneck(const std::vector<BottleneckVerdict>& windows);

}  // namespace goodput::core
