#include "services/alerting/job_detectors.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace goodput::alerting {
namespace {

constexpr int64_t kEvidenceHalfSpanWindows = 30;  // evidence: up to 60 windows around onset

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  double m = v[mid];
  if (v.size() % 2 == 0) {
    m = (m + *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid))) / 2;
  }
  return m;
}

int64_t WindowLength(const std::vector<JobWindow>& windows) {
  if (windows.empty()) return 60;
  return std::max<int64_t>(1, windows.front().window.end_s - windows.front().window.start_s);
}

// Evidence range: up to 30 windows either side of `onset_s`, within the job.
std::pair<int64_t, int64_t> EvidenceAround(const std::vector<JobWindow>& windows, int64_t onset_s) {
  const int64_t len = WindowLength(windows);
  return {onset_s - kEvidenceHalfSpanWindows * len, onset_s + kEvidenceHalfSpanWindows * len};
}

std::pair<int64_t, int64_t> EvidenceLast(const std::vector<JobWindow>& windows) {
  if (windows.empty()) return {0, 0};
  const int64_t end = windows.back().window.end_s;
  return {end - 2 * kEvidenceHalfSpanWindows * WindowLength(windows), end};
}

std::vector<PrecisionSwitchObs> SwitchesNear(const std::vector<PrecisionSwitchObs>& switches,
                                             int64_t from_s, int64_t to_s) {
  std::vector<PrecisionSwitchObs> out;
  for (const PrecisionSwitchObs& s : switches) {
    if (s.time_s >= from_s && s.time_s < to_s) out.push_back(s);
  }
  return out;
}

// Whether a window's OFU is no evidence of how the job runs (profiling paused or stuck).
bool Untrusted(const JobWindow& w, const DetectorOptions& options) {
  return (w.flags & options.untrusted_ofu_flags) != 0;
}

// The windows as the detectors take them, with the effective peak of the precision mix
// that was in force at each window's start (the detectors only use its ratios). Untrusted
// windows carry no OFU: the detectors skip them as missing data.
std::vector<detect::OfuWindow> DetectorWindows(const JobInput& input,
                                               const DetectorOptions& options) {
  std::vector<detect::OfuWindow> out;
  out.reserve(input.windows.size());
  size_t next = 0;
  double peak =
      input.precision_switches.empty() ? 0 : input.precision_switches.front().peak_before_tflops;
  for (const JobWindow& jw : input.windows) {
    while (next < input.precision_switches.size() &&
           input.precision_switches[next].time_s <= jw.window.start_s) {
      peak = input.precision_switches[next].peak_after_tflops;
      ++next;
    }
    detect::OfuWindow w = jw.window;
    if (w.effective_peak_tflops <= 0) w.effective_peak_tflops = peak;
    if (Untrusted(jw, options)) w.ofu = std::numeric_limits<double>::quiet_NaN();
    out.push_back(w);
  }
  return out;
}

// The detector explains a drop by a precision switch only when the framework's MFU per
// window moved with OFU; the windows alerting gets carry no MFU. mfu's switch event is the
// evidence instead: a faster mix whose peak ratio covers the drop, within 10 windows of the
// onset, annotates the drop rather than alerting.
std::optional<std::string> SwitchExplains(const JobInput& input, const detect::RegressionEvent& e,
                                          const DetectorOptions& options) {
  const int64_t near_s = 10 * WindowLength(input.windows);
  for (const PrecisionSwitchObs& s : input.precision_switches) {
    if (std::abs(s.time_s - e.onset_s) > near_s || s.peak_before_tflops <= 0) continue;
    const double q = s.peak_after_tflops / s.peak_before_tflops;
    if (q > 1.01 && e.factor <= q * options.regression.precision_tolerance) {
      return absl::StrFormat(
          "precision mix changed (effective peak %.0f -> %.0f TFLOP/s, up to %.2fx) when OFU "
          "fell %.2fx: the same work on a faster mix, not a regression",
          s.peak_before_tflops, s.peak_after_tflops, q, e.factor);
    }
  }
  return std::nullopt;
}

