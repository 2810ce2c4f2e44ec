#include "services/core/mfu.h"

#include <cmath>
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace goodput::core {
namespace {

using ::testing::HasSubstr;

const GpuSpec& Model(absl::string_view name) { return **GpuCatalog::BuiltIn().Find(name); }
const GpuSpec& H100() { return Model("NVIDIA H100 80GB HBM3"); }

double Round(double v, int decimals) {
  const double scale = std::pow(10.0, decimals);
  return std::round(v * scale) / scale;
}

TEST(EffectivePeak, HalfBf16HalfFp8OnH100Is1319_2) {
  // Domain eq. 12 with the table's printed peaks.
  EXPECT_NEAR(*EffectivePeakTflops({{0.5, 989.4}, {0.5, 1978.8}}), 1319.2, 1e-9);
  // With the catalog's exact peaks: 989.42976 x 4/3 = 1319.23968, printed 1319.2.
  absl::StatusOr<double> p_eff =
      EffectivePeakTflops(H100(), {{Precision::kBf16, 0.5}, {Precision::kFp8, 0.5}});
  ASSERT_TRUE(p_eff.ok()) << p_eff.status();
  EXPECT_NEAR(*p_eff, 989.42976 * 4 / 3, 1e-9);
  EXPECT_DOUBLE_EQ(RoundTflopsForDisplay(*p_eff), 1319.2);
}

TEST(EffectivePeak, IsTheFlopsWeightedHarmonicMean) {
  EXPECT_NEAR(*EffectivePeakTflops({{1.0, 989.4}}), 989.4, 1e-12);
  // 90% FP8, 10% BF16: 1 / (0.9/1978.8 + 0.1/989.4).
  EXPECT_NEAR(*EffectivePeakTflops({{0.9, 1978.8}, {0.1, 989.4}}),
              1.0 / (0.9 / 1978.8 + 0.1 / 989.4), 1e-9);
  // Within tolerance of 1 is accepted (and normalized).
  EXPECT_TRUE(EffectivePeakTflops({{0.5004, 989.4}, {0.5, 1978.8}}).ok());
}

TEST(EffectivePeak, RefusesSharesNotSummingToOne) {
  absl::StatusOr<double> p =
      EffectivePeakTflops(H100(), {{Precision::kBf16, 0.5}, {Precision::kFp8, 0.3}});
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(p.status().message(), HasSubstr("sum to 0.8"));
}

TEST(EffectivePeak, RefusesBadShares) {
  EXPECT_THAT(EffectivePeakTflops(H100(), {{Precision::kBf16, -0.5}, {Precision::kFp8, 1.5}})
                  .status()
                  .message(),
              HasSubstr("flops_share=-0.5"));
  EXPECT_THAT(EffectivePeakTflops(H100(), {{Precision::kBf16, 0.5}, {Precision::kBf16, 0.5}})
                  .status()
                  .message(),
              HasSubstr("bf16 appears twice"));
  EXPECT_THAT(EffectivePeakTflops(H100(), {{Precision::kBf16, std::nan("")}}).status().message(),
              HasSubstr("flops_share=nan"));
  EXPECT_THAT(EffectivePeakTflops(H100(), {}).status().message(), HasSubstr("empty"));
  EXPECT_THAT(EffectivePeakTflops({{1.0, 0.0}}).status().message(), HasSubstr("peak_tflops=0"));
}

TEST(EffectivePeak, RefusesAPrecisionTheGpuLacks) {
  absl::StatusOr<double> p = EffectivePeakTflops(Model("NVIDIA A100-SXM4-80GB"),
                                                 {{Precision::kBf16, 0.5}, {Precision::kFp8, 0.5}});
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(), HasSubstr("fp8"));
  // A zero share of a missing precision is harmless.
  EXPECT_TRUE(EffectivePeakTflops(Model("NVIDIA A100-SXM4-80GB"),
                                  {{Precision::kBf16, 1.0}, {Precision::kFp8, 0.0}})
                  .ok());
}

TEST(ComputeMfu, FromTflopsPerGpu) {
  MfuReport r;
  r.tflops_per_gpu = 400;
  r.precision = Precision::kBf16;
  absl::StatusOr<MfuResult> m = ComputeMfu(H100(), r);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->form, MfuReportForm::kTflopsPerGpu);
  EXPECT_DOUBLE_EQ(m->mfu_fraction, 400 / 989.42976);
  EXPECT_DOUBLE_EQ(*m->peak_tflops_per_gpu, 989.42976);
  EXPECT_FALSE(m->used_effective_peak);
}

