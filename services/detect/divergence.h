#pragma once
// Divergence verdicts: does the framework's MFU agree with the hardware's OFU?
//
// A framework derives MFU from an architecture FLOPs formula; OFU comes from the tensor-pipe
// counters. Over the same time the two agree up to tile-quantization overhead (OFU a few
// percent higher). A large, stable disagreement is a FLOPs-accounting bug in the framework,
// and its size says which bug: each known miscount multiplies the FLOPs by a characteristic
// factor. This header classifies paired MFU/OFU windows into a verdict, the implied correction
// factor and the known causes ranked by how well they explain the ratio.
//
//   std::vector<PairedWindow> w = ...;   // MFU and OFU over the same windows
//   absl::StatusOr<DivergenceResult> r = ClassifyDivergence(w);
//   if (r.ok() && r->verdict == Verdict::kAppFlopsOvercount) { ... r->causes[0] ... }

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace goodput::detect {

// Verdict on the relation of app MFU to OFU.
enum class Verdict {
  kConsistent,            // MFU/OFU within what tile quantization and noise explain
  kAppFlopsOvercount,     // MFU well above OFU: the framework counts FLOPs it does not run
  kAppFlopsUndercount,    // OFU above MFU beyond tile-quantization overhead
  kInsufficientEvidence,  // too few windows, low GPU coverage, too short, or ambiguous
};

// Known explanations for a MFU/OFU ratio.
enum class Cause {
  kLatentProjectionMoe,       // MoE experts counted at full hidden dim (latent projections), ~2-3
  kLayerTypesAsAttentionMlp,  // Mamba/MoE/... layers counted as attention + dense MLP, ~1.5-1.6
  kRecomputeNotCounted,       // activation recomputation not counted: 3F/4F = 0.75
  kDoubledFlopsOrHalfPeak,    // FMA as 2 extra FLOPs / BF16 peak for an FP8 run: x2
  kHalvedFlopsOrDoublePeak,   // sparse peak, FMA as one FLOP, FP8 peak for BF16: x0.5
  kTileQuantization,          // benign: padded GEMM tiles make OFU a few percent higher
  kUnexplained,               // no known cause fits
};

std::string_view VerdictName(Verdict v);  // "consistent", "app_flops_overcount", ...
std::string_view CauseName(Cause c);      // "latent_projection_moe", ...

// MFU and OFU over the same interval (fractions 0..1, not percent).
struct PairedWindow {
  int64_t start_s = 0;
  int64_t end_s = 0;
  double app_mfu = 0;         // framework MFU over [start_s, end_s)
  double ofu = 0;             // job OFU over the same interval
  double ofu_ci95_half = 0;   // half-width of OFU's 95% CI (fraction), 0 if unknown
  double gpu_coverage = 1.0;  // GPUs reporting / GPUs allocated, 0..1
};

struct DivergenceOptions {
  int min_windows = 5;            // fewer usable windows -> insufficient_evidence
  double min_gpu_coverage = 0.8;  // windows below are not used
  int64_t min_duration_s = 600;   // total usable time below -> insufficient_evidence
  double min_ofu = 0.005;         // windows with OFU below (idle, stalls) are not used
  // Band of MFU/OFU that is consistent: OFU up to ~12% above MFU from tile quantization
  // (non-aligned GEMMs), MFU a few percent above OFU from clock-sampling noise and
  // non-tensor FLOPs that OFU does not see.
  double consistent_low = 0.87;
  double consistent_high = 1.10;
  // Largest tile-quantization overhead expected on top of a miscount (fraction, 0.10 = 10%).
  double tile_overhead_max = 0.10;
  // Systematic uncertainty of a ratio (log units) beyond its statistical CI: differing
  // window alignment, framework reporting jitter.
  double model_slack_log = 0.02;
  double min_confidence = 0.8;  // below this an out-of-band ratio is insufficient_evidence
};

// One cause with how well it explains the observed ratio.
struct CauseFit {
  Cause cause = Cause::kUnexplained;
  double expected_ratio_low = 0;  // range of MFU/OFU this cause produces
  double expected_ratio_high = 0;
  double fit = 0;  // relative fit, the causes' fits sum to 1
};

struct DivergenceResult {
  Verdict verdict = Verdict::kInsufficientEvidence;
  double ratio = 0;  // MFU/OFU (time-weighted ratio of means)
  double ratio_ci95_low = 0;
  double ratio_ci95_high = 0;
  double correction_factor = 0;  // multiply the framework's FLOPs by this to match hardware
  double confidence = 0;         // 0..1: probability the verdict's side of the band is right
  double mean_app_mfu = 0;
  double mean_ofu = 0;
  int windows_used = 0;
  int64_t duration_s = 0;
  std::vector<CauseFit> causes;  // best first; empty when insufficient evidence
  std::string reason;            // one sentence a human reads
};

// Classifies the relation of MFU to OFU over `windows` (any order). INVALID_ARGUMENT for
// values outside [0, 1.5], non-positive durations or NaN, naming the window and field.
absl::StatusOr<DivergenceResult> ClassifyDivergence(std::span<const PairedWindow> windows,
                                                    const DivergenceOptions& options = {});

// Ranks the known causes for a ratio with a log-space standard error; fits sum to 1.
std::vector<CauseFit> RankCauses(double ratio, double ratio_se_log,
                                 const DivergenceOptions& options = {});

// Verdict per consecutive interval of `interval_s` (plus the whole job as `job`).
struct IntervalVerdict {
  int64_t start_s = 0;
  int64_t end_s = 0;
  DivergenceResult result;
};
struct JobDivergence {
  DivergenceResult job;
  std::vector<IntervalVerdict> intervals;
};
absl::StatusOr<JobDivergence> ClassifyJobDivergence(std::span<const PairedWindow> windows,
                                                    int64_t interval_s,
                                                    const DivergenceOptions& options = {});

}  // namespace goodput::detect
