#include "services/alerting/job_detectors.h"

#include "services/alerting/job_evaluator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace goodput::alerting {

double SeparationConfidence(double factor, double min_factor) {
  if (!(factor > 1) || !(min_factor > 1)) return 0.5;
  return std::clamp(1.0 - 0.5 * (min_factor - 1.0) / (factor - 1.0), 0.5, 0.99);
}

JobEvaluation EvaluateJob(const JobInput& input, const DetectorOptions& options) {
  JobEvaluator evaluator(options, input.earlier_jobs);
  evaluator.SetServing(input.serving);
  for (const PrecisionSwitchObs& s : input.precision_switches) evaluator.AddPrecisionSwitch(s);
  if (input.divergence) evaluator.SetDivergence(*input.divergence);
  JobEvaluation out;
  for (const JobWindow& w : input.windows) {
    evaluator.AddWindow(w);
    for (TransientSlowdown& t : evaluator.TakeTransients()) out.transients.push_back(t);
  }
  out.findings = evaluator.current();
  out.ended = evaluator.TakeEnded();
  out.steady = evaluator.steady();
  out.precision_annotations.assign(evaluator.precision_annotations().begin(),
                                   evaluator.precision_annotations().end());
  return out;
}

TokenRate::TokenRate(std::vector<TokenIncrease> increases) {
  // An increase over a longer gap (the engine was not scraped, or restarted) says how many
  // tokens were served over the gap but not when: those windows have no reading from it.
  for (const TokenIncrease& inc : increases) {
    const int64_t span = inc.to_ms - inc.from_ms;
    if (span > 0 && span <= kMaxSpreadMs && std::isfinite(inc.tokens) && inc.tokens >= 0) {
      increases_.push_back(inc);
    }
  }
  std::stable_sort(increases_.begin(), increases_.end(),
                   [](const TokenIncrease& a, const TokenIncrease& b) { return a.to_ms < b.to_ms; });
}

std::optional<double> TokenRate::For(int64_t start_ms, int64_t end_ms) {
  if (end_ms <= start_ms) return std::nullopt;
  // Ordered by their end: one that ended by this window's start reaches no later window,
  // and one that ends kMaxSpreadMs or more after this window's end began after it.
  while (first_ < increases_.size() && increases_[first_].to_ms <= start_ms) ++first_;
  bool seen = false;
  double tokens = 0;
  for (size_t i = first_; i < increases_.size() && increases_[i].to_ms < end_ms + kMaxSpreadMs;
       ++i) {
    const TokenIncrease& inc = increases_[i];
    const int64_t from = std::max(inc.from_ms, start_ms);
    const int64_t to = std::min(inc.to_ms, end_ms);
    if (to <= from) continue;
    seen = true;
    tokens += inc.tokens * static_cast<double>(to - from) /
              static_cast<double>(inc.to_ms - inc.from_ms);
  }
  if (!seen) return std::nullopt;
  return tokens * 1000.0 / static_cast<double>(end_ms - start_ms);
}

Activity ClassifyActivity(const JobWindow& w, const DetectorOptions& options) {
  const ActivityObs& a = w.activity;
  if ((w.flags & options.untrusted_ofu_flags) != 0 || w.gpus_reporting == 0) {
    return Activity::kUnknown;
  }
  // No kernel resident on any GPU: nothing runs (GR engine is the "GPU utilization" jobstats
  // and nvidia-smi show). Without the GR engine an empty GPU and a spinning one look alike.
  if (a.gr_engine_max.has_value() && *a.gr_engine_max <= options.idle_gr_engine_active) {
    return Activity::kIdle;
  }
  if (!a.tensor_max.has_value()) return Activity::kUnknown;
  if (*a.tensor_max > options.stopped_tensor_active) return Activity::kComputing;
  // No tensor work anywhere. The SMs tell a stopped job from one computing on CUDA cores.
  if (!a.sm_max.has_value()) return Activity::kUnknown;
  if (*a.sm_max <= options.stopped_sm_active) return Activity::kHung;
  if (a.gr_engine_mean.has_value() && *a.gr_engine_mean >= options.spinning_gr_engine_active &&
      *a.sm_max < options.spinning_sm_active) {
    return Activity::kHung;
  }
  return Activity::kComputing;
}

std::optional<Finding> TelemetryStopped(int64_t last_window_end_s, int64_t now_s,
                                        const DetectorOptions& options) {
  if (now_s - last_window_end_s <= options.telemetry_stopped_after_s) return std::nullopt;
  Finding f;
  f.kind = Kind::kTelemetryStopped;
  f.detector = "telemetry_sweep/last_window_age";
  f.onset_s = last_window_end_s;
  f.detected_s = now_s;
  f.last_sample_s = last_window_end_s;
  // Longer silence makes a lost exporter or a hung job more certain than a slow pipeline.
  f.confidence =
      std::clamp(1.0 - 0.5 * static_cast<double>(options.telemetry_stopped_after_s) /
                           static_cast<double>(std::max<int64_t>(1, now_s - last_window_end_s)),
                 0.5, 0.99);
  return f;
}

}  // namespace goodput::alerting
