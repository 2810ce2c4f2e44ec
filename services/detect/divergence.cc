#include "services/detect/divergence.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace goodput::detect {
namespace {

double NormalCdf(double z) { return 0.5 * std::erfc(-z / std::numbers::sqrt2); }

// Nominal factor by which each cause multiplies MFU relative to what the hardware ran. The
// observed MFU/OFU is the nominal factor divided by (1 + tile overhead), because padded tiles
// raise OFU on top of any miscount, so each range is widened downwards by tile_overhead_max.
struct CauseModel {
  Cause cause;
  double nominal_low;
  double nominal_high;
  bool tile_applies;
};

// Ranges come from the accounting error each cause makes, not from observed cases:
// - MoE latent projections: experts (65-90% of FLOPs) counted ~3x too large -> 1.9..3.5.
// - Layer types: Mamba/MoE/conv layers priced as attention + dense MLP -> 1.4..1.8.
// - Recompute: a step runs 4F (forward, recomputed forward, 2F backward) but 3F is counted ->
//   exactly 0.75 with full checkpointing, up to 0.8 with most layers checkpointed.
// - Factor-of-two errors are exact: 2.0 or 0.5.
// - Tile quantization alone: OFU up to 12% higher than MFU.
constexpr CauseModel kCauseModels[] = {
    {Cause::kLatentProjectionMoe, 1.9, 3.5, true},
    {Cause::kLayerTypesAsAttentionMlp, 1.4, 1.8, true},
    {Cause::kRecomputeNotCounted, 0.75, 0.80, true},
    {Cause::kDoubledFlopsOrHalfPeak, 2.0, 2.0, true},
    {Cause::kHalvedFlopsOrDoublePeak, 0.5, 0.5, true},
    {Cause::kTileQuantization, 1.0 / 1.12, 1.0, false},
};

// Density of a ratio that none of the known causes explains: flat over log ratios in
// [ln 1/20, ln 20], i.e. any plausible disagreement.
constexpr double kUnexplainedDensity = 1.0 / (2.0 * 2.9957);

absl::Status ValidateWindow(const PairedWindow& w, size_t index) {
  auto bad = [&](std::string_view field, double value) {
    return absl::InvalidArgumentError(absl::StrFormat("window %d [%d, %d): %s=%g is invalid", index,
                                                      w.start_s, w.end_s, field, value));
  };
  if (w.end_s <= w.start_s) {
    return absl::InvalidArgumentError(
        absl::StrFormat("window %d: end_s=%d is not after start_s=%d", index, w.end_s, w.start_s));
  }
  if (!(w.app_mfu >= 0 && w.app_mfu <= 1.5)) return bad("app_mfu", w.app_mfu);
  if (!(w.ofu >= 0 && w.ofu <= 1.5)) return bad("ofu", w.ofu);
  if (!(w.ofu_ci95_half >= 0) || !std::isfinite(w.ofu_ci95_half)) {
    return bad("ofu_ci95_half", w.ofu_ci95_half);
  }
  if (!(w.gpu_coverage >= 0 && w.gpu_coverage <= 1.0)) return bad("gpu_coverage", w.gpu_coverage);
  return absl::OkStatus();
}

}  // namespace

std::string_view VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kConsistent:
      return "consistent";
    case Verdict::kAppFlopsOvercount:
      return "app_flops_overcount";
    case Verdict::kAppFlopsUndercount:
      return "app_flops_undercount";
    case Verdict::kInsufficientEvidence:
      return "insufficient_evidence";
  }
  return "unknown";
}

std::string_view CauseName(Cause c) {
  switch (c) {
    case Cause::kLatentProjectionMoe:
      return "latent_projection_moe";
    case Cause::kLayerTypesAsAttentionMlp:
      return "layer_types_as_attention_mlp";
    case Cause::kRecomputeNotCounted:
      return "recompute_not_counted";
    case Cause::kDoubledFlopsOrHalfPeak:
      return "doubled_flops_or_half_peak";
    case Cause::kHalvedFlopsOrDoublePeak:
      return "halved_flops_or_double_peak";
    case Cause::kTileQuantization:
      return "tile_quantization";
    case Cause::kUnexplained:
      return "unexplained";
  }
  return "unknown";
}

