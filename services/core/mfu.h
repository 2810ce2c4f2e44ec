// Application MFU: what a training framework says, computed against the right peak.
//
// Frameworks report utilization in several forms (domain §2). Any one of them becomes an MFU
// fraction against the dense peak of the reported precision, or against the effective peak
// P_eff of a reported precision mix (domain eq. 12):
//   - tflops_per_gpu:                 MFU = tflops_per_gpu / peak          (eq. 10)
//   - total_tflops + gpu_count:       MFU = total_tflops / gpu_count / peak
//   - flops_per_step + step_time_s + gpu_count (FLOPs of the whole job's step):
//                                     MFU = flops_per_step / step_time_s / gpu_count / 1e12 / peak
//   - mfu_fraction (the framework's own MFU, taken as is; its denominator is unknown)
// When several forms are present the throughput forms win in the order above, because the
// framework's own MFU may use a wrong peak. Reports that cannot be interpreted are
// INVALID_ARGUMENT saying which field and value is wrong.
//
//   MfuReport r;
//   r.tflops_per_gpu = 400;
//   r.precision = Precision::kBf16;
//   absl::StatusOr<MfuResult> m = ComputeMfu(h100_spec, r);  // m->mfu_fraction = 0.4043
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "services/core/gpu_catalog.h"

namespace goodput::core {

// Share of the executed model FLOPs at one precision (0..1).
struct PrecisionShare {
  Precision precision = Precision::kBf16;
  double flops_share = 0;
};

// A framework's report for one interval. Unset fields are absent.
struct MfuReport {
  std::optional<double> mfu_fraction;    // 0..1 (54.27% is 0.5427)
  std::optional<double> tflops_per_gpu;  // model TFLOP/s per GPU
  std::optional<double> total_tflops;    // model TFLOP/s of the whole job
  std::optional<int64_t> gpu_count;      // GPUs of the job (for total and per-step forms)
  std::optional<double> flops_per_step;  // model FLOPs of one step of the whole job
  std::optional<double> step_time_s;     // wall time of that step
  // The precision the model FLOPs run at; ignored when precision_mix is non-empty.
  std::optional<Precision> precision;
  // FLOPs shares per precision; must sum to 1 within kPrecisionMixTolerance.
  std::vector<PrecisionShare> precision_mix;
};

inline constexpr double kPrecisionMixTolerance = 1e-3;

enum class MfuReportForm { kMfuFraction, kTflopsPerGpu, kTotalTflops, kFlopsPerStep };

struct MfuResult {
  double mfu_fraction = 0;  // can exceed 1 when the framework overcounts FLOPs
  MfuReportForm form = MfuReportForm::kMfuFraction;
  // Model TFLOP/s per GPU implied by the report; nullopt for the kMfuFraction form.
  std::optional<double> tflops_per_gpu;
  // Dense peak (or P_eff) used as the denominator; nullopt for kMfuFraction without a
  // precision.
  std::optional<double> peak_tflops_per_gpu;
  bool used_effective_peak = false;  // true when P_eff of a precision mix was the peak
};

// Effective peak (eq. 12) from (FLOPs share, peak TFLOP/s) pairs: sum F / sum(F / P).
// INVALID_ARGUMENT if empty, a share is negative/non-finite, a peak <= 0, or the shares do
// not sum to 1 within kPrecisionMixTolerance.
absl::StatusOr<double> EffectivePeakTflops(const std::vector<std::pair<double, double>>& mix);

// Effective peak of a precision mix on `spec`. Also INVALID_ARGUMENT naming the precision if
// it appears twice or the model has no such precision (with a non-zero share).
absl::StatusOr<double> EffectivePeakTflops(const GpuSpec& spec,
                                           const std::vector<PrecisionShare>& mix);

// App MFU of `report` on `spec` (see the header comment for the forms and precedence).
absl::StatusOr<MfuResult> ComputeMfu(const GpuSpec& spec, const MfuReport& report);

// MFU / OFU over the same interval, the ratio the divergence verdicts classify
// (2.12: latent/MoE overcount; 1.575: layers counted as attention+MLP; 0.765: recompute not
// counted). INVALID_ARGUMENT if either is non-finite or negative, or ofu_fraction == 0.
absl::StatusOr<double> MfuOfuRatio(double mfu_fraction, double ofu_fraction);

}  // namespace goodput::core
