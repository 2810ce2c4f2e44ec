#include "services/core/tile_quantization.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace goodput::core {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(TileQuantization, AlignedGemmHasNoOverhead) {
  absl::StatusOr<TileQuantization> q =
      ComputeTileQuantization({8192, 8192, 8192}, {256, 128, 64, 2, 1});
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->m_eff, 8192);
  EXPECT_EQ(q->n_eff, 8192);
  EXPECT_EQ(q->k_eff, 8192);
  EXPECT_DOUBLE_EQ(q->overhead_percent, 0);
  EXPECT_DOUBLE_EQ(q->useful_fraction, 1);
}

TEST(TileQuantization, PadsToTilesThenToClusters) {
  // M = 1100 with 256-row tiles: 5 tiles; a 2x1 cluster rounds to 6 -> M_eff 1536 (eq. 3).
  absl::StatusOr<TileQuantization> q =
      ComputeTileQuantization({1100, 4096, 4096}, {256, 128, 64, 2, 1});
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->m_eff, 1536);
  EXPECT_EQ(q->n_eff, 4096);
  EXPECT_EQ(q->k_eff, 4096);
  // Without the cluster: 5 tiles -> 1280.
  EXPECT_EQ(ComputeTileQuantization({1100, 4096, 4096}, {256, 128, 64, 1, 1})->m_eff, 1280);
  // K pads to the K tile only: 100 -> 128.
  EXPECT_EQ(ComputeTileQuantization({256, 128, 100}, {256, 128, 64, 1, 1})->k_eff, 128);
}

TEST(TileQuantization, OverheadIsEq2AndAdjustedOfuIsEq8) {
  // M = N = K = 1000 on 128x128x64 tiles: each dim pads to 1024.
  absl::StatusOr<TileQuantization> q =
      ComputeTileQuantization({1000, 1000, 1000}, {128, 128, 64, 1, 1});
  ASSERT_TRUE(q.ok());
  EXPECT_DOUBLE_EQ(q->useful_flops, 2e9);
  EXPECT_DOUBLE_EQ(q->executed_flops, 2.0 * 1024 * 1024 * 1024);
  EXPECT_NEAR(q->overhead_percent, (1.073741824 - 1) * 100, 1e-9);
  EXPECT_NEAR(*AdjustedOfu(0.5, *q), 0.5 / 1.073741824, 1e-12);
}

TEST(TileQuantization, SmallNCanExceedFiftyPercent) {
  // N < 512 padded to a 256-wide tile: N = 160 -> 256 is 60% overhead.
  absl::StatusOr<TileQuantization> q =
      ComputeTileQuantization({8192, 160, 8192}, {128, 256, 64, 1, 1});
  ASSERT_TRUE(q.ok());
  EXPECT_NEAR(q->overhead_percent, 60.0, 1e-9);
}

TEST(TileQuantization, AggregatesWeightedGemms) {
  std::vector<WeightedGemm> gemms = {
      {{1024, 1024, 1024}, {128, 128, 64, 1, 1}, 3},  // aligned
      {{1000, 1000, 1000}, {128, 128, 64, 1, 1}, 1},
  };
  absl::StatusOr<TileQuantization> q = ComputeTileQuantization(gemms);
  ASSERT_TRUE(q.ok());
  const double useful = 3 * 2.0 * 1024 * 1024 * 1024 + 2e9;
  const double executed = 4 * 2.0 * 1024 * 1024 * 1024;
  EXPECT_DOUBLE_EQ(q->useful_flops, useful);
  EXPECT_DOUBLE_EQ(q->executed_flops, executed);
  EXPECT_NEAR(q->overhead_percent, (executed - useful) / useful * 100, 1e-9);
}

