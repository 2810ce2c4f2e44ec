// The GPU catalog a service uses: the core library's built-in models plus the operator's
// additions and overrides from the service's configuration file, under `gpu_catalog`:
//
//   gpu_catalog:
//     overrides:
//       - name: "NVIDIA H100 80GB HBM3"          # change a known model...
//         tensor_max_clock_mhz: 1755             # e.g. a fleet with a lowered clock cap
//       - name: "NVIDIA A800-SXM4-80GB"          # ...or add a new one
//         base_model: "NVIDIA A100-SXM4-80GB"    # copy the fields it does not set
//         model_names: ["A800-SXM4-80GB"]
//         sm_count: 108
//         dense_flops_per_cycle_per_sm: {fp16: 2048, bf16: 2048}
//         hbm_capacity_gib: 80
//         board_power_w: 400                     # max TDP, for the stuck-counter check
//         source_note: "A800 datasheet: A100 compute, NVLink 400 GB/s"
//
// A bad entry stops start-up with a message naming the entry and the field.
#pragma once

#include "absl/status/statusor.h"
#include "services/core/gpu_catalog.h"
#include "services/platform/config.h"

namespace goodput::platform {

// The built-in catalog with `gpu_catalog.overrides` applied (the built-in one when absent).
// INVALID_ARGUMENT naming the entry index and field for a malformed entry or value.
absl::StatusOr<core::GpuCatalog> LoadGpuCatalog(const ConfigTree& config);

}  // namespace goodput::platform
