// MIG (Multi-Instance GPU) instances: how many SMs a GPU-instance profile has, and how an
// instance's OFU counts toward the OFU of the GPU it is carved from.
//
// dcgm-exporter labels a MIG instance's samples with the GPU-instance profile in GPU_I_PROFILE
// ("1g.10gb", "3g.40gb", "1g.10gb+me"). DCGM's profiling fields on a MIG instance
// (DCGM_FI_PROF_PIPE_TENSOR_ACTIVE) are relative to that instance: the fraction of the
// instance's own SMs' cycles the tensor pipe was busy. The SM clock is the GPU's. So
//
//   instance OFU = TPA_instance x f_SM / f_max                          (domain eq. 1)
//   GPU-level contribution = instance OFU x instance SMs / GPU SMs
//
// and the OFU of a partitioned GPU is the sum of its instances' contributions (SMs in no
// instance, and the SMs MIG mode disables, contribute 0: an A100 in MIG mode exposes at most
// 98 of its 108 SMs, so seven busy 1g.5gb instances give 7 x 14 / 108 = 0.907).
//
//   absl::StatusOr<MigInstanceShape> shape = FindMigProfile(*h100_spec, "1g.10gb");
//   double gpu_share = shape->GpuLevelOfu(instance_ofu);   // instance_ofu x 16 / 132
//
// SM counts are what `nvidia-smi mig -lgip` reports per profile (column SM); the NVIDIA MIG
// user guide ("Supported MIG Profiles") names the profiles of each product but gives SMs only as
// slice fractions, which are not exact (H100 1g.20gb has 26 SMs, not 132 / 7). The table's
// sources are in mig.cc. A profile the table does not hold is NOT_FOUND: guessing a share
// would bias the GPU-level figure silently.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "services/core/gpu_catalog.h"

namespace goodput::core {

// One GPU-instance profile on one GPU model.
struct MigInstanceShape {
  std::string profile;        // canonical profile, e.g. "1g.10gb" (media suffixes dropped)
  int instance_sm_count = 0;  // SMs the instance owns
  int gpu_sm_count = 0;       // SMs of the whole GPU (GpuSpec::sm_count)

  // instance_sm_count / gpu_sm_count: the instance's share of the GPU's SMs, 0..1.
  double SmShare() const;
  // The instance's contribution to its GPU's OFU: instance_ofu x SmShare().
  double GpuLevelOfu(double instance_ofu) const;
};

// Looks `profile` up for `gpu`. Accepts the profile as dcgm-exporter prints it, case-insensitive,
// with or without a leading "MIG " and with a media/graphics suffix ("+me", "+gfx", "-me"),
// which changes the engines an instance gets, not its SMs. NOT_FOUND naming the profile and the
// model if the model has no MIG table or the profile is not in it; FAILED_PRECONDITION if the
// spec's sm_count (e.g. after an operator override) is smaller than the profile's SMs.
absl::StatusOr<MigInstanceShape> FindMigProfile(const GpuSpec& gpu, absl::string_view profile);

// Every profile the table holds for `gpu` (empty for a model without MIG data), in the order
// of the table: smallest instance first.
std::vector<MigInstanceShape> MigProfilesFor(const GpuSpec& gpu);

}  // namespace goodput::core
