#include "services/core/mfu.h"

#include <cmath>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace goodput::core {
namespace {

absl::Status CheckNonNegative(absl::string_view field, double value) {
  if (!std::isfinite(value) || value < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, "=", value, " must be a finite value >= 0"));
  }
  return absl::OkStatus();
}

absl::Status CheckPositive(absl::string_view field, double value) {
  if (!std::isfinite(value) || value <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(field, "=", value, " must be > 0"));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> RequireGpuCount(const MfuReport& r, absl::string_view form) {
  if (!r.gpu_count.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(form, " needs gpu_count"));
  }
  if (*r.gpu_count <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("gpu_count=", *r.gpu_count, " must be > 0"));
  }
  return *r.gpu_count;
}

}  // namespace

absl::StatusOr<double> EffectivePeakTflops(const std::vector<std::pair<double, double>>& mix) {
  if (mix.empty()) return absl::InvalidArgumentError("precision_mix is empty");
  double share_sum = 0, time_sum = 0;
  for (size_t i = 0; i < mix.size(); ++i) {
    const auto& [share, peak] = mix[i];
    if (!std::isfinite(share) || share < 0 || share > 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("precision_mix[", i, "].flops_share=", share, " is outside [0, 1]"));
    }
    if (!std::isfinite(peak) || peak <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("precision_mix[", i, "] peak_tflops=", peak, " must be > 0"));
    }
    share_sum += share;
    time_sum += share / peak;
  }
  if (std::abs(share_sum - 1) > kPrecisionMixTolerance) {
    return absl::InvalidArgumentError(absl::StrCat("precision_mix flops_share values sum to ",
                                                   share_sum, ", not 1 (tolerance ",
                                                   kPrecisionMixTolerance, ")"));
  }
  return share_sum / time_sum;
}

absl::StatusOr<double> EffectivePeakTflops(const GpuSpec& spec,
                                           const std::vector<PrecisionShare>& mix) {
  if (mix.empty()) return absl::InvalidArgumentError("precision_mix is empty");
  std::vector<std::pair<double, double>> pairs;
  absl::flat_hash_set<Precision> seen;
  for (size_t i = 0; i < mix.size(); ++i) {
    const PrecisionShare& s = mix[i];
    if (!seen.insert(s.precision).second) {
      return absl::InvalidArgumentError(absl::StrCat("precision_mix[", i, "]: precision ",
                                                     PrecisionName(s.precision), " appears twice"));
    }
    if (!std::isfinite(s.flops_share) || s.flops_share < 0 || s.flops_share > 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("precision_mix[", i, "] (", PrecisionName(s.precision),
                       ").flops_share=", s.flops_share, " is outside [0, 1]"));
    }
    if (s.flops_share == 0) continue;
    absl::StatusOr<double> peak = spec.PeakTflops(s.precision);
    if (!peak.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("precision_mix[", i, "]: ", peak.status().message()));
    }
    pairs.emplace_back(s.flops_share, *peak);
  }
  if (pairs.empty()) {
    return absl::InvalidArgumentError("precision_mix has no precision with a non-zero share");
  }
  return EffectivePeakTflops(pairs);
}

absl::StatusOr<MfuResult> ComputeMfu(const GpuSpec& spec, const MfuReport& r) {
  MfuResult result;
  // The denominator, when one can be chosen.
  std::optional<double> peak;
  absl::Status peak_error = absl::OkStatus();
  if (!r.precision_mix.empty()) {
    absl::StatusOr<double> p = EffectivePeakTflops(spec, r.precision_mix);
    if (!p.ok()) return p.status();
    peak = *p;
    result.used_effective_peak = true;
  } else if (r.precision.has_value()) {
    absl::StatusOr<double> p = spec.PeakTflops(*r.precision);
    if (!p.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("precision: ", p.status().message()));
    }
    peak = *p;
  } else {
    peak_error = absl::InvalidArgumentError(
        "report has neither precision nor precision_mix, so no peak can be chosen");
  }
  result.peak_tflops_per_gpu = peak;

  std::optional<double> tflops_per_gpu;
  if (r.tflops_per_gpu.has_value()) {
    if (auto s = CheckNonNegative("tflops_per_gpu", *r.tflops_per_gpu); !s.ok()) return s;
    tflops_per_gpu = *r.tflops_per_gpu;
    result.form = MfuReportForm::kTflopsPerGpu;
  } else if (r.total_tflops.has_value()) {
    if (auto s = CheckNonNegative("total_tflops", *r.total_tflops); !s.ok()) return s;
    absl::StatusOr<int64_t> gpus = RequireGpuCount(r, "total_tflops");
    if (!gpus.ok()) return gpus.status();
    tflops_per_gpu = *r.total_tflops / static_cast<double>(*gpus);
    result.form = MfuReportForm::kTotalTflops;
  } else if (r.flops_per_step.has_value() || r.step_time_s.has_value()) {
    if (!r.flops_per_step.has_value()) {
      return absl::InvalidArgumentError("step_time_s given without flops_per_step");
    }
    if (!r.step_time_s.has_value()) {
      return absl::InvalidArgumentError("flops_per_step given without step_time_s");
    }
    if (auto s = CheckNonNegative("flops_per_step", *r.flops_per_step); !s.ok()) return s;
    if (auto s = CheckPositive("step_time_s", *r.step_time_s); !s.ok()) return s;
    absl::StatusOr<int64_t> gpus = RequireGpuCount(r, "flops_per_step");
    if (!gpus.ok()) return gpus.status();
    tflops_per_gpu = *r.flops_per_step / *r.step_time_s / static_cast<double>(*gpus) / 1e12;
    result.form = MfuReportForm::kFlopsPerStep;
  } else if (r.mfu_fraction.has_value()) {
    const double mfu = *r.mfu_fraction;
    if (!std::isfinite(mfu) || mfu < 0 || mfu > 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("mfu_fraction=", mfu, " is outside [0, 1]",
                       mfu > 1 && mfu <= 100 ? " (report a fraction: 54.27% is 0.5427)" : ""));
    }
    result.form = MfuReportForm::kMfuFraction;
    result.mfu_fraction = mfu;
    if (peak.has_value()) result.tflops_per_gpu = mfu * *peak;
    return result;
  } else {
    return absl::InvalidArgumentError(
        "report has none of mfu_fraction, tflops_per_gpu, total_tflops + gpu_count, "
        "flops_per_step + step_time_s");
  }
  if (!peak_error.ok()) return peak_error;
  result.tflops_per_gpu = tflops_per_gpu;
  result.mfu_fraction = *tflops_per_gpu / *peak;
  return result;
}

absl::StatusOr<double> MfuOfuRatio(double mfu_fraction, double ofu_fraction) {
  if (auto s = CheckNonNegative("mfu_fraction", mfu_fraction); !s.ok()) return s;
  if (auto s = CheckPositive("ofu_fraction", ofu_fraction); !s.ok()) return s;
  return mfu_fraction / ofu_fraction;
}

}  // namespace goodput::core
