#include "services/alerting/job_evaluator.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "services/detect/robust_stats.h"
#include "services/detect/state_codec.h"

namespace goodput::alerting {
namespace {

using nlohmann::json;

constexpr int64_t kEvidenceHalfSpanWindows = 30;  // evidence: up to 60 windows around onset
constexpr size_t kMaxPrecisionNotes = 8;
// Transient slowdowns not yet taken by the engine (it takes them after every evaluation).
constexpr size_t kMaxPendingTransients = 64;
constexpr size_t kMaxBaselineJobIds = 20;
constexpr int kCheckpointVersion = 1;
// What a restored checkpoint may say: times within +-10^12 s, windows up to a week long, up
// to 2^20 GPUs (a checkpoint holds a few counters per GPU: CheckpointLimits bounds it anyway).
constexpr int64_t kMaxTimeS = 1'000'000'000'000;
constexpr int64_t kMaxWindowS = 7 * 86400;
constexpr int kMaxGpus = 1 << 20;

// Whether a window's OFU is no evidence of how the job runs (profiling paused or stuck).
bool Untrusted(const JobWindow& w, const DetectorOptions& options) {
  return (w.flags & options.untrusted_ofu_flags) != 0;
}

std::string Key(const Finding& f) { return absl::StrCat(KindName(f.kind), "/", f.detail); }

json SaveEvent(const detect::RegressionEvent& e) {
  return {{"onset", e.onset_s},   {"detected", e.detected_s}, {"before", e.before_ofu},
          {"after", e.after_ofu}, {"factor", e.factor},       {"stalled", e.stalled},
          {"note", e.annotation}};
}
detect::RegressionEvent LoadEvent(const json& j) {
  detect::RegressionEvent e;
  e.onset_s = j.at("onset").get<int64_t>();
  e.detected_s = j.at("detected").get<int64_t>();
  e.before_ofu = j.at("before").get<double>();
  e.after_ofu = j.at("after").get<double>();
  e.factor = j.at("factor").is_null() ? INFINITY : j.at("factor").get<double>();
  e.stalled = j.at("stalled").get<bool>();
  e.annotation = j.at("note").get<std::string>();
  return e;
}

json SaveBaselineRegression(const detect::BaselineRegression& r) {
  return {{"onset", r.onset_s},      {"detected", r.detected_s}, {"baseline", r.baseline_ofu},
          {"job", r.job_ofu},        {"factor", r.factor},       {"jobs", r.baseline_jobs},
          {"note", r.annotation}};
}
detect::BaselineRegression LoadBaselineRegression(const json& j) {
  detect::BaselineRegression r;
  r.onset_s = j.at("onset").get<int64_t>();
  r.detected_s = j.at("detected").get<int64_t>();
  r.baseline_ofu = j.at("baseline").get<double>();
  r.job_ofu = j.at("job").get<double>();
  r.factor = j.at("factor").get<double>();
  r.baseline_jobs = j.at("jobs").get<int>();
  r.annotation = j.at("note").get<std::string>();
  return r;
}

json SaveDivergence(const DivergenceObs& d) {
  return {{"time", d.time_s},        {"from", d.interval_start_s},
          {"to", d.interval_end_s},  {"verdict", d.verdict},
          {"ratio", d.ratio},        {"confidence", d.confidence},
          {"correction", d.correction_factor}, {"cause", d.top_cause},
          {"reason", d.reason}};
}
DivergenceObs LoadDivergence(const json& j) {
  DivergenceObs d;
  d.time_s = j.at("time").get<int64_t>();
  d.interval_start_s = j.at("from").get<int64_t>();
  d.interval_end_s = j.at("to").get<int64_t>();
  d.verdict = j.at("verdict").get<std::string>();
  d.ratio = j.at("ratio").get<double>();
  d.confidence = j.at("confidence").get<double>();
  d.correction_factor = j.at("correction").get<double>();
  d.top_cause = j.at("cause").get<std::string>();
  d.reason = j.at("reason").get<std::string>();
  return d;
}

json SaveActivity(const ActivityObs& a) {
  json out = json::array();
  for (const std::optional<double>& v :
       {a.gr_engine_mean, a.sm_mean, a.tensor_max, a.sm_max, a.gr_engine_max}) {
    out.push_back(v.has_value() ? json(*v) : json(nullptr));
  }
  return out;
}
ActivityObs LoadActivity(const json& j) {
  const auto get = [&](size_t i) -> std::optional<double> {
    if (j.at(i).is_null()) return std::nullopt;
    return j.at(i).get<double>();
  };
  return {get(0), get(1), get(2), get(3), get(4)};
}

}  // namespace

JobEvaluator::JobEvaluator(const DetectorOptions& options,
                           const std::vector<EarlierJob>& earlier_jobs)
    : options_(options),
      in_job_(options.regression),
      steady_(options.regression),
      serving_detector_(options.serving, options.serving_test_windows,
                        options.serving_reference_windows),
      gpu_tracker_(0, options.findings) {
  if (earlier_jobs.empty()) return;
  detect::WorkloadBaseline baseline(options_.baseline);
  // Oldest first: the baseline keeps the most recent max_jobs.
  for (auto it = earlier_jobs.rbegin(); it != earlier_jobs.rend(); ++it) {
    baseline.AddJob(it->steady);
  }
  if (!baseline.level()) return;
  comparator_.emplace(baseline, options_.regression);
  for (const EarlierJob& j : earlier_jobs) {
    if (baseline_job_ids_.size() >= kMaxBaselineJobIds) break;
    baseline_job_ids_.push_back(j.job_id);
  }
  baseline_last_end_s_ = earlier_jobs.front().last_end_s;
}

void JobEvaluator::AddPrecisionSwitch(const PrecisionSwitchObs& s) {
  auto at = std::upper_bound(
      switches_.begin(), switches_.end(), s.time_s,
      [](int64_t t, const PrecisionSwitchObs& x) { return t < x.time_s; });
  const size_t index = static_cast<size_t>(at - switches_.begin());
  switches_.insert(at, s);
  if (index < next_switch_) ++next_switch_;
  if (switches_.size() == 1 && windows_ == 0) peak_ = s.peak_before_tflops;
}

void JobEvaluator::SetDivergence(const DivergenceObs& d) {
  divergence_ = d;
  Recompute();
}

void JobEvaluator::SetServing(bool serving) {
  if (serving_ == serving) return;
  serving_ = serving;
  Recompute();
}

void JobEvaluator::Note(std::string note) {
  precision_notes_.push_back(std::move(note));
  if (precision_notes_.size() > kMaxPrecisionNotes) precision_notes_.pop_front();
}

// A window whose engines counted tokens, past the warm-up (model load and CUDA-graph capture
// cost GPU time no token pays for) and whose OFU can be trusted, goes to the per-token
// detector; the GPUs' busy share is the GR engine's when ofu had it (the time a kernel ran,
// which is what a slower service spends more of per token), else OFU stands in.
void JobEvaluator::FeedServing(const JobWindow& jw, bool untrusted) {
  if (!jw.tokens_per_s.has_value() || untrusted || jw.warmup || jw.gpus_reporting <= 0 ||
      !std::isfinite(*jw.tokens_per_s) || *jw.tokens_per_s < 0) {
    return;
  }
  load_seen_ = true;
  detect::ServingWindow sw;
  sw.start_s = jw.window.start_s;
  sw.end_s = jw.window.end_s;
  sw.ofu = jw.window.ofu;
  sw.tokens_per_s = *jw.tokens_per_s;
  sw.gpu_busy = jw.activity.gr_engine_mean.value_or(-1);
  sw.gpu_count = jw.gpus_reporting;
  std::optional<detect::ServingVerdict> v = serving_detector_.Add(sw);
  if (v) {
    if (v->is_regression()) {
      serving_open_ = ServingOpen{*v, v->onset_s, jw.window.end_s};
    } else {
      serving_open_.reset();
    }
  } else if (serving_open_ && serving_detector_.last().is_regression()) {
    // Still open: the figures are the latest recent windows' (the whole rise once they are
    // all past the onset), the onset and detection time stay the opening's.
    serving_open_->verdict = serving_detector_.last();
    serving_open_->verdict.onset_s = serving_open_->onset_s;
  }
}

int JobEvaluator::Slot(const std::string& gpu) {
  auto [it, inserted] = gpu_slots_.try_emplace(gpu, static_cast<int>(gpu_names_.size()));
  if (inserted) {
    gpu_names_.push_back(gpu);
    gpu_tracker_.Grow(static_cast<int>(gpu_names_.size()));
  }
  return it->second;
}

void JobEvaluator::AddWindow(const JobWindow& jw) {
  if (windows_ == 0) {
    first_start_s_ = jw.window.start_s;
    window_len_s_ = std::max<int64_t>(1, jw.window.end_s - jw.window.start_s);
    if (!switches_.empty()) peak_ = switches_.front().peak_before_tflops;
  }
  ++windows_;
  last_start_s_ = jw.window.start_s;
  last_end_s_ = jw.window.end_s;

  // The window as the detectors take it: the effective peak of the precision mix in force at
  // its start (only its ratios matter); no OFU when the counters cannot be trusted.
  while (next_switch_ < switches_.size() && switches_[next_switch_].time_s <= jw.window.start_s) {
    peak_ = switches_[next_switch_].peak_after_tflops;
    ++next_switch_;
  }
  detect::OfuWindow w = jw.window;
  if (w.effective_peak_tflops <= 0) w.effective_peak_tflops = peak_;
  const bool untrusted = Untrusted(jw, options_);
  if (untrusted) w.ofu = std::numeric_limits<double>::quiet_NaN();

  TrackActivity(jw);
  FeedServing(jw, untrusted);

  // Regression inside the job. A service read by its load keeps the OFU detector's state (it
  // may be read as any job again) but its drops are the load's to explain.
  steady_.Add(w);
  if (std::optional<detect::RegressionEvent> e = in_job_.Add(w)) {
    std::optional<std::string> note;
    if (e->kind == detect::RegressionEvent::Kind::kRecovery) {
      in_job_open_.reset();
      stall_explained_ = false;
    } else if (e->kind == detect::RegressionEvent::Kind::kTransient) {
      // A service's OFU that fell and came back followed its traffic: no slowdown.
      if (!ReadByLoad() && transients_.size() < kMaxPendingTransients) {
        TransientSlowdown t{.onset_s = e->onset_s, .end_s = e->detected_s,
                            .before_ofu = e->before_ofu, .after_ofu = e->after_ofu,
                            .factor = e->factor, .windows = e->low_windows,
                            .gpus = jw.gpus_reporting > 0 ? jw.gpus_reporting : gpus_allocated_};
        t.lost_gpu_hours = (1 - 1 / t.factor) * static_cast<double>(t.end_s - t.onset_s) *
                           t.gpus / 3600.0;
        transients_.push_back(t);
      }
    } else if (ReadByLoad() && !e->stalled) {
      const detect::ServingVerdict& v = serving_detector_.last();
      note = absl::StrCat("OFU of the inference service fell ",
                          absl::StrFormat("%.2fx", e->factor), "; judged by its cost per token: ",
                          v.annotation.empty() ? "not enough windows yet" : v.annotation);
    } else if (e->precision_switch) {
      note = e->annotation;
    } else if ((note = SwitchExplains(*e))) {
    } else {
      in_job_open_ = e;
      // A stall inside a run of hung or idle windows is told by those findings, not as a
      // regression (one window of the stall may be neither).
      stall_explained_ =
          e->stalled && stopped_since_s_ >= 0 && stopped_since_s_ <= e->onset_s + window_len_s_;
      // A baseline of regressed runs would hide the next regression.
      if (!e->stalled) steady_.Freeze();
    }
    if (note) Note(*note);
  }

  // Against the workload's earlier jobs.
  if (comparator_ && !comparator_->decided()) {
    if (std::optional<detect::BaselineRegression> r = comparator_->Add(w)) {
      if (r->is_regression()) {
        workload_found_ = r;
      } else {
        Note(r->annotation);
      }
    }
  }
  if (!jw.warmup && jw.window.gpu_coverage >= options_.regression.min_coverage && !untrusted) {
    recent_steady_.push_back(jw.window.ofu);
    if (static_cast<int>(recent_steady_.size()) > 2 * options_.baseline.first_steady_windows) {
      recent_steady_.pop_front();
    }
  }

  // Idle GPUs and stragglers: which GPUs idle or lag is unknown while the profiling
  // counters cannot be trusted.
  gpus_allocated_ = std::max(gpus_allocated_, jw.gpus_allocated);
  if (!untrusted) {
    for (const StragglerObs& s : jw.stragglers) Slot(s.gpu);
    for (const std::string& g : jw.idle_gpus) Slot(g);
  }
  // Every trusted window counts, named GPUs or not: a GPU named late ran at the median before.
  if (!untrusted && std::max(gpus_allocated_, static_cast<int>(gpu_names_.size())) > 0) {
    const int named = static_cast<int>(gpu_names_.size());
    gpu_tracker_.Grow(std::max(gpus_allocated_, named));
    const int gpu_count = gpu_tracker_.gpu_count();
    const double median = jw.gpu_ofu_median > 0 ? jw.gpu_ofu_median : jw.window.ofu;
    std::vector<detect::GpuWindowValue> values(static_cast<size_t>(gpu_count),
                                               detect::GpuWindowValue{median, 1.0, true});
    for (const StragglerObs& s : jw.stragglers) {
      values[static_cast<size_t>(gpu_slots_.at(s.gpu))] = {s.ofu, 1.0, true};
    }
    for (const std::string& g : jw.idle_gpus) {
      values[static_cast<size_t>(gpu_slots_.at(g))] = {0, 0, true};
    }
    // GPUs that did not report are among the unnamed ones.
    const int unnamed_reporting = std::max(0, jw.gpus_reporting - named);
    for (int i = named; i < gpu_count; ++i) values[static_cast<size_t>(i)].reporting = i - named < unnamed_reporting;
    gpu_tracker_.AddWindow(jw.window.start_s, jw.window.end_s, values);
  }
  if (!untrusted) last_gpu_ofu_median_ = jw.gpu_ofu_median;

  // GPUs ofu names as silent are the silent_gpu finding's: the gaps and low coverage they
  // cause are not also a data-quality finding, when they are every GPU missing.
  uint32_t dq_flags = jw.flags;
  if (!jw.silent_gpus.empty() &&
      jw.gpus_reporting + static_cast<int>(jw.silent_gpus.size()) >= jw.gpus_allocated) {
    dq_flags &= ~((1u << 4) | (1u << 6));
  }
  data_quality_.push_back(
      {jw.window.start_s, dq_flags, jw.gpus_allocated, jw.gpus_reporting, jw.power_w_mean});
  if (static_cast<int>(data_quality_.size()) > options_.data_quality_windows) {
    data_quality_.pop_front();
  }

  // Silent GPUs: a window in which no GPU reported (a whole-job outage) says nothing of them.
  if (!jw.silent_gpus.empty() || jw.gpus_reporting > 0) {
    silent_.clear();
    for (const SilentGpuObs& g : jw.silent_gpus) silent_[g.gpu] = g;
  }

  // What held before this window and no longer does ended at its start.
  std::vector<Finding> before = std::move(current_);
  Recompute();
  for (Finding& f : before) {
    const std::string key = Key(f);
    const bool holds = std::any_of(current_.begin(), current_.end(),
                                   [&](const Finding& c) { return Key(c) == key; });
    if (holds || f.kind == Kind::kDivergence) continue;
    f.condition_end_s = jw.window.start_s;
    ended_.push_back(std::move(f));
  }
}

std::vector<TransientSlowdown> JobEvaluator::TakeTransients() {
  std::vector<TransientSlowdown> out = std::move(transients_);
  transients_.clear();
  return out;
}

std::vector<Finding> JobEvaluator::TakeEnded() {
  std::vector<Finding> out = std::move(ended_);
  ended_.clear();
  return out;
}

std::vector<PrecisionSwitchObs> JobEvaluator::SwitchesNear(int64_t from_s, int64_t to_s) const {
  std::vector<PrecisionSwitchObs> out;
  for (const PrecisionSwitchObs& s : switches_) {
    if (s.time_s >= from_s && s.time_s < to_s) out.push_back(s);
  }
  return out;
}

// The detector explains a drop by a precision switch only when the framework's MFU per
// window moved with OFU; the windows alerting gets carry no MFU. mfu's switch event is the
// evidence instead: a faster mix whose peak ratio covers the drop, within 10 windows of the
// onset, annotates the drop rather than alerting.
std::optional<std::string> JobEvaluator::SwitchExplains(const detect::RegressionEvent& e) const {
  const int64_t near_s = 10 * window_len_s_;
  for (const PrecisionSwitchObs& s : switches_) {
    if (std::abs(s.time_s - e.onset_s) > near_s || s.peak_before_tflops <= 0) continue;
    const double q = s.peak_after_tflops / s.peak_before_tflops;
    if (q > 1.01 && e.factor <= q * options_.regression.precision_tolerance) {
      return absl::StrFormat(
          "precision mix changed (effective peak %.0f -> %.0f TFLOP/s, up to %.2fx) when OFU "
          "fell %.2fx: the same work on a faster mix, not a regression",
          s.peak_before_tflops, s.peak_after_tflops, q, e.factor);
    }
  }
  return std::nullopt;
}

void JobEvaluator::Recompute() {
  current_.clear();
  InJob(current_);
  Workload(current_);
  Gpus(current_);
  DataQuality(current_);
  Divergence(current_);
  Silent(current_);
  Stopped(current_);
}

void JobEvaluator::InJob(std::vector<Finding>& out) const {
  if (ReadByLoad()) return ServingInJob(out);
  if (!in_job_open_ || stall_explained_) return;
  const detect::RegressionEvent& open = *in_job_open_;
  Finding f;
  f.kind = Kind::kRegressionInJob;
  f.detector =
      open.stalled ? "in_job_change_point/stall" : "in_job_change_point/two_window_median";
  f.onset_s = open.onset_s;
  f.detected_s = open.detected_s;
  f.before_ofu = open.before_ofu;
  f.after_ofu = open.after_ofu;
  f.factor = open.factor;
  f.stalled = open.stalled;
  f.confidence =
      open.stalled ? 0.95 : SeparationConfidence(open.factor, options_.regression.min_factor);
  if (!open.annotation.empty()) f.annotations.push_back(open.annotation);
  f.evidence_from_s = f.onset_s - kEvidenceHalfSpanWindows * window_len_s_;
  f.evidence_to_s = f.onset_s + kEvidenceHalfSpanWindows * window_len_s_;
  f.precision_switches = SwitchesNear(f.evidence_from_s, f.evidence_to_s);
  out.push_back(std::move(f));
}

// A service's cost per token rose at a comparable load: its regression inside the job. A
// stall (OFU ~0 while tokens were counted before) is left to the hung and idle findings.
void JobEvaluator::ServingInJob(std::vector<Finding>& out) const {
  if (!serving_open_) return;
  const detect::ServingVerdict& v = serving_open_->verdict;
  Finding f;
  f.kind = Kind::kRegressionInJob;
  f.detector = "serving/busy_gpu_seconds_per_token";
  f.onset_s = serving_open_->onset_s;
  f.detected_s = serving_open_->detected_s;
  f.factor = v.factor;
  f.confidence = SeparationConfidence(v.factor, options_.serving.min_factor);
  f.serving = v;
  if (!v.annotation.empty()) f.annotations.push_back(v.annotation);
  f.evidence_from_s = f.onset_s - kEvidenceHalfSpanWindows * window_len_s_;
  f.evidence_to_s = f.onset_s + kEvidenceHalfSpanWindows * window_len_s_;
  f.precision_switches = SwitchesNear(f.evidence_from_s, f.evidence_to_s);
  out.push_back(std::move(f));
}

void JobEvaluator::Workload(std::vector<Finding>& out) const {
  // A service's OFU says how much traffic it had, not how well it served it.
  if (ReadByLoad()) return;
  if (!workload_found_) return;
  const detect::BaselineRegression& found = *workload_found_;
  // Still below the baseline? The median of the latest steady computing windows decides.
  std::vector<double> recent;
  for (auto it = recent_steady_.rbegin();
       it != recent_steady_.rend() &&
       static_cast<int>(recent.size()) < options_.baseline.first_steady_windows;
       ++it) {
    if (*it < options_.baseline.dip_fraction * found.baseline_ofu) continue;
    recent.push_back(*it);
  }
  const double level = recent.empty() ? found.job_ofu : detect::Median(recent);
  if (level * options_.workload_recovery_factor >= found.baseline_ofu) return;

  Finding f;
  f.kind = Kind::kRegressionVsWorkload;
  f.detector = "workload_baseline/first_steady_windows";
  f.onset_s = found.onset_s;
  f.detected_s = found.detected_s;
  f.after_ofu = level;
  f.baseline_ofu = found.baseline_ofu;
  f.factor = found.baseline_ofu / std::max(level, 1e-9);
  f.baseline_jobs = found.baseline_jobs;
  f.baseline_job_ids = baseline_job_ids_;
  f.baseline_last_end_s = baseline_last_end_s_;
  // More earlier jobs make the baseline more trustworthy.
  const double jobs_weight = 1.0 - 1.0 / (1.0 + found.baseline_jobs);
  f.confidence = std::min(0.99, SeparationConfidence(*f.factor, options_.baseline.min_factor) *
                                    (0.75 + 0.25 * jobs_weight));
  if (!found.annotation.empty()) f.annotations.push_back(found.annotation);
  f.evidence_from_s = f.onset_s;
  f.evidence_to_s = f.onset_s + 2 * kEvidenceHalfSpanWindows * window_len_s_;
  f.precision_switches = SwitchesNear(f.evidence_from_s - 3600, f.evidence_to_s);
  out.push_back(std::move(f));
}

// Idle GPUs and stragglers: ofu names, per job-level window, the GPUs that were idle or
// slow; the other GPUs ran at about the job's median. That is what GpuFindingsTracker needs
// to decide which GPUs are *persistently* idle or slow. A GPU found idle is reported as idle
// only (the tracker decides idle first).
void JobEvaluator::Gpus(std::vector<Finding>& out) const {
  if (gpu_names_.empty()) return;
  const int64_t evidence_from = last_end_s_ - 2 * kEvidenceHalfSpanWindows * window_len_s_;
  Finding idle;
  idle.kind = Kind::kIdleGpus;
  idle.detector = "gpu_findings/idle_share";
  for (const detect::GpuFinding& g : gpu_tracker_.Findings()) {
    if (g.gpu_index >= static_cast<int>(gpu_names_.size())) continue;  // only named GPUs can be
    const std::string& gpu = gpu_names_[static_cast<size_t>(g.gpu_index)];
    if (g.kind == detect::GpuFinding::Kind::kIdle) {
      idle.gpus.push_back(gpu);
      idle.onset_s =
          idle.gpus.size() == 1 ? g.first_seen_s : std::min(idle.onset_s, g.first_seen_s);
      idle.idle_gpu_hours += static_cast<double>(g.windows * window_len_s_) / 3600.0;
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
      f.straggler_ofu = g.score * last_gpu_ofu_median_;
      f.factor = g.score > 0 ? std::optional<double>(1.0 / g.score) : std::nullopt;
      f.confidence = std::min(0.99, 0.5 + 0.5 * static_cast<double>(g.windows) /
                                              std::max<double>(1, gpu_tracker_.windows()));
      if (!g.annotation.empty()) f.annotations.push_back(g.annotation);
      f.evidence_from_s = evidence_from;
      f.evidence_to_s = last_end_s_;
      out.push_back(std::move(f));
    }
  }
  if (!idle.gpus.empty()) {
    idle.evidence_from_s = evidence_from;
    idle.evidence_to_s = last_end_s_;
    out.push_back(std::move(idle));
  }
}

void JobEvaluator::DataQuality(std::vector<Finding>& out) const {
  const int n = static_cast<int>(data_quality_.size());
  if (n < std::min(5, options_.data_quality_windows)) return;
  Finding f;
  f.kind = Kind::kDataQuality;
  f.detector = "data_quality/flag_share";
  f.recent_windows = n;
  double stuck_power_sum = 0;
  int stuck_power_n = 0;
  for (const DataQualityWindow& w : data_quality_) {
    const uint32_t bad = w.flags & options_.data_quality_flags;
    if (bad == 0) continue;
    if (f.flagged_windows == 0) f.onset_s = w.start_s;
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
  if (f.flagged_windows == 0 || share < options_.data_quality_share) return;
  f.confidence = share;
  f.evidence_from_s = last_end_s_ - 2 * kEvidenceHalfSpanWindows * window_len_s_;
  f.evidence_to_s = last_end_s_;
  out.push_back(std::move(f));
}

void JobEvaluator::TrackActivity(const JobWindow& w) {
  const Activity a = ClassifyActivity(w, options_);
  if (a == Activity::kUnknown) return;
  if (a == Activity::kComputing) {
    computed_ = true;
    hung_since_s_ = idle_since_s_ = stopped_since_s_ = -1;
    hung_windows_ = idle_windows_ = 0;
    spinning_ = false;
    return;
  }
  if (stopped_since_s_ < 0) stopped_since_s_ = w.window.start_s;
  stopped_activity_ = w.activity;
  if (a == Activity::kHung) {
    if (hung_since_s_ < 0) hung_since_s_ = w.window.start_s;
    ++hung_windows_;
    spinning_ =
        spinning_ || (w.activity.gr_engine_mean.value_or(0) >= options_.spinning_gr_engine_active);
    idle_since_s_ = -1;
    idle_windows_ = 0;
  } else {
    if (idle_since_s_ < 0) idle_since_s_ = w.window.start_s;
    ++idle_windows_;
    hung_since_s_ = -1;
    hung_windows_ = 0;
    spinning_ = false;
  }
}

// A GPU silent while its job's other GPUs report: fallen off the bus, or its exporter died.
// Each GPU is its own finding; a host none of whose GPUs report is one finding for the host.
void JobEvaluator::Silent(std::vector<Finding>& out) const {
  if (silent_.empty()) return;
  const size_t first = out.size();
  std::map<std::string, Finding> hosts;
  for (const auto& [gpu, g] : silent_) {
    if (last_end_s_ - g.last_sample_s < options_.silent_gpu_after_s) continue;
    if (g.host_silent) {
      const std::string host = gpu.substr(0, gpu.find('/'));
      Finding& f = hosts[host];
      if (f.gpus.empty()) {
        f.onset_s = g.last_sample_s;
      } else {
        f.onset_s = std::max(f.onset_s, g.last_sample_s);
      }
      f.host = host;
      f.gpus.push_back(gpu);
      continue;
    }
    Finding f;
    f.kind = Kind::kSilentGpu;
    f.detail = gpu;
    f.detector = "silent_gpu/gpu";
    f.gpus = {gpu};
    f.onset_s = g.last_sample_s;
    f.last_sample_s = g.last_sample_s;
    out.push_back(std::move(f));
  }
  for (auto& [host, f] : hosts) {
    f.kind = Kind::kSilentGpu;
    f.detail = host;
    f.detector = "silent_gpu/host";
    f.last_sample_s = f.onset_s;
    out.push_back(std::move(f));
  }
  for (size_t i = first; i < out.size(); ++i) {
    Finding* f = &out[i];
    f->detected_s = last_end_s_;
    f->recent_windows =
        static_cast<int>(std::max<int64_t>(1, (last_end_s_ - f->onset_s) / window_len_s_));
    // The longer the silence while its neighbours report, the less a scrape hiccup explains it.
    f->confidence =
        std::clamp(1.0 - 0.5 * static_cast<double>(options_.silent_gpu_after_s) /
                             static_cast<double>(std::max<int64_t>(1, last_end_s_ - f->onset_s)),
                   0.5, 0.99);
    f->evidence_from_s = f->onset_s - kEvidenceHalfSpanWindows * window_len_s_;
    f->evidence_to_s = last_end_s_;
  }
}

// Hung: every GPU stopped computing while kernels stay resident, or with the SMs at ~0, for
// hung_after_s. Idle: after computing, no kernel on any GPU for job_idle_after_s.
void JobEvaluator::Stopped(std::vector<Finding>& out) const {
  const auto finding = [&](Kind kind, int64_t since_s, int64_t windows, const char* detector) {
    Finding f;
    f.kind = kind;
    f.detector = detector;
    f.onset_s = since_s;
    f.detected_s = last_end_s_;
    f.activity = stopped_activity_;
    f.stopped_windows = windows;
    f.spinning = kind == Kind::kHung && spinning_;
    f.confidence = std::clamp(static_cast<double>(windows * window_len_s_) /
                                  static_cast<double>(std::max<int64_t>(1, last_end_s_ - since_s)),
                              0.5, 0.99);
    f.evidence_from_s = since_s - kEvidenceHalfSpanWindows * window_len_s_;
    f.evidence_to_s = last_end_s_;
    out.push_back(std::move(f));
  };
  if (hung_since_s_ >= 0 && last_end_s_ - hung_since_s_ >= options_.hung_after_s) {
    finding(Kind::kHung, hung_since_s_, hung_windows_,
            spinning_ ? "activity/spinning" : "activity/stopped");
  }
  if (computed_ && idle_since_s_ >= 0 && last_end_s_ - idle_since_s_ >= options_.job_idle_after_s) {
    finding(Kind::kJobIdle, idle_since_s_, idle_windows_, "activity/no_kernels");
  }
}

void JobEvaluator::Divergence(std::vector<Finding>& out) const {
  if (!divergence_) return;
  const DivergenceObs& d = *divergence_;
  if (d.verdict != "app_flops_overcount" && d.verdict != "app_flops_undercount") return;
  if (d.confidence < options_.divergence_min_confidence) return;
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
  out.push_back(std::move(f));
}

namespace {

json SaveTransients(const std::vector<TransientSlowdown>& transients) {
  json out = json::array();
  for (const TransientSlowdown& t : transients) {
    out.push_back(json::array({t.onset_s, t.end_s, t.before_ofu, t.after_ofu, t.factor,
                               t.windows, t.gpus, t.lost_gpu_hours}));
  }
  return out;
}

std::vector<TransientSlowdown> LoadTransients(const json& j) {
  std::vector<TransientSlowdown> out;
  for (const json& t : j) {
    if (out.size() >= kMaxPendingTransients) break;
    out.push_back({t.at(0).get<int64_t>(), t.at(1).get<int64_t>(), t.at(2).get<double>(),
                   t.at(3).get<double>(), t.at(4).get<double>(), t.at(5).get<int>(),
                   t.at(6).get<int>(), t.at(7).get<double>()});
  }
  return out;
}

}  // namespace

std::string JobEvaluator::Checkpoint() const {
  using detect::StateCodec;
  json switches = json::array();
  for (const PrecisionSwitchObs& s : switches_) {
    switches.push_back(json::array({s.time_s, s.peak_before_tflops, s.peak_after_tflops}));
  }
  json dq = json::array();
  for (const DataQualityWindow& w : data_quality_) {
    dq.push_back(json::array(
        {w.start_s, w.flags, w.gpus_allocated, w.gpus_reporting, w.power_w_mean}));
  }
  json j = {
      {"version", kCheckpointVersion},
      {"windows", windows_},
      {"first_start", first_start_s_},
      {"last_start", last_start_s_},
      {"last_end", last_end_s_},
      {"window_len", window_len_s_},
      {"switches", std::move(switches)},
      {"next_switch", next_switch_},
      {"peak", peak_},
      {"divergence", divergence_ ? SaveDivergence(*divergence_) : json(nullptr)},
      {"in_job", StateCodec::Save(in_job_)},
      {"transients", SaveTransients(transients_)},
      {"steady", StateCodec::Save(steady_)},
      {"in_job_open", in_job_open_ ? SaveEvent(*in_job_open_) : json(nullptr)},
      {"precision_notes", precision_notes_},
      {"comparator", comparator_ ? StateCodec::Save(*comparator_) : json(nullptr)},
      {"workload_found",
       workload_found_ ? SaveBaselineRegression(*workload_found_) : json(nullptr)},
      {"baseline_jobs", baseline_job_ids_},
      {"baseline_last_end", baseline_last_end_s_},
      {"recent_steady", recent_steady_},
      {"gpu_names", gpu_names_},
      {"gpus_allocated", gpus_allocated_},
      {"gpu_tracker", StateCodec::Save(gpu_tracker_)},
      {"gpu_median", last_gpu_ofu_median_},
      {"data_quality", std::move(dq)},
  };
  // Silent GPUs, hung and idle (absent from older checkpoints: restored as none).
  json silent = json::array();
  for (const auto& [gpu, g] : silent_) {
    silent.push_back(json::array({gpu, g.last_sample_s, g.host_silent}));
  }
  j["silent"] = std::move(silent);
  json serving_open = nullptr;
  if (serving_open_) {
    const detect::ServingVerdict& v = serving_open_->verdict;
    serving_open = {{"onset", serving_open_->onset_s},     {"detected", serving_open_->detected_s},
                    {"load_before", v.load_before},        {"load_after", v.load_after},
                    {"cost_before", v.cost_before},        {"cost_after", v.cost_after},
                    {"factor", v.factor},                  {"windows", v.comparable_windows},
                    {"note", v.annotation}};
  }
  j["serving"] = {{"detector", StateCodec::Save(serving_detector_)},
                  {"load_seen", load_seen_},
                  {"open", std::move(serving_open)}};
  j["activity"] = {{"computed", computed_},
                   {"hung_since", hung_since_s_},
                   {"idle_since", idle_since_s_},
                   {"stopped_since", stopped_since_s_},
                   {"hung_windows", hung_windows_},
                   {"idle_windows", idle_windows_},
                   {"spinning", spinning_},
                   {"last", SaveActivity(stopped_activity_)},
                   {"stall_explained", stall_explained_}};
  return StateCodec::EncodeCbor(j);
}

absl::StatusOr<std::unique_ptr<JobEvaluator>> JobEvaluator::Restore(
    const DetectorOptions& options, std::string_view checkpoint) {
  using detect::StateCodec;
  absl::StatusOr<json> decoded = StateCodec::DecodeCbor(checkpoint);
  if (!decoded.ok()) return decoded.status();
  try {
    const json& j = *decoded;
    const json& version = j.at("version");
    if (!version.is_number_integer() || version.get<int64_t>() != kCheckpointVersion) {
      return absl::InvalidArgumentError(absl::StrCat(
          "checkpoint: version ", version.is_number() ? version.dump() : version.type_name(),
          " is not ", kCheckpointVersion));
    }
    auto ev = std::make_unique<JobEvaluator>(options, std::vector<EarlierJob>{});
    ev->windows_ = j.at("windows").get<int64_t>();
    ev->first_start_s_ = j.at("first_start").get<int64_t>();
    ev->last_start_s_ = j.at("last_start").get<int64_t>();
    ev->last_end_s_ = j.at("last_end").get<int64_t>();
    ev->window_len_s_ = j.at("window_len").get<int64_t>();
    // Times and counts a job can have: whatever else a row holds would overflow the
    // evaluator's arithmetic or size its buffers.
    for (const auto& [name, value, low, high] :
         {std::tuple{"windows", ev->windows_, int64_t{0}, kMaxTimeS},
          std::tuple{"first_start", ev->first_start_s_, -kMaxTimeS, kMaxTimeS},
          std::tuple{"last_start", ev->last_start_s_, -kMaxTimeS, kMaxTimeS},
          std::tuple{"last_end", ev->last_end_s_, -kMaxTimeS, kMaxTimeS},
          std::tuple{"window_len", ev->window_len_s_, int64_t{1}, kMaxWindowS}}) {
      if (value < low || value > high) {
        return absl::InvalidArgumentError(
            absl::StrCat("checkpoint: ", name, "=", value, " is outside [", low, ", ", high, "]"));
      }
    }
    for (const json& s : j.at("switches")) {
      ev->switches_.push_back(
          {s.at(0).get<int64_t>(), s.at(1).get<double>(), s.at(2).get<double>()});
    }
    ev->next_switch_ = j.at("next_switch").get<size_t>();
    if (ev->next_switch_ > ev->switches_.size()) {
      return absl::InvalidArgumentError("checkpoint: next_switch is past the switches");
    }
    ev->peak_ = j.at("peak").get<double>();
    if (!j.at("divergence").is_null()) ev->divergence_ = LoadDivergence(j.at("divergence"));
    StateCodec::Load(j.at("in_job"), ev->in_job_);
    StateCodec::Load(j.at("steady"), ev->steady_);
    if (!j.at("in_job_open").is_null()) ev->in_job_open_ = LoadEvent(j.at("in_job_open"));
    ev->precision_notes_ = j.at("precision_notes").get<std::deque<std::string>>();
    if (j.contains("transients")) ev->transients_ = LoadTransients(j.at("transients"));
    if (!j.at("comparator").is_null()) {
      ev->comparator_.emplace(detect::WorkloadBaseline(options.baseline), options.regression);
      StateCodec::Load(j.at("comparator"), *ev->comparator_);
    }
    if (!j.at("workload_found").is_null()) {
      ev->workload_found_ = LoadBaselineRegression(j.at("workload_found"));
    }
    ev->baseline_job_ids_ = j.at("baseline_jobs").get<std::vector<std::string>>();
    ev->baseline_last_end_s_ = j.at("baseline_last_end").get<int64_t>();
    ev->recent_steady_ = j.at("recent_steady").get<std::deque<double>>();
    ev->gpu_names_ = j.at("gpu_names").get<std::vector<std::string>>();
    for (size_t i = 0; i < ev->gpu_names_.size(); ++i) {
      ev->gpu_slots_[ev->gpu_names_[i]] = static_cast<int>(i);
    }
    ev->gpus_allocated_ = j.at("gpus_allocated").get<int>();
    if (ev->gpus_allocated_ < 0 || ev->gpus_allocated_ > kMaxGpus) {
      return absl::InvalidArgumentError(absl::StrCat(
          "checkpoint: gpus_allocated=", ev->gpus_allocated_, " is outside [0, ", kMaxGpus, "]"));
    }
    StateCodec::Load(j.at("gpu_tracker"), ev->gpu_tracker_);
    if (ev->gpu_tracker_.gpu_count() < static_cast<int>(ev->gpu_names_.size())) {
      return absl::InvalidArgumentError("checkpoint: fewer GPU counters than named GPUs");
    }
    ev->last_gpu_ofu_median_ = j.at("gpu_median").get<double>();
    for (const json& w : j.at("data_quality")) {
      ev->data_quality_.push_back({w.at(0).get<int64_t>(), w.at(1).get<uint32_t>(),
                                   w.at(2).get<int>(), w.at(3).get<int>(),
                                   w.at(4).get<double>()});
    }
    if (j.contains("silent")) {
      for (const json& g : j.at("silent")) {
        SilentGpuObs o{g.at(0).get<std::string>(), g.at(1).get<int64_t>(), g.at(2).get<bool>()};
        if (o.last_sample_s < -kMaxTimeS || o.last_sample_s > kMaxTimeS) {
          return absl::InvalidArgumentError(absl::StrCat("checkpoint: silent GPU last sample ",
                                                         o.last_sample_s, " is outside [",
                                                         -kMaxTimeS, ", ", kMaxTimeS, "]"));
        }
        ev->silent_[o.gpu] = std::move(o);
      }
    }
    if (j.contains("activity")) {
      const json& a = j.at("activity");
      ev->computed_ = a.at("computed").get<bool>();
      ev->hung_since_s_ = a.at("hung_since").get<int64_t>();
      ev->idle_since_s_ = a.at("idle_since").get<int64_t>();
      ev->stopped_since_s_ = a.at("stopped_since").get<int64_t>();
      ev->hung_windows_ = a.at("hung_windows").get<int64_t>();
      ev->idle_windows_ = a.at("idle_windows").get<int64_t>();
      ev->spinning_ = a.at("spinning").get<bool>();
      ev->stopped_activity_ = LoadActivity(a.at("last"));
      ev->stall_explained_ = a.at("stall_explained").get<bool>();
      for (const auto& [name, value] :
           {std::pair{"hung_since", ev->hung_since_s_}, std::pair{"idle_since", ev->idle_since_s_},
            std::pair{"stopped_since", ev->stopped_since_s_},
            std::pair{"hung_windows", ev->hung_windows_},
            std::pair{"idle_windows", ev->idle_windows_}}) {
        if (value < -1 || value > kMaxTimeS) {
          return absl::InvalidArgumentError(absl::StrCat("checkpoint: activity ", name, "=", value,
                                                         " is outside [-1, ", kMaxTimeS, "]"));
        }
      }
    }
    if (j.contains("serving")) {  // absent from older checkpoints: no tokens seen
      const json& sv = j.at("serving");
      StateCodec::Load(sv.at("detector"), ev->serving_detector_);
      ev->load_seen_ = sv.at("load_seen").get<bool>();
      if (!sv.at("open").is_null()) {
        const json& o = sv.at("open");
        ServingOpen open;
        open.onset_s = o.at("onset").get<int64_t>();
        open.detected_s = o.at("detected").get<int64_t>();
        open.verdict.kind = detect::ServingVerdict::Kind::kSlowerPerToken;
        open.verdict.load_before = o.at("load_before").get<double>();
        open.verdict.load_after = o.at("load_after").get<double>();
        open.verdict.cost_before = o.at("cost_before").get<double>();
        open.verdict.cost_after = o.at("cost_after").get<double>();
        open.verdict.factor = o.at("factor").get<double>();
        open.verdict.comparable_windows = o.at("windows").get<int>();
        open.verdict.onset_s = open.onset_s;
        open.verdict.annotation = o.at("note").get<std::string>();
        ev->serving_open_ = std::move(open);
      }
    }
    ev->Recompute();
    return ev;
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("checkpoint: not a detector state (", e.what(),
                                                   ")"));
  }
}

}  // namespace goodput::alerting
