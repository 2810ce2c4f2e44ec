#include "services/core/gpu_catalog.h"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace goodput::core {
namespace {

using ::testing::HasSubstr;

const GpuSpec& Spec(absl::string_view model) {
  absl::StatusOr<const GpuSpec*> spec = GpuCatalog::BuiltIn().Find(model);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return **spec;
}

double Peak(absl::string_view model, Precision p) {
  absl::StatusOr<double> peak = Spec(model).PeakTflops(p);
  EXPECT_TRUE(peak.ok()) << peak.status();
  return peak.value_or(NAN);
}

TEST(GpuCatalog, H100Fp16PeakIsEq6) {
  // 132 x 4096 x 1830 MHz = 989.42976 TFLOP/s, printed 989.4.
  EXPECT_DOUBLE_EQ(Peak("NVIDIA H100 80GB HBM3", Precision::kFp16), 989.42976);
  EXPECT_DOUBLE_EQ(Peak("NVIDIA H100 80GB HBM3", Precision::kBf16), 989.42976);
  EXPECT_DOUBLE_EQ(RoundTflopsForDisplay(Peak("NVIDIA H100 80GB HBM3", Precision::kBf16)), 989.4);
}

TEST(GpuCatalog, H100OtherFormatsScaleFromFp16) {
  const double fp16 = Peak("H100 SXM", Precision::kFp16);
  EXPECT_DOUBLE_EQ(Peak("H100 SXM", Precision::kFp8), 2 * fp16);
  EXPECT_DOUBLE_EQ(Peak("H100 SXM", Precision::kTf32), fp16 / 2);
  EXPECT_FALSE(Spec("H100 SXM").Supports(Precision::kFp4));
  // FP64 tensor runs at the SM boost clock: 132 x 256 x 1980 MHz = 66.9 TFLOP/s.
  EXPECT_NEAR(Peak("H100 SXM", Precision::kFp64), 66.9, 0.05);
}

TEST(GpuCatalog, TensorClockIsNotTheSmBoostClock) {
  const GpuSpec& h100 = Spec("NVIDIA H100 80GB HBM3");
  EXPECT_EQ(h100.tensor_max_clock_mhz, 1830);
  EXPECT_EQ(h100.sm_boost_clock_mhz, 1980);  // what DCGM_FI_DEV_MAX_SM_CLOCK reports
  EXPECT_EQ(h100.sm_count, 132);
}

TEST(GpuCatalog, H200AndGh200ShareH100Compute) {
  EXPECT_DOUBLE_EQ(Peak("NVIDIA H200", Precision::kBf16), 989.42976);
  EXPECT_DOUBLE_EQ(Peak("NVIDIA GH200 480GB", Precision::kBf16), 989.42976);
  EXPECT_DOUBLE_EQ(Peak("NVIDIA H800", Precision::kBf16), 989.42976);
  EXPECT_EQ(Spec("NVIDIA H200").hbm_capacity_gib, 141);
}

TEST(GpuCatalog, Gb200PeakIsEq7) {
  // 148 x 8192 x 2062 MHz = 2500.001792 TFLOP/s exactly, printed 2500.0 (domain eq. 7). The
  // source's own "2,499.9" does not follow from its inputs; 0.1 rounding of the exact
  // product gives the domain figure.
  const double bf16 = Peak("NVIDIA GB200", Precision::kBf16);
  EXPECT_DOUBLE_EQ(bf16, 148.0 * 8192.0 * 2062e6 / 1e12);
  EXPECT_NEAR(bf16, 2500.001792, 1e-9);
  EXPECT_DOUBLE_EQ(RoundTflopsForDisplay(bf16), 2500.0);
  EXPECT_DOUBLE_EQ(Peak("NVIDIA GB200", Precision::kFp8), 2 * bf16);
  EXPECT_DOUBLE_EQ(Peak("NVIDIA GB200", Precision::kFp4), 4 * bf16);
  EXPECT_DOUBLE_EQ(Peak("NVIDIA GB200", Precision::kTf32), bf16 / 2);
  EXPECT_EQ(Spec("NVIDIA GB200").tensor_max_clock_mhz, Spec("NVIDIA GB200").sm_boost_clock_mhz);
}

TEST(GpuCatalog, H100PcieAndH800PciePeaks) {
  for (absl::string_view model : {"NVIDIA H100 PCIe", "NVIDIA H800 PCIe"}) {
    const double bf16 = Peak(model, Precision::kBf16);
    // 114 x 4096 x 1620 MHz = 756.44928. The domain table prints 756.5: its inputs round to
    // 756.4, so the table's figure is reproduced to within its last printed digit.
    EXPECT_DOUBLE_EQ(bf16, 756.44928);
    EXPECT_NEAR(bf16, 756.5, 0.051);
    EXPECT_DOUBLE_EQ(std::round(Peak(model, Precision::kFp8)), 1513);
    EXPECT_DOUBLE_EQ(std::round(Peak(model, Precision::kTf32)), 378);
  }
}

TEST(GpuCatalog, A100Peaks) {
  for (absl::string_view model : {"NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-40GB",
                                  "NVIDIA A100-PCIE-40GB", "NVIDIA A100 80GB PCIe"}) {
    const double bf16 = Peak(model, Precision::kBf16);
    EXPECT_DOUBLE_EQ(bf16, 311.86944);
    EXPECT_DOUBLE_EQ(RoundTflopsForDisplay(bf16), 311.9);
    EXPECT_DOUBLE_EQ(std::round(bf16), 312);
    EXPECT_DOUBLE_EQ(std::round(Peak(model, Precision::kTf32)), 156);
    EXPECT_DOUBLE_EQ(std::round(Peak(model, Precision::kInt8)), 624);
    EXPECT_FALSE(Spec(model).Supports(Precision::kFp8)) << model;
    EXPECT_NEAR(Peak(model, Precision::kFp64), 19.5, 0.05);
  }
}

TEST(GpuCatalog, DatasheetPeaksOfOtherModels) {
  EXPECT_NEAR(Peak("NVIDIA B200", Precision::kBf16), 2250, 1);
  EXPECT_NEAR(Peak("NVIDIA B200", Precision::kFp4), 9000, 4);
  EXPECT_NEAR(Peak("NVIDIA L40S", Precision::kFp8), 733, 0.5);
  EXPECT_NEAR(Peak("NVIDIA L4", Precision::kBf16), 121, 0.5);
  EXPECT_NEAR(Peak("NVIDIA L4", Precision::kFp8), 242.5, 0.5);
  EXPECT_NEAR(Peak("NVIDIA H100 NVL", Precision::kBf16), 835.5, 0.5);
  EXPECT_FALSE(Spec("NVIDIA L40S").Supports(Precision::kFp64));
}

// Datasheet dense peaks of the models added for current datacenter fleets. Within 0.1% unless
// the datasheet prints a figure its own SM count and boost clock do not reproduce (said so at
// each such line, with the exact product asserted instead).
double Relative(double got, double want) { return std::abs(got - want) / want; }

TEST(GpuCatalog, VoltaIsFp16OnlyAtTheSmBoostClock) {
  for (absl::string_view model : {"Tesla V100-SXM2-16GB", "Tesla V100-SXM2-32GB"}) {
    // 80 SMs x 1024 x 1530 MHz = 125.34; the datasheet prints 125 (8x its rounded FP32 15.7).
    EXPECT_DOUBLE_EQ(Peak(model, Precision::kFp16), 80 * 1024 * 1530e6 / 1e12);
    EXPECT_NEAR(Peak(model, Precision::kFp16), 125, 0.5);
    EXPECT_FALSE(Spec(model).Supports(Precision::kBf16)) << model;
    EXPECT_FALSE(Spec(model).Supports(Precision::kTf32)) << model;
    EXPECT_EQ(Spec(model).tensor_max_clock_mhz, Spec(model).sm_boost_clock_mhz);
  }
  for (absl::string_view model : {"Tesla V100-PCIE-16GB", "Tesla V100-PCIE-32GB"}) {
    // 80 x 1024 x 1380 MHz = 113.05; the datasheet's 112 is 8x its rounded-down FP32 14, 0.9%
    // below. f_max stays the 1380 MHz boost the GPU reports (see the catalog note).
    EXPECT_DOUBLE_EQ(Peak(model, Precision::kFp16), 80 * 1024 * 1380e6 / 1e12);
    EXPECT_LT(Relative(Peak(model, Precision::kFp16), 112), 0.01);
  }
  EXPECT_NEAR(Peak("Tesla V100S-PCIE-32GB", Precision::kFp16), 130.8, 0.05);
}

TEST(GpuCatalog, TuringT4Peaks) {
  // 40 x 1024 x 1590 MHz = 65.13, printed 65 (two significant figures).
  EXPECT_NEAR(Peak("Tesla T4", Precision::kFp16), 65, 0.5);
  EXPECT_NEAR(Peak("Tesla T4", Precision::kInt8), 130, 1);
  EXPECT_FALSE(Spec("Tesla T4").Supports(Precision::kBf16));
}

TEST(GpuCatalog, CurrentModelsReproduceTheirDatasheetDensePeaks) {
  struct Row {
    const char* model;  // the dcgm-exporter modelName
    Precision precision;
    double datasheet_tflops;  // dense
  };
  const std::vector<Row> rows = {
      {"NVIDIA A30", Precision::kBf16, 165},
      {"NVIDIA A10", Precision::kBf16, 125},
      {"NVIDIA A10", Precision::kTf32, 62.5},
      {"NVIDIA A10", Precision::kInt8, 250},
      {"NVIDIA A40", Precision::kBf16, 149.7},
      {"NVIDIA A40", Precision::kTf32, 74.8},
      {"NVIDIA L40", Precision::kBf16, 181.05},
      {"NVIDIA L40", Precision::kFp8, 362},
      {"NVIDIA L40", Precision::kTf32, 90.5},
      {"NVIDIA RTX 6000 Ada Generation", Precision::kBf16, 364.2},
      {"NVIDIA RTX 6000 Ada Generation", Precision::kFp8, 728.5},
      {"NVIDIA H20", Precision::kBf16, 148},
      {"NVIDIA H20", Precision::kFp8, 296},
      {"NVIDIA H20", Precision::kTf32, 74},
      // Half the datasheet's sparse 1,671 / 3,341 TFLOP/s, like the H100 NVL.
      {"NVIDIA H200 NVL", Precision::kBf16, 835.5},
      {"NVIDIA H200 NVL", Precision::kFp8, 1671},
      {"NVIDIA B300 SXM6 AC", Precision::kBf16, 2250},
      {"NVIDIA B300 SXM6 AC", Precision::kFp8, 4500},
      {"NVIDIA GB300", Precision::kBf16, 2500},
      {"NVIDIA GB300", Precision::kFp8, 5000},
      {"NVIDIA GB300", Precision::kFp4, 15000},
      // 4,000 AI TOPS is FP4 with sparsity: 2,000 dense; FP8 and BF16 halve from there.
      {"NVIDIA RTX PRO 6000 Blackwell Server Edition", Precision::kFp4, 2000},
      {"NVIDIA RTX PRO 6000 Blackwell Server Edition", Precision::kFp8, 1000},
      {"NVIDIA RTX PRO 6000 Blackwell Server Edition", Precision::kBf16, 500},
  };
  for (const Row& row : rows) {
    EXPECT_LT(Relative(Peak(row.model, row.precision), row.datasheet_tflops), 0.001)
        << row.model << " " << PrecisionName(row.precision) << ": "
        << Peak(row.model, row.precision) << " vs " << row.datasheet_tflops;
  }
}

TEST(GpuCatalog, CurrentModelsHaveOnlyTheTensorPathsTheyShipWith) {
  EXPECT_NEAR(Peak("NVIDIA A30", Precision::kFp64), 10.3, 0.05);
  EXPECT_FALSE(Spec("NVIDIA A30").Supports(Precision::kFp8));
  // GA102 runs half of GA100's per-SM tensor rate and has no FP64 tensor path.
  EXPECT_EQ(*Spec("NVIDIA A10").FlopsPerCyclePerSm(Precision::kBf16),
            *Spec("NVIDIA A30").FlopsPerCyclePerSm(Precision::kBf16) / 2);
  EXPECT_FALSE(Spec("NVIDIA A40").Supports(Precision::kFp64));
  EXPECT_FALSE(Spec("NVIDIA H20").Supports(Precision::kFp64));
  EXPECT_EQ(Spec("NVIDIA H200 NVL").tensor_max_clock_mhz,
            Spec("NVIDIA H100 NVL").tensor_max_clock_mhz);
  // NVFP4 is 6x BF16 on Blackwell Ultra (4x on Blackwell); INT8 and FP64 were cut.
  for (absl::string_view model : {"NVIDIA B300 SXM6 AC", "NVIDIA GB300"}) {
    EXPECT_DOUBLE_EQ(Peak(model, Precision::kFp4), 6 * Peak(model, Precision::kBf16));
    EXPECT_FALSE(Spec(model).Supports(Precision::kInt8)) << model;
    EXPECT_FALSE(Spec(model).Supports(Precision::kFp64)) << model;
    EXPECT_LT(Spec(model).tensor_max_clock_mhz, Spec(model).sm_boost_clock_mhz) << model;
  }
  EXPECT_EQ(Spec("NVIDIA RTX PRO 6000 Blackwell Server Edition").sm_count, 188);
}

TEST(GpuCatalog, EveryBuiltInEntryIsCompleteAndCited) {
  const GpuCatalog& catalog = GpuCatalog::BuiltIn();
  EXPECT_GE(catalog.specs().size(), 32u);
  for (const GpuSpec& spec : catalog.specs()) {
    EXPECT_GT(spec.sm_count, 0) << spec.name;
    EXPECT_GT(spec.tensor_max_clock_mhz, 0) << spec.name;
    EXPECT_GE(spec.sm_boost_clock_mhz, spec.tensor_max_clock_mhz) << spec.name;
    EXPECT_GT(spec.hbm_capacity_gib, 0) << spec.name;
    EXPECT_GT(spec.hbm_bandwidth_gb_per_s, 0) << spec.name;
    EXPECT_FALSE(spec.source_note.empty()) << spec.name;
    // Every tensor-core generation has FP16 (Volta and Turing have no BF16).
    EXPECT_TRUE(spec.Supports(Precision::kFp16)) << spec.name;
    for (const std::string& alias : spec.model_names) {
      absl::StatusOr<const GpuSpec*> found = catalog.Find(alias);
      ASSERT_TRUE(found.ok()) << alias;
      EXPECT_EQ((*found)->name, spec.name) << alias;
    }
  }
}

TEST(GpuCatalog, BoardPowerIsTheDatasheetMaximumAndCitedWhereKnown) {
  // Datasheet maxima (the top of a configurable range): the profiling-counter-stuck check
  // compares a GPU's power with these.
  const std::vector<std::pair<std::string, double>> known = {
      {"NVIDIA H100 80GB HBM3", 700},
      {"NVIDIA H100 PCIe", 350},
      {"NVIDIA H100 NVL", 400},
      {"NVIDIA H200", 700},
      {"NVIDIA H200 NVL", 600},
      {"NVIDIA A100-SXM4-40GB", 400},
      {"NVIDIA A100-SXM4-80GB", 400},
      {"NVIDIA A100-PCIE-40GB", 250},
      {"NVIDIA A100 80GB PCIe", 300},
      {"NVIDIA B200", 1000},
      {"NVIDIA L40S", 350},
      {"NVIDIA L40", 300},
      {"NVIDIA L4", 72},
      {"Tesla T4", 70},
      {"Tesla V100-SXM2-16GB", 300},
      {"Tesla V100-SXM2-32GB", 300},
      {"Tesla V100-PCIE-16GB", 250},
      {"Tesla V100-PCIE-32GB", 250},
      {"Tesla V100S-PCIE-32GB", 250},
      {"NVIDIA A30", 165},
      {"NVIDIA A10", 150},
      {"NVIDIA A40", 300},
      {"NVIDIA RTX 6000 Ada Generation", 300},
      {"NVIDIA RTX PRO 6000 Blackwell Server Edition", 600}};
  for (const auto& [model, watts] : known) {
    const GpuSpec& spec = Spec(model);
    ASSERT_TRUE(spec.board_power_w.has_value()) << model;
    EXPECT_EQ(*spec.board_power_w, watts) << model;
  }
  // Where no datasheet gives the GPU's own figure (a module power that includes the CPU, a
  // rack-level datasheet, press reports only) it stays unset, and the stuck check is skipped.
  for (const char* model :
       {"NVIDIA H800", "NVIDIA H800 PCIe", "NVIDIA GH200 480GB", "NVIDIA GH200 144G HBM3e",
        "NVIDIA GB200", "NVIDIA H20", "NVIDIA B300 SXM6 AC", "NVIDIA GB300"}) {
    EXPECT_FALSE(Spec(model).board_power_w.has_value()) << model;
  }
  // Every entry says where its board power comes from, or why it has none.
  for (const GpuSpec& spec : GpuCatalog::BuiltIn().specs()) {
    EXPECT_THAT(spec.source_note, HasSubstr("board power")) << spec.name;
    if (spec.board_power_w.has_value()) {
      EXPECT_THAT(spec.source_note,
                  HasSubstr(absl::StrCat("board power ", *spec.board_power_w, " W")))
          << spec.name;
    }
  }
}

TEST(GpuCatalog, FindsEveryDcgmExporterModelName) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"NVIDIA H100 80GB HBM3", "H100 SXM"},
      {"NVIDIA A100-SXM4-80GB", "A100 SXM 80GB"},
      {"NVIDIA GH200 480GB", "GH200"},
      {"NVIDIA H100 PCIe", "H100 PCIe"},
      {"NVIDIA H200", "H200"},
      {"NVIDIA B200", "B200"},
      {"NVIDIA GB200", "GB200"},
      {"NVIDIA L40S", "L40S"},
      {"NVIDIA L4", "L4"},
      {"NVIDIA H100 NVL", "H100 NVL"},
      {"NVIDIA H800", "H800 SXM"},
      {"NVIDIA A100-SXM4-40GB", "A100 SXM 40GB"},
      {"NVIDIA A100-PCIE-40GB", "A100 PCIe 40GB"},
      {"NVIDIA A100 80GB PCIe", "A100 PCIe 80GB"},
      {"Tesla V100-SXM2-16GB", "V100 SXM2 16GB"},
      {"Tesla V100-SXM2-32GB", "V100 SXM2 32GB"},
      {"Tesla V100-PCIE-16GB", "V100 PCIe 16GB"},
      {"Tesla V100-PCIE-32GB", "V100 PCIe 32GB"},
      {"Tesla V100S-PCIE-32GB", "V100S PCIe"},
      {"Tesla T4", "T4"},
      {"NVIDIA A30", "A30"},
      {"NVIDIA A10", "A10"},
      {"NVIDIA A40", "A40"},
      {"NVIDIA L40", "L40"},
      {"NVIDIA RTX 6000 Ada Generation", "RTX 6000 Ada"},
      {"NVIDIA H20", "H20"},
      {"NVIDIA H200 NVL", "H200 NVL"},
      {"NVIDIA B300 SXM6 AC", "B300"},
      {"NVIDIA GB300", "GB300"},
      {"NVIDIA RTX PRO 6000 Blackwell Server Edition", "RTX PRO 6000 Blackwell Server"},
  };
  for (const auto& [model, name] : cases) {
    absl::StatusOr<const GpuSpec*> spec = GpuCatalog::BuiltIn().Find(model);
    ASSERT_TRUE(spec.ok()) << model << ": " << spec.status();
    EXPECT_EQ((*spec)->name, name) << model;
  }
}