TEST(TileQuantization, RefusesNonPositiveDimensions) {
  EXPECT_THAT(ComputeTileQuantization({0, 1, 1}, {128, 128, 64, 1, 1}).status().message(),
              HasSubstr("m=0"));
  EXPECT_THAT(ComputeTileQuantization({1, 1, 1}, {128, 128, 64, 0, 1}).status().message(),
              HasSubstr("cluster_m=0"));
  EXPECT_THAT(ComputeTileQuantization({1, 1, 1}, {128, -1, 64, 1, 1}).status().message(),
              HasSubstr("tile_n=-1"));
  EXPECT_THAT(ComputeTileQuantization(std::vector<WeightedGemm>{}).status().message(),
              HasSubstr("empty"));
  EXPECT_THAT(ComputeTileQuantization({{{1, 1, 1}, {1, 1, 1, 1, 1}, 0}}).status().message(),
              HasSubstr("gemms[0].count=0"));
  EXPECT_THAT(AdjustedOfu(std::nan(""), TileQuantization{}).status().message(),
              HasSubstr("ofu_fraction=nan"));
}

TEST(NvjetKernelName, ParsesTileStagesAndCluster) {
  absl::StatusOr<NvjetKernel> k = ParseNvjetKernelName("nvjet_sm90_hsh_256x160_64x4_2x1");
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->arch, "sm90");
  EXPECT_EQ(k->type_code, "hsh");
  EXPECT_EQ(k->tile.tile_m, 256);
  EXPECT_EQ(k->tile.tile_n, 160);
  EXPECT_EQ(k->tile.tile_k, 64);
  EXPECT_EQ(k->stages, 4);
  EXPECT_EQ(k->tile.cluster_m, 2);
  EXPECT_EQ(k->tile.cluster_n, 1);
  EXPECT_TRUE(k->suffixes.empty());
}

TEST(NvjetKernelName, AcceptsNamesWithoutArchAndWithSuffixes) {
  absl::StatusOr<NvjetKernel> k = ParseNvjetKernelName("nvjet_tst_128x256_64x3_1x2_h_bz_TNT");
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->arch, "");
  EXPECT_EQ(k->type_code, "tst");
  EXPECT_EQ(k->tile.tile_m, 128);
  EXPECT_EQ(k->tile.tile_n, 256);
  EXPECT_EQ(k->stages, 3);
  EXPECT_EQ(k->tile.cluster_n, 2);
  EXPECT_THAT(k->suffixes, ElementsAre("h", "bz", "TNT"));
}

TEST(NvjetKernelName, ParsedTileFeedsTheOverheadModel) {
  absl::StatusOr<NvjetKernel> k = ParseNvjetKernelName("nvjet_sm90_hsh_256x160_64x4_2x1");
  ASSERT_TRUE(k.ok());
  // N = 4096 on 160-wide tiles: 26 tiles -> 4160 (1.5625% overhead).
  absl::StatusOr<TileQuantization> q = ComputeTileQuantization({8192, 4096, 8192}, k->tile);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->n_eff, 4160);
  EXPECT_NEAR(q->overhead_percent, 1.5625, 1e-9);
}

TEST(NvjetKernelName, UnparseableNamesAreErrorsNotGuesses) {
  for (absl::string_view name :
       {"", "sm90_xmma_gemm_f16f16_f16f32", "nvjet", "nvjet_sm90_hsh",
        "nvjet_sm90_hsh_256_64x4_2x1", "nvjet_sm90_hsh_256x160_64x4",
        "nvjet_sm90_hsh_256x160_64x4_2x", "nvjet_sm90_hsh_0x160_64x4_2x1",
        "nvjet_sm90_h5h_256x160_64x4_2x1", "nvjet_sm90_hsh_256x160x3_64x4_2x1"}) {
    absl::StatusOr<NvjetKernel> k = ParseNvjetKernelName(name);
    EXPECT_FALSE(k.ok()) << name;
    EXPECT_EQ(k.status().code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_THAT(k.status().message(), HasSubstr(std::string(name))) << name;
  }
}

}  // namespace
}  // namespace goodput::core
