#include "services/platform/gpu_catalog_config.h"

#include "gtest/gtest.h"

namespace goodput::platform {
namespace {

absl::StatusOr<core::GpuCatalog> Load(const std::string& yaml) {
  absl::StatusOr<ConfigTree> tree = ConfigTree::LoadString(yaml, {});
  if (!tree.ok()) return tree.status();
  return LoadGpuCatalog(*tree);
}

TEST(GpuCatalogConfig, WithoutOverridesIsTheBuiltInCatalog) {
  absl::StatusOr<core::GpuCatalog> catalog = Load("grpc:\n  port: 1\n");
  ASSERT_TRUE(catalog.ok()) << catalog.status();
  absl::StatusOr<const core::GpuSpec*> h100 = catalog->Find("NVIDIA H100 80GB HBM3");
  ASSERT_TRUE(h100.ok());
  EXPECT_DOUBLE_EQ((*h100)->tensor_max_clock_mhz, 1830);
}

TEST(GpuCatalogConfig, OverridesAKnownModelsClock) {
  absl::StatusOr<core::GpuCatalog> catalog = Load(
      "gpu_catalog:\n  overrides:\n    - name: \"NVIDIA H100 80GB HBM3\"\n"
      "      tensor_max_clock_mhz: 1755\n");
  ASSERT_TRUE(catalog.ok()) << catalog.status();
  absl::StatusOr<const core::GpuSpec*> h100 = catalog->Find("NVIDIA H100 80GB HBM3");
  ASSERT_TRUE(h100.ok());
  EXPECT_DOUBLE_EQ((*h100)->tensor_max_clock_mhz, 1755);
  EXPECT_EQ((*h100)->sm_count, 132);
}

TEST(GpuCatalogConfig, SetsABoardPowerTheBuiltInCatalogLacks) {
  absl::StatusOr<core::GpuCatalog> catalog = Load(
      "gpu_catalog:\n  overrides:\n    - name: \"NVIDIA H800\"\n"
      "      board_power_w: 700\n      source_note: \"site: vendor's H800 SXM5 sheet, 700 W\"\n");
  ASSERT_TRUE(catalog.ok()) << catalog.status();
  absl::StatusOr<const core::GpuSpec*> h800 = catalog->Find("NVIDIA H800");
  ASSERT_TRUE(h800.ok());
  ASSERT_TRUE((*h800)->board_power_w.has_value());
  EXPECT_DOUBLE_EQ(*(*h800)->board_power_w, 700);

  catalog =
      Load("gpu_catalog:\n  overrides:\n    - name: \"NVIDIA H800\"\n      board_power_w: 0\n");
  ASSERT_FALSE(catalog.ok());
  EXPECT_NE(catalog.status().message().find("gpu_catalog.overrides[0].board_power_w"),
            std::string::npos)
      << catalog.status();
}

TEST(GpuCatalogConfig, AddsANewModelCopiedFromABaseModel) {
  absl::StatusOr<core::GpuCatalog> catalog = Load(
      "gpu_catalog:\n  overrides:\n    - name: \"Site GH100 78SM\"\n"
      "      base_model: \"NVIDIA H100 80GB HBM3\"\n"
      "      model_names: [\"NVIDIA GH100 78SM 96GB\"]\n      sm_count: 78\n"
      "      dense_flops_per_cycle_per_sm: {bf16: 4096, fp8: 8192}\n");
  ASSERT_TRUE(catalog.ok()) << catalog.status();
  absl::StatusOr<const core::GpuSpec*> added = catalog->Find("NVIDIA GH100 78SM 96GB");
  ASSERT_TRUE(added.ok()) << added.status();
  EXPECT_EQ((*added)->sm_count, 78);
  EXPECT_DOUBLE_EQ((*added)->tensor_max_clock_mhz, 1830);
  absl::StatusOr<double> peak = (*added)->PeakTflops(core::Precision::kBf16);
  ASSERT_TRUE(peak.ok()) << peak.status();
  EXPECT_NEAR(*peak, 78 * 4096 * 1830e6 / 1e12, 1e-9);
}

TEST(GpuCatalogConfig, BadEntriesNameTheEntryAndField) {
  absl::StatusOr<core::GpuCatalog> catalog =
      Load("gpu_catalog:\n  overrides:\n    - name: X\n      sm_count: many\n");
  ASSERT_FALSE(catalog.ok());
  EXPECT_NE(catalog.status().message().find("gpu_catalog.overrides[0].sm_count"), std::string::npos)
      << catalog.status();
  EXPECT_NE(catalog.status().message().find("many"), std::string::npos);

  catalog = Load(
      "gpu_catalog:\n  overrides:\n    - name: \"NVIDIA H100 80GB HBM3\"\n"
      "      dense_flops_per_cycle_per_sm: {fp7: 1}\n");
  ASSERT_FALSE(catalog.ok());
  EXPECT_NE(catalog.status().message().find("dense_flops_per_cycle_per_sm.fp7"), std::string::npos)
      << catalog.status();

  catalog = Load("gpu_catalog:\n  overrides:\n    - name: X\n      clock: 3\n");
  ASSERT_FALSE(catalog.ok());
  EXPECT_NE(catalog.status().message().find("[0].clock: unknown field"), std::string::npos)
      << catalog.status();
}

}  // namespace
}  // namespace goodput::platform