TEST(GpuCatalog, LookupIgnoresCaseSpacesDashesAndVendorPrefix) {
  for (absl::string_view model :
       {"nvidia h100 80gb hbm3", "H100 80GB HBM3", "NVIDIA-H100-80GB-HBM3",
        "  NVIDIA  H100_80GB HBM3", "h100-sxm"}) {
    absl::StatusOr<const GpuSpec*> spec = GpuCatalog::BuiltIn().Find(model);
    ASSERT_TRUE(spec.ok()) << model;
    EXPECT_EQ((*spec)->name, "H100 SXM");
  }
  EXPECT_EQ(NormalizeModelName("NVIDIA A100-SXM4-80GB"), "a100sxm480gb");
}

TEST(GpuCatalog, UnknownModelIsNotFoundNamingIt) {
  absl::StatusOr<const GpuSpec*> spec = GpuCatalog::BuiltIn().Find("NVIDIA Quantum Abacus 9000");
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(spec.status().message(), HasSubstr("NVIDIA Quantum Abacus 9000"));
  EXPECT_EQ(GpuCatalog::BuiltIn().Find("").status().code(), absl::StatusCode::kNotFound);
  // A bare family name is ambiguous (SXM, PCIe or NVL) and is not guessed.
  EXPECT_EQ(GpuCatalog::BuiltIn().Find("H100").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(GpuCatalog().Find("NVIDIA H100 80GB HBM3").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(GpuCatalog, MissingPrecisionIsNotFoundNamingModelAndPrecision) {
  absl::StatusOr<double> peak = Spec("NVIDIA A100-SXM4-80GB").PeakTflops(Precision::kFp8);
  ASSERT_FALSE(peak.ok());
  EXPECT_EQ(peak.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(peak.status().message(), HasSubstr("A100 SXM 80GB"));
  EXPECT_THAT(peak.status().message(), HasSubstr("fp8"));
}

TEST(GpuCatalog, ParsesPrecisionNames) {
  EXPECT_EQ(*ParsePrecision("BF16"), Precision::kBf16);
  EXPECT_EQ(*ParsePrecision("bfloat16"), Precision::kBf16);
  EXPECT_EQ(*ParsePrecision("nvfp4"), Precision::kFp4);
  EXPECT_EQ(*ParsePrecision("e4m3"), Precision::kFp8);
  EXPECT_EQ(*ParsePrecision("tf32"), Precision::kTf32);
  for (Precision p : kAllPrecisions) EXPECT_EQ(*ParsePrecision(PrecisionName(p)), p);
  absl::StatusOr<Precision> bad = ParsePrecision("fp12");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("fp12"));
}

TEST(GpuCatalog, OverrideChangesAnExistingModel) {
  GpuCatalog catalog = GpuCatalog::BuiltIn();
  GpuSpecOverride o;
  o.name = "NVIDIA H100 80GB HBM3";
  o.tensor_max_clock_mhz = 1755;
  o.board_power_w = 500;
  o.model_names = {"NVIDIA H100 80GB HBM3 (capped)"};
  ASSERT_TRUE(catalog.ApplyOverrides({o}).ok());
  const GpuSpec* spec = *catalog.Find("nvidia h100 80gb hbm3 (capped)");
  EXPECT_EQ(spec->name, "H100 SXM");
  EXPECT_EQ(spec->tensor_max_clock_mhz, 1755);
  EXPECT_EQ(spec->board_power_w, 500);
  EXPECT_EQ(spec->sm_count, 132);  // untouched fields keep their value
  EXPECT_EQ(catalog.specs().size(), GpuCatalog::BuiltIn().specs().size());
  // The built-in catalog is not changed.
  EXPECT_EQ((*GpuCatalog::BuiltIn().Find("H100 SXM"))->tensor_max_clock_mhz, 1830);
}

TEST(GpuCatalog, OverrideAddsANewModelFromABase) {
  GpuCatalog catalog = GpuCatalog::BuiltIn();
  GpuSpecOverride o;
  o.name = "Site GH100 78SM";
  o.base_model = "H100 SXM";
  o.model_names = {"NVIDIA GH100 78SM 96GB"};
  o.sm_count = 78;
  o.dense_flops_per_cycle_per_sm = {{Precision::kFp64, 0}};  // removes FP64
  o.source_note = "site datasheet";
  ASSERT_TRUE(catalog.ApplyOverrides({o}).ok());
  const GpuSpec* added = *catalog.Find("NVIDIA GH100 78SM 96GB");
  EXPECT_EQ(added->sm_count, 78);
  EXPECT_EQ(added->tensor_max_clock_mhz, 1830);
  EXPECT_FALSE(added->Supports(Precision::kFp64));
  EXPECT_DOUBLE_EQ(*added->PeakTflops(Precision::kBf16), 78 * 4096 * 1830e6 / 1e12);
  // The base keeps its aliases.
  EXPECT_EQ((*catalog.Find("NVIDIA H100 80GB HBM3"))->name, "H100 SXM");
}

TEST(GpuCatalog, OverrideAddsACompleteNewModel) {
  GpuCatalog catalog;
  GpuSpecOverride o;
  o.name = "Test GPU";
  o.model_names = {"NVIDIA Test GPU 64GB"};
  o.sm_count = 10;
  o.dense_flops_per_cycle_per_sm = {{Precision::kBf16, 1000}};
  o.tensor_max_clock_mhz = 1000;
  o.sm_boost_clock_mhz = 1200;
  ASSERT_TRUE(catalog.ApplyOverrides({o}).ok());
  EXPECT_DOUBLE_EQ(*(*catalog.Find("test-gpu"))->PeakTflops(Precision::kBf16), 10.0);
  EXPECT_EQ((*catalog.Find("test-gpu"))->source_note, "operator override");
}

TEST(GpuCatalog, InvalidOverrideIsRefusedAndLeavesCatalogUnchanged) {
  GpuCatalog catalog = GpuCatalog::BuiltIn();
  GpuSpecOverride good;
  good.name = "H100 SXM";
  good.sm_count = 100;
  GpuSpecOverride incomplete;
  incomplete.name = "Mystery GPU";
  incomplete.sm_count = 10;  // no clocks, no precision
  absl::Status s = catalog.ApplyOverrides({good, incomplete});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("Mystery GPU"));
  EXPECT_THAT(s.message(), HasSubstr("tensor_max_clock_mhz"));
  EXPECT_EQ((*catalog.Find("H100 SXM"))->sm_count, 132);

  GpuSpecOverride bad_sm;
  bad_sm.name = "H100 SXM";
  bad_sm.sm_count = 0;
  s = catalog.ApplyOverrides({bad_sm});
  EXPECT_THAT(s.message(), HasSubstr("sm_count=0"));

  GpuSpecOverride bad_power;
  bad_power.name = "H100 SXM";
  bad_power.board_power_w = -700;
  s = catalog.ApplyOverrides({bad_power});
  EXPECT_THAT(s.message(), HasSubstr("board_power_w=-700"));
  EXPECT_EQ((*catalog.Find("H100 SXM"))->board_power_w, 700);

  GpuSpecOverride bad_base;
  bad_base.name = "New";
  bad_base.base_model = "Voodoo 5";
  s = catalog.ApplyOverrides({bad_base});
  EXPECT_THAT(s.message(), HasSubstr("Voodoo 5"));
}

TEST(GpuCatalog, AliasOwnedByAnotherModelIsRefused) {
  GpuCatalog catalog = GpuCatalog::BuiltIn();
  GpuSpecOverride o;
  o.name = "A100 SXM 80GB";
  o.model_names = {"NVIDIA H100 80GB HBM3"};
  absl::Status s = catalog.ApplyOverrides({o});
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("H100 SXM"));
}

}  // namespace
}  // namespace goodput::core