TEST(ComputeMfu, FromTotalTflopsAndGpuCount) {
  // Eq. 10 form: train_tflop_per_s_total / (gpu_count x peak).
  MfuReport r;
  r.total_tflops = 288 * 0.5427 * 989.42976;
  r.gpu_count = 288;
  r.precision = Precision::kBf16;
  absl::StatusOr<MfuResult> m = ComputeMfu(H100(), r);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->form, MfuReportForm::kTotalTflops);
  EXPECT_NEAR(m->mfu_fraction, 0.5427, 1e-12);
  EXPECT_NEAR(*m->tflops_per_gpu, 0.5427 * 989.42976, 1e-9);
}

TEST(ComputeMfu, FromFlopsPerStepAndStepTime) {
  MfuReport r;
  r.flops_per_step = 8 * 494.71488e12 * 2.0;  // 8 GPUs at half the BF16 peak for 2 s
  r.step_time_s = 2.0;
  r.gpu_count = 8;
  r.precision = Precision::kBf16;
  absl::StatusOr<MfuResult> m = ComputeMfu(H100(), r);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->form, MfuReportForm::kFlopsPerStep);
  EXPECT_NEAR(m->mfu_fraction, 0.5, 1e-12);
}

TEST(ComputeMfu, DirectMfuIsTakenAsIs) {
  MfuReport r;
  r.mfu_fraction = 0.2451;
  absl::StatusOr<MfuResult> m = ComputeMfu(H100(), r);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->form, MfuReportForm::kMfuFraction);
  EXPECT_DOUBLE_EQ(m->mfu_fraction, 0.2451);
  EXPECT_FALSE(m->peak_tflops_per_gpu.has_value());
  EXPECT_FALSE(m->tflops_per_gpu.has_value());
}

TEST(ComputeMfu, ThroughputWinsOverTheFrameworksOwnMfu) {
  MfuReport r;
  r.mfu_fraction = 0.9;
  r.tflops_per_gpu = 494.71488;
  r.precision = Precision::kBf16;
  EXPECT_NEAR(ComputeMfu(H100(), r)->mfu_fraction, 0.5, 1e-12);
}

TEST(ComputeMfu, UsesEffectivePeakForAPrecisionMix) {
  MfuReport r;
  r.tflops_per_gpu = 989.42976 * 4 / 3 * 0.4;
  r.precision = Precision::kBf16;  // ignored: the mix wins
  r.precision_mix = {{Precision::kBf16, 0.5}, {Precision::kFp8, 0.5}};
  absl::StatusOr<MfuResult> m = ComputeMfu(H100(), r);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->used_effective_peak);
  EXPECT_NEAR(m->mfu_fraction, 0.4, 1e-12);
  EXPECT_DOUBLE_EQ(RoundTflopsForDisplay(*m->peak_tflops_per_gpu), 1319.2);
}

TEST(ComputeMfu, Gb200AndA100UseTheirOwnPeaks) {
  MfuReport r;
  r.tflops_per_gpu = 850;
  r.precision = Precision::kBf16;
  EXPECT_NEAR(ComputeMfu(Model("NVIDIA GB200"), r)->mfu_fraction, 850 / 2500.001792, 1e-12);
  r.tflops_per_gpu = 156;
  EXPECT_NEAR(ComputeMfu(Model("NVIDIA A100-SXM4-80GB"), r)->mfu_fraction, 156 / 311.86944, 1e-12);
}