void InJobRegression(const JobInput& input, const std::vector<detect::OfuWindow>& windows,
                     const DetectorOptions& options, JobEvaluation& out) {
  detect::InJobRegressionDetector detector(options.regression);
  detect::SteadyStateSummarizer steady(options.regression);
  std::optional<detect::RegressionEvent> open;
  for (const detect::OfuWindow& w : windows) {
    steady.Add(w);
    std::optional<detect::RegressionEvent> e = detector.Add(w);
    if (!e) continue;
    if (e->kind == detect::RegressionEvent::Kind::kRecovery) {
      open.reset();
    } else if (e->precision_switch) {
      out.precision_annotations.push_back(e->annotation);
    } else if (std::optional<std::string> note = SwitchExplains(input, *e, options)) {
      out.precision_annotations.push_back(*note);
    } else {
      open = e;
      // A baseline of regressed runs would hide the next regression.
      if (!e->stalled) steady.Freeze();
    }
  }
  out.steady = steady.Summary("");
  if (!open) return;
  Finding f;
  f.kind = Kind::kRegressionInJob;
  f.detector =
      open->stalled ? "in_job_change_point/stall" : "in_job_change_point/two_window_median";
  f.onset_s = open->onset_s;
  f.detected_s = open->detected_s;
  f.before_ofu = open->before_ofu;
  f.after_ofu = open->after_ofu;
  f.factor = open->factor;
  f.stalled = open->stalled;
  f.confidence =
      open->stalled ? 0.95 : SeparationConfidence(open->factor, options.regression.min_factor);
  if (!open->annotation.empty()) f.annotations.push_back(open->annotation);
  std::tie(f.evidence_from_s, f.evidence_to_s) = EvidenceAround(input.windows, f.onset_s);
  f.precision_switches = SwitchesNear(input.precision_switches, f.evidence_from_s, f.evidence_to_s);
  out.findings.push_back(std::move(f));
}

void WorkloadRegression(const JobInput& input, const std::vector<detect::OfuWindow>& windows,
                        const DetectorOptions& options, JobEvaluation& out) {
  if (input.earlier_jobs.empty()) return;
  detect::WorkloadBaseline baseline(options.baseline);
  // Oldest first: the baseline keeps the most recent max_jobs.
  for (auto it = input.earlier_jobs.rbegin(); it != input.earlier_jobs.rend(); ++it) {
    baseline.AddJob(it->steady);
  }
  if (!baseline.level()) return;
  detect::NewJobComparator comparator(baseline, options.regression);
  std::optional<detect::BaselineRegression> found;
  for (const detect::OfuWindow& w : windows) {
    std::optional<detect::BaselineRegression> r = comparator.Add(w);
    if (!r) continue;
    if (r->is_regression()) {
      found = r;
    } else {
      out.precision_annotations.push_back(r->annotation);
    }
  }
  if (!found) return;
  // Still below the baseline? The median of the latest steady computing windows decides.
  std::vector<double> recent;
  for (auto it = input.windows.rbegin();
       it != input.windows.rend() &&
       static_cast<int>(recent.size()) < options.baseline.first_steady_windows;
       ++it) {
    if (it->warmup || it->window.gpu_coverage < options.regression.min_coverage ||
        Untrusted(*it, options)) {
      continue;
    }
    if (it->window.ofu < options.baseline.dip_fraction * found->baseline_ofu) continue;
    recent.push_back(it->window.ofu);
  }
  const double level = recent.empty() ? found->job_ofu : Median(recent);
  if (level * options.workload_recovery_factor >= found->baseline_ofu) return;

  Finding f;
  f.kind = Kind::kRegressionVsWorkload;
  f.detector = "workload_baseline/first_steady_windows";
  f.onset_s = found->onset_s;
  f.detected_s = found->detected_s;
  f.after_ofu = level;
  f.baseline_ofu = found->baseline_ofu;
  f.factor = found->baseline_ofu / std::max(level, 1e-9);
  f.baseline_jobs = found->baseline_jobs;
  for (const EarlierJob& j : input.earlier_jobs) {
    if (f.baseline_job_ids.size() >= 20) break;
    f.baseline_job_ids.push_back(j.job_id);
  }
  f.baseline_last_end_s = input.earlier_jobs.front().last_end_s;
  // More earlier jobs make the baseline more trustworthy.
  const double jobs_weight = 1.0 - 1.0 / (1.0 + found->baseline_jobs);
  f.confidence = std::min(0.99, SeparationConfidence(*f.factor, options.baseline.min_factor) *
                                    (0.75 + 0.25 * jobs_weight));
  if (!found->annotation.empty()) f.annotations.push_back(found->annotation);
  f.evidence_from_s = f.onset_s;
  f.evidence_to_s = f.onset_s + 2 * kEvidenceHalfSpanWindows * WindowLength(input.windows);
  f.precision_switches =
      SwitchesNear(input.precision_switches, f.evidence_from_s - 3600, f.evidence_to_s);
  out.findings.push_back(std::move(f));
}

