// Tile quantization: how much more work a GEMM kernel executes than the 2·M·N·K the model
// counts, because it pads the problem to whole tiles and whole clusters (domain eq. 2-4, 8).
//
//   M_eff = ceil(ceil(M / T_M) / C_M) × C_M × T_M    (N likewise; K_eff = ceil(K / T_K) × T_K)
//   FLOPs_executed = 2 · M_eff · N_eff · K_eff
//   overhead %     = (FLOPs_executed − 2MNK) / 2MNK × 100            (eq. 2)
//   OFU_adj        = OFU × 2MNK / FLOPs_executed                     (eq. 8)
//
// Tile shapes come from the kernel; cuBLAS nvJet kernel names encode them:
//   absl::StatusOr<NvjetKernel> k = ParseNvjetKernelName("nvjet_sm90_hsh_256x160_64x4_2x1");
//   // k->tile = {256, 160, 64, cluster 2x1}, k->stages = 4
//   absl::StatusOr<TileQuantization> q = ComputeTileQuantization({8192, 1000, 4096}, k->tile);
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace goodput::core {

// C[M×N] = A[M×K] · B[K×N].
struct GemmShape {
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
};

// CTA tile and thread-block cluster of a GEMM kernel.
struct TileConfig {
  int64_t tile_m = 0;
  int64_t tile_n = 0;
  int64_t tile_k = 0;
  int64_t cluster_m = 1;
  int64_t cluster_n = 1;
};

struct TileQuantization {
  int64_t m_eff = 0;
  int64_t n_eff = 0;
  int64_t k_eff = 0;
  double useful_flops = 0;    // 2·M·N·K
  double executed_flops = 0;  // 2·M_eff·N_eff·K_eff
  double overhead_percent = 0;
  // useful / executed, the factor eq. 8 multiplies OFU by (1 when aligned).
  double useful_fraction = 1;
};

// Eq. 2-4 for one GEMM. INVALID_ARGUMENT naming the field if a dimension or tile size is
// <= 0.
absl::StatusOr<TileQuantization> ComputeTileQuantization(const GemmShape& shape,
                                                         const TileConfig& tile);

// One GEMM of a workload, executed `count` times per step.
struct WeightedGemm {
  GemmShape shape;
  TileConfig tile;
  int64_t count = 1;
};

// Eq. 2-4 over a set of GEMMs, FLOPs summed (m_eff/n_eff/k_eff are 0 in the result).
// INVALID_ARGUMENT for an empty set, count <= 0, or an invalid GEMM (message names its index).
absl::StatusOr<TileQuantization> ComputeTileQuantization(const std::vector<WeightedGemm>& gemms);

// Eq. 8: OFU corrected for tile padding. INVALID_ARGUMENT for a non-finite or negative OFU.
absl::StatusOr<double> AdjustedOfu(double ofu_fraction, const TileQuantization& quantization);

// A parsed nvJet kernel name: nvjet[_smNN]_<types>_<TM>x<TN>_<TK>x<stages>_<CM>x<CN>[_...].
struct NvjetKernel {
  std::string arch;       // "sm90", or empty when the name has no architecture part
  std::string type_code;  // operand/accumulator type letters, e.g. "hsh", "tst"
  TileConfig tile;
  int64_t stages = 0;                 // software pipeline stages
  std::vector<std::string> suffixes;  // trailing parts such as "v", "bz", "coopB", "NNT"
};

// Parses an nvJet kernel name. INVALID_ARGUMENT naming the name and the part that does not
// match; a name is never guessed at.
absl::StatusOr<NvjetKernel> ParseNvjetKernelName(absl::string_view kernel_name);

}  // namespace goodput::core