TEST(ComputeMfu, RefusesUninterpretableReportsSayingWhy) {
  auto message = [](const MfuReport& r) {
    absl::StatusOr<MfuResult> m = ComputeMfu(H100(), r);
    EXPECT_FALSE(m.ok());
    EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(m.status().message());
  };
  MfuReport empty;
  EXPECT_THAT(message(empty), HasSubstr("none of mfu_fraction"));

  MfuReport negative;
  negative.tflops_per_gpu = -5;
  negative.precision = Precision::kBf16;
  EXPECT_THAT(message(negative), HasSubstr("tflops_per_gpu=-5"));

  MfuReport nan;
  nan.tflops_per_gpu = std::numeric_limits<double>::quiet_NaN();
  nan.precision = Precision::kBf16;
  EXPECT_THAT(message(nan), HasSubstr("tflops_per_gpu=nan"));

  MfuReport no_precision;
  no_precision.tflops_per_gpu = 400;
  EXPECT_THAT(message(no_precision), HasSubstr("neither precision nor precision_mix"));

  MfuReport no_gpus;
  no_gpus.total_tflops = 1000;
  no_gpus.precision = Precision::kBf16;
  EXPECT_THAT(message(no_gpus), HasSubstr("total_tflops needs gpu_count"));
  no_gpus.gpu_count = 0;
  EXPECT_THAT(message(no_gpus), HasSubstr("gpu_count=0"));

  MfuReport zero_step;
  zero_step.flops_per_step = 1e15;
  zero_step.step_time_s = 0;
  zero_step.gpu_count = 8;
  zero_step.precision = Precision::kBf16;
  EXPECT_THAT(message(zero_step), HasSubstr("step_time_s=0"));
  zero_step.step_time_s.reset();
  EXPECT_THAT(message(zero_step), HasSubstr("without step_time_s"));

  MfuReport percent;
  percent.mfu_fraction = 54.27;
  EXPECT_THAT(message(percent), HasSubstr("report a fraction"));

  MfuReport bad_mix;
  bad_mix.tflops_per_gpu = 400;
  bad_mix.precision_mix = {{Precision::kBf16, 0.7}, {Precision::kFp8, 0.7}};
  EXPECT_THAT(message(bad_mix), HasSubstr("sum to 1.4"));

  MfuReport fp8_on_a100;
  fp8_on_a100.tflops_per_gpu = 100;
  fp8_on_a100.precision = Precision::kFp8;
  absl::StatusOr<MfuResult> m = ComputeMfu(Model("NVIDIA A100-SXM4-80GB"), fp8_on_a100);
  EXPECT_THAT(m.status().message(), HasSubstr("fp8"));
}

TEST(MfuOfuRatio, DocumentedMiscountCases) {
  // 288-GPU MoE with latent projections counted at full hidden size.
  EXPECT_DOUBLE_EQ(Round(*MfuOfuRatio(0.5427, 0.2558), 2), 2.12);
  // 8B hybrid with every layer counted as attention + dense MLP.
  EXPECT_DOUBLE_EQ(Round(*MfuOfuRatio(0.2451, 0.1556), 3), 1.575);
  // World model with full activation checkpointing, recompute not counted (3F vs 4F).
  EXPECT_DOUBLE_EQ(Round(*MfuOfuRatio(0.26, 0.34), 3), 0.765);
  EXPECT_NEAR(0.26 * 4 / 3, 0.3467, 1e-4);  // after the fix: MFU 33-35% vs OFU 34%
}

TEST(MfuOfuRatio, RefusesZeroOrNanOfu) {
  EXPECT_THAT(MfuOfuRatio(0.3, 0).status().message(), HasSubstr("ofu_fraction=0"));
  EXPECT_THAT(MfuOfuRatio(std::nan(""), 0.3).status().message(), HasSubstr("mfu_fraction=nan"));
  EXPECT_DOUBLE_EQ(*MfuOfuRatio(0, 0.3), 0);
}

}  // namespace
}  // namespace goodput::core