// Idle GPUs and stragglers: ofu names, per job-level window, the GPUs that were idle or
// slow; the other GPUs ran at about the job's median. That is what GpuFindingsTracker needs
// to decide which GPUs are *persistently* idle or slow.
void GpuFindings(const JobInput& input, const DetectorOptions& options, JobEvaluation& out) {
  std::map<std::string, int> index;  // named GPU -> slot
  std::vector<std::string> names;
  int allocated = 0;
  for (const JobWindow& w : input.windows) {
    allocated = std::max(allocated, w.gpus_allocated);
    if (Untrusted(w, options)) continue;
    auto name = [&](const std::string& g) {
      if (index.emplace(g, static_cast<int>(names.size())).second) names.push_back(g);
    };
    for (const StragglerObs& s : w.stragglers) name(s.gpu);
    for (const std::string& g : w.idle_gpus) name(g);
  }
  if (names.empty()) return;
  const int gpu_count = std::max(allocated, static_cast<int>(names.size()));
  detect::GpuFindingsTracker tracker(gpu_count, options.findings);
  std::vector<detect::GpuWindowValue> values(static_cast<size_t>(gpu_count));
  for (const JobWindow& w : input.windows) {
    // Which GPUs idle or lag is unknown while the profiling counters cannot be trusted.
    if (Untrusted(w, options)) continue;
    const double median = w.gpu_ofu_median > 0 ? w.gpu_ofu_median : w.window.ofu;
    std::vector<bool> named(names.size(), false);
    for (size_t i = 0; i < names.size(); ++i) values[i] = {median, 1.0, true};
    for (const StragglerObs& s : w.stragglers) {
      values[static_cast<size_t>(index[s.gpu])] = {s.ofu, 1.0, true};
    }
    for (const std::string& g : w.idle_gpus) values[static_cast<size_t>(index[g])] = {0, 0, true};
    // GPUs that did not report are among the unnamed ones.
    const int unnamed_reporting = std::max(0, w.gpus_reporting - static_cast<int>(names.size()));
    for (int i = static_cast<int>(names.size()); i < gpu_count; ++i) {
      values[static_cast<size_t>(i)] = {median, 1.0,
                                        i - static_cast<int>(names.size()) < unnamed_reporting};
    }
    tracker.AddWindow(w.window.start_s, w.window.end_s, values);
  }
  const int64_t window_len = WindowLength(input.windows);
  Finding idle;
  idle.kind = Kind::kIdleGpus;
  idle.detector = "gpu_findings/idle_share";
  for (const detect::GpuFinding& g : tracker.Findings()) {
    if (g.gpu_index >= static_cast<int>(names.size())) continue;  // only named GPUs can be
    const std::string& gpu = names[static_cast<size_t>(g.gpu_index)];
    if (g.kind == detect::GpuFinding::Kind::kIdle) {
      idle.gpus.push_back(gpu);
      idle.onset_s =
          idle.gpus.size() == 1 ? g.first_seen_s : std::min(idle.onset_s, g.first_seen_s);
      idle.idle_gpu_hours += static_cast<double>(g.windows * window_len) / 3600.0;
      idle.confidence = std::max(idle.confidence, g.score);
      if (!g.annotation.empty()) idle.annotations.push_back(g.annotation);
    } else {
      Finding f;
      f.kind = Kind::kStraggler;
      f.detail = gpu;
      f.detector = "gpu_findings/straggler_share";
      f.gpus = {gpu};
      f.onset_s = g.first_seen_s;
      f.straggler_score = g.score;
      f.factor = g.score > 0 ? std::optional<double>(1.0 / g.score) : std::nullopt;
      f.confidence = std::min(0.99, 0.5 + 0.5 * static_cast<double>(g.windows) /
                                              std::max<double>(1, tracker.windows()));
      if (!g.annotation.empty()) f.annotations.push_back(g.annotation);
      std::tie(f.evidence_from_s, f.evidence_to_s) = EvidenceLast(input.windows);
      out.findings.push_back(std::move(f));
    }
  }
  if (!idle.gpus.empty()) {
    std::tie(idle.evidence_from_s, idle.evidence_to_s) = EvidenceLast(input.windows);
    out.findings.push_back(std::move(idle));
  }
}

