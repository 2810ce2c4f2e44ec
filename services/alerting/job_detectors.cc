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
  for (const PrecisionSwitchObs& s : input.precision_switches) evaluator.AddPrecisionSwitch(s);
  if (input.divergence) evaluator.SetDivergence(*input.divergence);
  for (const JobWindow& w : input.windows) evaluator.AddWindow(w);
  JobEvaluation out;
  out.findings = evaluator.current();
  out.ended = evaluator.TakeEnded();
  out.steady = evaluator.steady();
  out.precision_annotations.assign(evaluator.precision_annotations().begin(),
                                   evaluator.precision_annotations().end());
  return out;
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