std::vector<CauseFit> RankCauses(double ratio, double ratio_se_log,
                                 const DivergenceOptions& options) {
  std::vector<CauseFit> fits;
  if (!(ratio > 0) || !std::isfinite(ratio)) return fits;
  const double log_ratio = std::log(ratio);
  const double sigma =
      std::sqrt(ratio_se_log * ratio_se_log + options.model_slack_log * options.model_slack_log);
  // Each cause predicts a log ratio spread uniformly over its range, observed with Gaussian
  // error sigma. The likelihood is approximately the Gaussian of the distance to the range
  // over the range's width (+ the error's own width): a narrow cause that fits exactly beats a
  // broad one, but a ratio outside a narrow range by several sigma does not.
  double total = 0;
  for (const CauseModel& m : kCauseModels) {
    double low = m.nominal_low;
    if (m.tile_applies) low /= (1.0 + options.tile_overhead_max);
    const double high = m.nominal_high;
    const double log_low = std::log(low);
    const double log_high = std::log(high);
    double distance = 0;
    if (log_ratio < log_low) distance = log_low - log_ratio;
    if (log_ratio > log_high) distance = log_ratio - log_high;
    const double z = distance / sigma;
    const double likelihood =
        std::exp(-0.5 * z * z) / ((log_high - log_low) + std::sqrt(2 * std::numbers::pi) * sigma);
    fits.push_back({m.cause, low, high, likelihood});
    total += likelihood;
  }
  fits.push_back({Cause::kUnexplained, 0, 0, kUnexplainedDensity});
  total += kUnexplainedDensity;
  for (CauseFit& f : fits) f.fit /= total;
  std::stable_sort(fits.begin(), fits.end(),
                   [](const CauseFit& a, const CauseFit& b) { return a.fit > b.fit; });
  return fits;
}

absl::StatusOr<DivergenceResult> ClassifyDivergence(std::span<const PairedWindow> windows,
                                                    const DivergenceOptions& options) {
  for (size_t i = 0; i < windows.size(); ++i) {
    if (absl::Status s = ValidateWindow(windows[i], i); !s.ok()) return s;
  }
  DivergenceResult result;
  double weighted_mfu = 0, weighted_ofu = 0, weight = 0;
  double ci_rel_sum = 0;
  std::vector<double> log_ratios;
  int low_coverage = 0, idle = 0;
  for (const PairedWindow& w : windows) {
    if (w.gpu_coverage < options.min_gpu_coverage) {
      ++low_coverage;
      continue;
    }
    if (w.ofu < options.min_ofu || w.app_mfu <= 0) {
      ++idle;
      continue;
    }
    const double d = static_cast<double>(w.end_s - w.start_s);
    weighted_mfu += d * w.app_mfu;
    weighted_ofu += d * w.ofu;
    weight += d;
    log_ratios.push_back(std::log(w.app_mfu / w.ofu));
    ci_rel_sum += w.ofu_ci95_half / 1.96 / w.ofu;
    result.duration_s += w.end_s - w.start_s;
  }
  const int n = static_cast<int>(log_ratios.size());
  result.windows_used = n;
  if (weight > 0) {
    result.mean_app_mfu = weighted_mfu / weight;
    result.mean_ofu = weighted_ofu / weight;
  }
  if (n < options.min_windows || result.duration_s < options.min_duration_s) {
    result.verdict = Verdict::kInsufficientEvidence;
    result.reason = absl::StrFormat(
        "%d usable windows over %d s (need %d windows and %d s); %d windows had GPU coverage "
        "below %.0f%%, %d had OFU below %.1f%% or no MFU",
        n, result.duration_s, options.min_windows, options.min_duration_s, low_coverage,
        options.min_gpu_coverage * 100, idle, options.min_ofu * 100);
    return result;
  }

  result.ratio = result.mean_app_mfu / result.mean_ofu;
  result.correction_factor = 1.0 / result.ratio;
  // Standard error of the log ratio from the spread of per-window ratios. Adjacent windows are
  // correlated (the same phase of training), so count half as many independent windows.
  double mean_log = 0;
  for (double l : log_ratios) mean_log += l;
  mean_log /= n;
  double var = 0;
  for (double l : log_ratios) var += (l - mean_log) * (l - mean_log);
  var = n > 1 ? var / (n - 1) : 0;
  const double n_eff = std::max(1.0, n / 2.0);
  const double ci_rel = ci_rel_sum / n;  // OFU's own sampling error, relative
  const double se_log = std::sqrt(var / n_eff + ci_rel * ci_rel / n_eff);
  const double log_ratio = std::log(result.ratio);
  result.ratio_ci95_low = std::exp(log_ratio - 1.96 * se_log);
  result.ratio_ci95_high = std::exp(log_ratio + 1.96 * se_log);
  const double sigma =
      std::sqrt(se_log * se_log + options.model_slack_log * options.model_slack_log);

  const double log_low = std::log(options.consistent_low);
  const double log_high = std::log(options.consistent_high);
  if (log_ratio > log_high) {
    result.verdict = Verdict::kAppFlopsOvercount;
    result.confidence = NormalCdf((log_ratio - log_high) / sigma);
  } else if (log_ratio < log_low) {
    result.verdict = Verdict::kAppFlopsUndercount;
    result.confidence = NormalCdf((log_low - log_ratio) / sigma);
  } else {
    result.verdict = Verdict::kConsistent;
    result.confidence =
        NormalCdf((log_high - log_ratio) / sigma) - NormalCdf((log_low - log_ratio) / sigma);
  }
  result.causes = RankCauses(result.ratio, se_log, options);

  const std::string_view top = result.causes.empty() ? "" : CauseName(result.causes[0].cause);
  if (result.verdict != Verdict::kConsistent && result.confidence < options.min_confidence) {
    result.reason = absl::StrFormat(
        "MFU/OFU = %.3f (95%% CI %.3f-%.3f) is near the edge of the consistent band "
        "[%.2f, %.2f]; confidence %.2f is below %.2f",
        result.ratio, result.ratio_ci95_low, result.ratio_ci95_high, options.consistent_low,
        options.consistent_high, result.confidence, options.min_confidence);
    result.verdict = Verdict::kInsufficientEvidence;
    return result;
  }
  switch (result.verdict) {
    case Verdict::kAppFlopsOvercount:
      result.reason = absl::StrFormat(
          "app MFU %.1f%% is %.2fx OFU %.1f%%: the framework counts FLOPs the GPUs did not run; "
          "most likely %s; multiply its FLOPs by %.3f",
          result.mean_app_mfu * 100, result.ratio, result.mean_ofu * 100, top,
          result.correction_factor);
      break;
    case Verdict::kAppFlopsUndercount:
      result.reason = absl::StrFormat(
          "OFU %.1f%% is %.2fx app MFU %.1f%%, more than tile quantization explains; most likely "
          "%s; multiply the framework's FLOPs by %.3f",
          result.mean_ofu * 100, 1.0 / result.ratio, result.mean_app_mfu * 100, top,
          result.correction_factor);
      break;
    default:
      result.reason = absl::StrFormat(
          "app MFU %.1f%% and OFU %.1f%% agree (MFU/OFU = %.3f, within [%.2f, %.2f])",
          result.mean_app_mfu * 100, result.mean_ofu * 100, result.ratio, options.consistent_low,
          options.consistent_high);
  }
  return result;
}