void DataQuality(const JobInput& input, const DetectorOptions& options, JobEvaluation& out) {
  const int n = std::min<int>(options.data_quality_windows, static_cast<int>(input.windows.size()));
  if (n < std::min(5, options.data_quality_windows)) return;
  Finding f;
  f.kind = Kind::kDataQuality;
  f.detector = "data_quality/flag_share";
  f.recent_windows = n;
  double stuck_power_sum = 0;
  int stuck_power_n = 0;
  for (size_t i = input.windows.size() - static_cast<size_t>(n); i < input.windows.size(); ++i) {
    const JobWindow& w = input.windows[i];
    const uint32_t bad = w.flags & options.data_quality_flags;
    if (bad == 0) continue;
    if (f.flagged_windows == 0) f.onset_s = w.window.start_s;
    ++f.flagged_windows;
    f.flags |= bad;
    // A window has no per-GPU detail here: the GPUs it got no OFU from are the paused ones.
    if (bad & (1u << 11)) {
      f.profiling_unavailable_gpus =
          std::max({f.profiling_unavailable_gpus, 1, w.gpus_allocated - w.gpus_reporting});
    }
    if ((bad & (1u << 12)) && w.power_w_mean > 0 && w.gpus_allocated > 0) {
      stuck_power_sum += w.power_w_mean / w.gpus_allocated;
      ++stuck_power_n;
    }
  }
  if (stuck_power_n > 0) f.stuck_power_w_per_gpu = stuck_power_sum / stuck_power_n;
  const double share = static_cast<double>(f.flagged_windows) / n;
  if (f.flagged_windows == 0 || share < options.data_quality_share) return;
  f.confidence = share;
  std::tie(f.evidence_from_s, f.evidence_to_s) = EvidenceLast(input.windows);
  out.findings.push_back(std::move(f));
}

void Divergence(const JobInput& input, const DetectorOptions& options, JobEvaluation& out) {
  if (!input.divergence) return;
  const DivergenceObs& d = *input.divergence;
  if (d.verdict != "app_flops_overcount" && d.verdict != "app_flops_undercount") return;
  if (d.confidence < options.divergence_min_confidence) return;
  Finding f;
  f.kind = Kind::kDivergence;
  f.detector = "mfu_ofu_divergence";
  f.confidence = d.confidence;
  f.onset_s = d.interval_start_s > 0 ? d.interval_start_s : d.time_s;
  f.detected_s = d.time_s;
  f.factor = d.ratio;
  f.divergence = d;
  f.evidence_from_s = d.interval_start_s;
  f.evidence_to_s = d.interval_end_s;
  out.findings.push_back(std::move(f));
}

}  // namespace

double SeparationConfidence(double factor, double min_factor) {
  if (!(factor > 1) || !(min_factor > 1)) return 0.5;
  return std::clamp(1.0 - 0.5 * (min_factor - 1.0) / (factor - 1.0), 0.5, 0.99);
}

JobEvaluation EvaluateJob(const JobInput& input, const DetectorOptions& options) {
  JobEvaluation out;
  const std::vector<detect::OfuWindow> windows = DetectorWindows(input, options);
  InJobRegression(input, windows, options, out);
  WorkloadRegression(input, windows, options, out);
  GpuFindings(input, options, out);
  DataQuality(input, options, out);
  Divergence(input, options, out);
  return out;
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
