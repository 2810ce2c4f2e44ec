#include "services/core/mig.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace goodput::core {
namespace {

using ::testing::HasSubstr;

absl::StatusOr<MigInstanceShape> Shape(absl::string_view model, absl::string_view profile) {
  absl::StatusOr<const GpuSpec*> spec = GpuCatalog::BuiltIn().Find(model);
  if (!spec.ok()) return spec.status();
  return FindMigProfile(**spec, profile);
}

const GpuSpec& BuiltIn(absl::string_view model) { return **GpuCatalog::BuiltIn().Find(model); }

TEST(Mig, InstanceSmCountsAreTheLgipListings) {
  struct Row {
    const char* model;  // dcgm-exporter modelName
    const char* profile;
    int sms;
  };
  const std::vector<Row> rows = {
      {"NVIDIA A100-SXM4-40GB", "1g.5gb", 14},
      {"NVIDIA A100-SXM4-40GB", "1g.10gb", 14},
      {"NVIDIA A100-SXM4-40GB", "2g.10gb", 28},
      {"NVIDIA A100-SXM4-40GB", "3g.20gb", 42},
      {"NVIDIA A100-SXM4-40GB", "4g.20gb", 56},
      {"NVIDIA A100-SXM4-40GB", "7g.40gb", 98},
      {"NVIDIA A100-PCIE-40GB", "7g.40gb", 98},
      {"NVIDIA A100-SXM4-80GB", "1g.10gb", 14},
      {"NVIDIA A100-SXM4-80GB", "1g.20gb", 14},
      {"NVIDIA A100-SXM4-80GB", "3g.40gb", 42},
      {"NVIDIA A100 80GB PCIe", "7g.80gb", 98},
      {"NVIDIA A30", "1g.6gb", 14},
      {"NVIDIA A30", "2g.12gb", 28},
      {"NVIDIA A30", "4g.24gb", 56},
      {"NVIDIA H100 80GB HBM3", "1g.10gb", 16},
      {"NVIDIA H100 80GB HBM3", "1g.20gb", 26},
      {"NVIDIA H100 80GB HBM3", "2g.20gb", 32},
      {"NVIDIA H100 80GB HBM3", "3g.40gb", 60},
      {"NVIDIA H100 80GB HBM3", "4g.40gb", 64},
      {"NVIDIA H100 80GB HBM3", "7g.80gb", 132},
      {"NVIDIA H100 NVL", "1g.12gb", 16},
      {"NVIDIA H100 NVL", "1g.24gb", 26},
      {"NVIDIA H100 NVL", "7g.94gb", 132},
      {"NVIDIA H200", "1g.18gb", 16},
      {"NVIDIA H200", "1g.35gb", 26},
      {"NVIDIA H200", "2g.35gb", 32},
      {"NVIDIA H200", "7g.141gb", 132},
      {"NVIDIA H200 NVL", "3g.71gb", 60},
      {"NVIDIA B200", "1g.23gb", 18},
  };
  for (const Row& row : rows) {
    absl::StatusOr<MigInstanceShape> shape = Shape(row.model, row.profile);
    ASSERT_TRUE(shape.ok()) << row.model << " " << row.profile << ": " << shape.status();
    EXPECT_EQ(shape->instance_sm_count, row.sms) << row.model << " " << row.profile;
  }
}

TEST(Mig, SameProfileNameDiffersByModel) {
  // 1g.10gb is the smallest A100 80GB profile (14 of 108 SMs) and the smallest H100 80GB one
  // (16 of 132): the model decides.
  absl::StatusOr<MigInstanceShape> a100 = Shape("NVIDIA A100-SXM4-80GB", "1g.10gb");
  absl::StatusOr<MigInstanceShape> h100 = Shape("NVIDIA H100 80GB HBM3", "1g.10gb");
  ASSERT_TRUE(a100.ok() && h100.ok());
  EXPECT_DOUBLE_EQ(a100->SmShare(), 14.0 / 108);
  EXPECT_DOUBLE_EQ(h100->SmShare(), 16.0 / 132);
  EXPECT_EQ(h100->gpu_sm_count, 132);
}

TEST(Mig, AcceptsTheSpellingsDcgmAndNvidiaSmiUse) {
  const GpuSpec& h100 = BuiltIn("NVIDIA H100 80GB HBM3");
  for (absl::string_view spelling :
       {"1g.10gb", "1g.10gb+me", "MIG 1g.10gb", " 1G.10GB ", "1g.10gb-me", "1g.10gb+gfx"}) {
    absl::StatusOr<MigInstanceShape> shape = FindMigProfile(h100, spelling);
    ASSERT_TRUE(shape.ok()) << spelling << ": " << shape.status();
    EXPECT_EQ(shape->profile, "1g.10gb");
    EXPECT_EQ(shape->instance_sm_count, 16);
  }
}

TEST(Mig, GpuLevelOfuWeighsTheInstanceBySmShare) {
  absl::StatusOr<MigInstanceShape> shape = Shape("NVIDIA H100 80GB HBM3", "3g.40gb");
  ASSERT_TRUE(shape.ok());
  // A 3g.40gb instance at 50% OFU is 60/132 of the GPU busy at 50%.
  EXPECT_DOUBLE_EQ(shape->GpuLevelOfu(0.5), 0.5 * 60 / 132);
  // Seven fully busy 1g.5gb instances on an A100 40GB reach 98/108 of the GPU, not 1: the SMs
  // MIG mode disables count as idle.
  absl::StatusOr<MigInstanceShape> small = Shape("NVIDIA A100-SXM4-40GB", "1g.5gb");
  ASSERT_TRUE(small.ok());
  EXPECT_NEAR(7 * small->GpuLevelOfu(1.0), 98.0 / 108, 1e-12);
}

TEST(Mig, EveryTableEntryFitsItsGpu) {
  int models_with_tables = 0;
  for (const GpuSpec& spec : GpuCatalog::BuiltIn().specs()) {
    std::vector<MigInstanceShape> shapes = MigProfilesFor(spec);
    if (shapes.empty()) continue;
    ++models_with_tables;
    int previous = 0;
    for (const MigInstanceShape& shape : shapes) {
      EXPECT_GT(shape.instance_sm_count, 0) << spec.name << " " << shape.profile;
      EXPECT_LE(shape.instance_sm_count, spec.sm_count) << spec.name << " " << shape.profile;
      EXPECT_GE(shape.instance_sm_count, previous) << spec.name << " " << shape.profile;
      previous = shape.instance_sm_count;
      absl::StatusOr<MigInstanceShape> found = FindMigProfile(spec, shape.profile);
      ASSERT_TRUE(found.ok()) << found.status();
      EXPECT_EQ(found->instance_sm_count, shape.instance_sm_count);
    }
  }
  // A100 x4, A30, H100 SXM, H100 NVL, H200, H200 NVL, B200.
  EXPECT_EQ(models_with_tables, 10);
}

TEST(Mig, UnknownProfileIsNotFoundNamingIt) {
  absl::StatusOr<MigInstanceShape> shape = Shape("NVIDIA H100 80GB HBM3", "1g.5gb");
  ASSERT_FALSE(shape.ok());
  EXPECT_EQ(shape.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(shape.status().message(), HasSubstr("\"1g.5gb\""));
  EXPECT_THAT(shape.status().message(), HasSubstr("H100 SXM"));
  EXPECT_THAT(shape.status().message(), HasSubstr("1g.10gb"));  // lists what is known

  // B200 profiles without a sourced SM count are not guessed.
  EXPECT_EQ(Shape("NVIDIA B200", "1g.45gb").status().code(), absl::StatusCode::kNotFound);
  // A model without MIG (or without a table) says so.
  absl::StatusOr<MigInstanceShape> l4 = Shape("NVIDIA L4", "1g.6gb");
  ASSERT_FALSE(l4.ok());
  EXPECT_EQ(l4.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(l4.status().message(), HasSubstr("L4 has no MIG profile table"));
  EXPECT_TRUE(MigProfilesFor(BuiltIn("NVIDIA L4")).empty());
}

TEST(Mig, AnOverriddenSmCountSmallerThanTheInstanceIsAPrecondition) {
  GpuSpec h100 = BuiltIn("NVIDIA H100 80GB HBM3");
  h100.sm_count = 100;
  EXPECT_EQ(FindMigProfile(h100, "7g.80gb").status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(FindMigProfile(h100, "1g.10gb")->gpu_sm_count, 100);
}

}  // namespace
}  // namespace goodput::core