absl::StatusOr<JobDivergence> ClassifyJobDivergence(std::span<const PairedWindow> windows,
                                                    int64_t interval_s,
                                                    const DivergenceOptions& options) {
  if (interval_s <= 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("interval_s=%d must be positive", interval_s));
  }
  JobDivergence out;
  absl::StatusOr<DivergenceResult> job = ClassifyDivergence(windows, options);
  if (!job.ok()) return job.status();
  out.job = *std::move(job);
  if (windows.empty()) return out;
  std::vector<PairedWindow> sorted(windows.begin(), windows.end());
  std::sort(sorted.begin(), sorted.end(),
            [](const PairedWindow& a, const PairedWindow& b) { return a.start_s < b.start_s; });
  // Intervals are aligned to the first window; a short interval needs fewer windows.
  DivergenceOptions interval_options = options;
  interval_options.min_duration_s = std::min(options.min_duration_s, interval_s / 2);
  const int64_t origin = sorted.front().start_s;
  size_t i = 0;
  while (i < sorted.size()) {
    const int64_t k = (sorted[i].start_s - origin) / interval_s;
    const int64_t start = origin + k * interval_s;
    size_t j = i;
    while (j < sorted.size() && sorted[j].start_s < start + interval_s) ++j;
    absl::StatusOr<DivergenceResult> r = ClassifyDivergence(
        std::span<const PairedWindow>(sorted.data() + i, j - i), interval_options);
    if (!r.ok()) return r.status();
    out.intervals.push_back({start, start + interval_s, *std::move(r)});
    i = j;
  }
  return out;
}

}  // namespace goodput::detect
