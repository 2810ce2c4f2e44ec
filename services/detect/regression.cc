#include "services/detect/regression.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_format.h"

namespace goodput::detect {
namespace {

constexpr double kMadToSigma = 1.4826;

template <typename Container>
std::vector<double> Ofus(const Container& windows) {
  std::vector<double> v;
  v.reserve(windows.size());
  for (const OfuWindow& w : windows) v.push_back(w.ofu);
  return v;
}

// Median of a field over the windows where it is known (> 0 / >= 0), 0 when none.
template <typename Container, typename Field>
double MedianKnown(const Container& windows, Field field, bool allow_zero) {
  std::vector<double> v;
  for (const OfuWindow& w : windows) {
    const double x = field(w);
    if (x > 0 || (allow_zero && x >= 0)) v.push_back(x);
  }
  return v.empty() ? -1 : Median(v);
}

}  // namespace

WarmupTracker::WarmupTracker(int lookback, double rise, int64_t max_warmup_s)
    : lookback_(std::max(1, lookback)), rise_(rise), max_warmup_s_(max_warmup_s) {}

bool WarmupTracker::Add(const OfuWindow& w) {
  if (done_) return true;
  if (first_start_s_ < 0) first_start_s_ = w.start_s;
  recent_.push_back(w.ofu);
  if (static_cast<int>(recent_.size()) > 2 * lookback_) recent_.pop_front();
  if (w.end_s - first_start_s_ >= max_warmup_s_) {
    done_ = true;
    return true;
  }
  if (static_cast<int>(recent_.size()) < 2 * lookback_) return false;
  std::vector<double> previous(recent_.begin(), recent_.begin() + lookback_);
  std::vector<double> latest(recent_.begin() + lookback_, recent_.end());
  const double previous_median = Median(previous);
  const double latest_median = Median(latest);
  // Warm-up is a rise to the steady level (compilation, data loader and NCCL set-up first);
  // it is over once the level is flat: neither rising nor falling (a stall during the ramp
  // is not the end of it).
  if (latest_median > 0 && latest_median <= previous_median * rise_ &&
      latest_median >= previous_median / rise_) {
    done_ = true;
  }
  return done_;
}

bool ExplainByPrecisionSwitch(const std::vector<OfuWindow>& before,
                              const std::vector<OfuWindow>& after, double ofu_drop_factor,
                              double tolerance, RegressionEvent& event) {
  auto peak = [](const OfuWindow& w) { return w.effective_peak_tflops; };
  auto mfu = [](const OfuWindow& w) { return w.app_mfu; };
  const double peak_before = MedianKnown(before, peak, false);
  const double peak_after = MedianKnown(after, peak, false);
  if (peak_before <= 0 || peak_after <= 0) return false;
  event.effective_peak_before_tflops = peak_before;
  event.effective_peak_after_tflops = peak_after;
  // Same work on a faster precision mix: tensor time shrinks by at most the peak ratio q, so
  // OFU (busy tensor cycles per second) falls by at most q, and MFU, computed against the
  // effective peak, falls by the same factor as OFU. Switching to a slower mix (BF16-only)
  // raises both, so it never looks like a drop.
  const double q = peak_after / peak_before;
  if (q <= 1.01 || after.empty() || before.empty()) return false;
  const double mfu_before = MedianKnown(before, mfu, true);
  const double mfu_after = MedianKnown(after, mfu, true);
  if (mfu_before <= 0 || mfu_after <= 0) return false;
  const double mfu_factor = mfu_before / mfu_after;
  // Evaluation passes or other shallow dips among the windows after the switch pull their
  // median down; the least drop the windows support (their upper quartile) is what the switch
  // has to explain.
  std::vector<double> after_ofu = Ofus(after);
  std::sort(after_ofu.begin(), after_ofu.end());
  const double after_q75 = after_ofu[std::min(after_ofu.size() - 1, after_ofu.size() * 3 / 4)];
  const double least_drop =
      after_q75 > 0 ? std::min(ofu_drop_factor, Median(Ofus(before)) / after_q75) : ofu_drop_factor;
  const bool within_peak_ratio = least_drop <= q * tolerance;
  const bool moved_together =
      std::abs(std::log(mfu_factor / ofu_drop_factor)) <= std::log(tolerance);
  if (!within_peak_ratio || !moved_together) {
    event.annotation = absl::StrFormat(
        "precision mix changed (effective peak %.0f -> %.0f TFLOP/s, at most %.2fx), but OFU fell "
        "%.2fx and MFU %.2fx: more than the switch explains",
        peak_before, peak_after, q, ofu_drop_factor, mfu_factor);
    return false;
  }
  event.precision_switch = true;
  event.annotation = absl::StrFormat(
      "precision mix changed (effective peak %.0f -> %.0f TFLOP/s); OFU %.2fx and MFU %.2fx "
      "lower together, within the %.2fx the faster mix explains: not a regression",
      peak_before, peak_after, ofu_drop_factor, mfu_factor, q);
  return true;
}

InJobRegressionDetector::InJobRegressionDetector(RegressionOptions options)
    : options_(options),
      warmup_(options.warmup_lookback, options.warmup_rise, options.max_warmup_s) {}

double InJobRegressionDetector::reference_level() const {
  if (static_cast<int>(reference_.size()) < options_.min_reference_windows) return 0;
  return Median(Ofus(reference_));
}

void InJobRegressionDetector::Restart(const std::vector<OfuWindow>& seed) {
  reference_.assign(seed.begin(), seed.end());
  test_.clear();
  drop_pending_ = false;
  // The level changed: the run, measured against the old one, is over.
  run_.clear();
  run_confirmed_ = false;
}

int InJobRegressionDetector::deep_drop_windows() const {
  if (phases_marked_) return options_.fast_windows;
  // Telemetry alone cannot tell a phase not yet seen from a drop, and the short low runs a
  // job shows (a stall's edges, a short evaluation) say nothing of how long its longest phase
  // lasts: what the job has shown only ever lengthens the wait.
  return std::max(options_.unseen_phase_windows,
                  longest_phase_windows_ + options_.phase_margin_windows);
}

std::optional<InJobRegressionDetector::Reference> InJobRegressionDetector::CurrentReference()
    const {
  if (static_cast<int>(reference_.size()) < options_.min_reference_windows) return std::nullopt;
  const std::vector<double> ref = Ofus(reference_);
  Reference r;
  r.level = Median(ref);
  if (r.level <= 0) return std::nullopt;
  r.margin = std::max(options_.mad_k * kMadToSigma * MedianAbsDeviation(ref, r.level),
                      options_.min_drop);
  r.low = std::min(r.level / options_.min_factor, r.level - r.margin);
  return r;
}

std::optional<RegressionEvent> InJobRegressionDetector::TrackRun(const OfuWindow& w,
                                                                 const Reference& ref) {
  const double level = ref.level;
  if (w.ofu >= ref.low) {
    // The run, if any, recovered before it was confirmed: a phase of the job or a transient
    // slowdown; either way the job has shown it can be this low this long and come back.
    std::optional<RegressionEvent> e;
    const int n = static_cast<int>(run_.size());
    if (n > 0 && !run_confirmed_) {
      const double after_level = Median(Ofus(run_));
      const double factor = after_level > 0 ? level / after_level : INFINITY;
      // A phase is a run of two or more windows about as deep as the drops the run rule
      // confirms (one low window is the edge of a checkpoint or a stall).
      if (n >= 2 && n <= options_.max_phase_windows &&
          factor >= options_.deep_factor / options_.level_band) {
        longest_phase_windows_ = std::max(longest_phase_windows_, n);
      }
      if (n >= options_.min_transient_windows && factor >= options_.min_factor) {
        e.emplace();
        e->kind = RegressionEvent::Kind::kTransient;
        e->onset_s = run_.front().start_s;
        e->detected_s = run_.back().end_s;
        e->before_ofu = level;
        e->after_ofu = after_level;
        e->factor = factor;
        e->low_windows = n;
        e->annotation = absl::StrFormat(
            "OFU fell %.2fx (%.1f%% -> %.1f%%) for %d windows and recovered", factor,
            level * 100, after_level * 100, n);
      }
    }
    run_.clear();
    run_confirmed_ = false;
    return e;
  }
  run_.push_back(w);
  if (static_cast<int>(run_.size()) > options_.max_phase_windows + options_.fast_windows + 1) {
    run_.pop_front();
  }
  const int wait = deep_drop_windows();
  const int n = static_cast<int>(run_.size());
  if (run_confirmed_ || n < wait) return std::nullopt;
  // The last `wait` windows at one level; the run's first window may be cut by the onset (a
  // partial window, low but between the two levels).
  std::vector<double> core;
  for (int i = n - wait; i < n; ++i) core.push_back(run_[static_cast<size_t>(i)].ofu);
  double after_level = Median(core);
  auto in_band = [&](double x) {
    return x >= after_level / options_.level_band && x <= after_level * options_.level_band;
  };
  if (n == wait && core.size() > 2 && !in_band(core.front())) {
    core.erase(core.begin());
    after_level = Median(core);
  }
  if (core.size() < 2 || !std::all_of(core.begin(), core.end(), in_band)) return std::nullopt;
  if (!(after_level > 0 && level / after_level >= options_.deep_factor)) return std::nullopt;
  run_confirmed_ = true;
  std::vector<OfuWindow> after(run_.begin(), run_.end());
  std::optional<RegressionEvent> e = Confirm(after, level, after_level, w, n);
  e->fast = true;
  e->low_windows = n;
  return e;
}

std::optional<RegressionEvent> InJobRegressionDetector::Confirm(
    const std::vector<OfuWindow>& after, double level, double after_level,
    const OfuWindow& latest, int of_windows) {
  RegressionEvent e;
  e.kind = RegressionEvent::Kind::kDrop;
  e.onset_s = after.front().start_s;
  e.detected_s = latest.end_s;
  e.before_ofu = level;
  e.after_ofu = after_level;
  e.factor = after_level > 0 ? level / after_level : INFINITY;
  // The reference level is the median of the reference windows, so the precision mix it
  // reflects is the one most of them ran (their median peak).
  std::vector<OfuWindow> before(reference_.begin(), reference_.end());
  if (!ExplainByPrecisionSwitch(before, after, e.factor, options_.precision_tolerance, e)) {
    const std::string extra = e.annotation;
    e.annotation = absl::StrFormat("OFU fell %.2fx (%.1f%% -> %.1f%%) for %d of the last %d windows",
                                   e.factor, level * 100, after_level * 100,
                                   static_cast<int>(after.size()), of_windows);
    if (!extra.empty()) e.annotation += "; " + extra;
    open_drop_before_ = level;
  }
  Restart(after);
  return e;
}

std::optional<RegressionEvent> InJobRegressionDetector::Add(const OfuWindow& w) {
  if (w.gpu_coverage < options_.min_coverage || !std::isfinite(w.ofu)) return std::nullopt;
  if (w.phases_marked) phases_marked_ = true;
  if (!warmup_.done()) {
    warmup_.Add(w);
    return std::nullopt;
  }
  // A phase the framework marked (checkpoint, evaluation) says nothing of the job's speed.
  if (w.in_marked_phase) return std::nullopt;
  // Dips (checkpoints, evaluation at near-zero tensor work, stalls) are set aside: they say
  // nothing about the job's speed while it computes. A long run of them is a stall.
  // Until the reference is established, every computing window since warm-up stands in.
  double level = reference_level();
  if (level <= 0 && reference_.size() + test_.size() >= 5) {
    std::vector<double> kept = Ofus(reference_);
    for (const OfuWindow& t : test_) kept.push_back(t.ofu);
    level = Median(kept);
  }
  const bool is_dip = level > 0 && w.ofu < level * options_.dip_fraction;
  recent_dips_.push_back(is_dip);
  if (static_cast<int>(recent_dips_.size()) > options_.stall_windows) recent_dips_.pop_front();
  if (is_dip) {
    // A dip ends a low run: the windows cut by a checkpoint's edges are no phase of their own.
    run_.clear();
    run_confirmed_ = false;
    int dips = 0;
    for (bool d : recent_dips_) dips += d ? 1 : 0;
    if (!stall_open_ && static_cast<int>(recent_dips_.size()) == options_.stall_windows &&
        dips >= options_.stall_windows - 1) {
      RegressionEvent e;
      e.kind = RegressionEvent::Kind::kDrop;
      e.onset_s =
          w.start_s - static_cast<int64_t>(options_.stall_windows - 1) * (w.end_s - w.start_s);
      e.detected_s = w.end_s;
      e.before_ofu = level;
      e.after_ofu = w.ofu;
      e.factor = w.ofu > 0 ? level / w.ofu : INFINITY;
      e.stalled = true;
      e.annotation = absl::StrFormat(
          "the job has barely computed for %d windows (OFU %.1f%%, was %.1f%%): stalled or hung",
          dips, w.ofu * 100, level * 100);
      stall_open_ = true;
      recent_dips_.clear();
      // Keep the reference: when the job resumes at its old level there is nothing to report.
      test_.clear();
      return e;
    }
    return std::nullopt;
  }
  if (stall_open_) {
    // Computing again after a reported stall.
    stall_open_ = false;
    RegressionEvent e;
    e.kind = RegressionEvent::Kind::kRecovery;
    e.onset_s = w.start_s;
    e.detected_s = w.end_s;
    e.before_ofu = level;
    e.after_ofu = w.ofu;
    e.factor = level > 0 ? w.ofu / level : 0;
    e.stalled = true;
    e.annotation =
        absl::StrFormat("the job computes again after a stall (OFU %.1f%%)", w.ofu * 100);
    test_.push_back(w);
    return e;
  }
  test_.push_back(w);
  if (static_cast<int>(test_.size()) > options_.test_windows) {
    reference_.push_back(test_.front());
    test_.pop_front();
    if (static_cast<int>(reference_.size()) > options_.reference_windows) reference_.pop_front();
  }
  const std::optional<Reference> ref = CurrentReference();
  if (!ref) return std::nullopt;
  // Deep drops are confirmed by their run, before the persistence shallow ones need.
  std::optional<RegressionEvent> run_event = TrackRun(w, *ref);
  if (run_event && run_event->kind == RegressionEvent::Kind::kDrop) return run_event;
  if (static_cast<int>(test_.size()) < options_.test_windows) return run_event;
  std::optional<RegressionEvent> e = Evaluate(w, *ref);
  return e ? e : run_event;
}

std::optional<RegressionEvent> InJobRegressionDetector::Evaluate(const OfuWindow& latest,
                                                                 const Reference& ref) {
  const double level = ref.level;
  const double margin = ref.margin;
  const int needed =
      static_cast<int>(std::ceil(options_.persistence * options_.test_windows - 1e-9));
  const int n = static_cast<int>(test_.size());

  // Earliest window k such that it and the windows after it are mostly on the other side of
  // the threshold: the onset of the change.
  auto onset_of = [&](auto is_changed) -> int {
    int changed_total = 0;
    for (const OfuWindow& t : test_) changed_total += is_changed(t.ofu) ? 1 : 0;
    if (changed_total < needed) return -1;
    int changed_after = changed_total;
    for (int k = 0; k < n; ++k) {
      const bool c = is_changed(test_[k].ofu);
      if (c && changed_after >= options_.persistence * (n - k)) return k;
      changed_after -= c ? 1 : 0;
    }
    return -1;
  };

  // Drop: at least `persistence` of the last test windows (computing windows only) sit below
  // the threshold.
  const double low = ref.low;
  // A new level is one level: the low windows must agree with their median within
  // level_band. Windows cut by the edge of a checkpoint or stall, or an evaluation pass next
  // to them, are low too but each at a different level.
  std::vector<double> lows;
  for (const OfuWindow& t : test_) {
    if (t.ofu < low) lows.push_back(t.ofu);
  }
  const double new_level = Median(lows);
  auto at_new_level = [&](double x) {
    return x < low && x >= new_level / options_.level_band && x <= new_level * options_.level_band;
  };
  const int drop_onset = static_cast<int>(lows.size()) >= needed ? onset_of(at_new_level) : -1;
  if (drop_onset >= 0) {
    std::vector<OfuWindow> after(test_.begin() + drop_onset, test_.end());
    const double after_level = Median(Ofus(after));
    const double factor = after_level > 0 ? level / after_level : INFINITY;
    if (factor >= options_.min_factor && !drop_pending_) {
      drop_pending_ = true;  // confirmed only if the rule still holds at the next window
      return std::nullopt;
    }
    if (factor >= options_.min_factor) return Confirm(after, level, after_level, latest, n);
  }

  // Recovery after a reported drop.
  drop_pending_ = false;
  if (open_drop_before_ > 0) {
    const double high = std::max(open_drop_before_ / options_.recovery_factor, level + margin);
    const int rise_onset = onset_of([&](double x) { return x >= high; });
    if (rise_onset >= 0) {
      std::vector<OfuWindow> after(test_.begin() + rise_onset, test_.end());
      RegressionEvent e;
      e.kind = RegressionEvent::Kind::kRecovery;
      e.onset_s = test_[rise_onset].start_s;
      e.detected_s = latest.end_s;
      e.before_ofu = level;
      e.after_ofu = Median(Ofus(after));
      e.factor = e.after_ofu / level;
      e.annotation = absl::StrFormat("OFU recovered %.2fx (%.1f%% -> %.1f%%)", e.factor,
                                     level * 100, e.after_ofu * 100);
      open_drop_before_ = 0;
      Restart(after);
      return e;
    }
  }
  return std::nullopt;
}

SteadyStateSummarizer::SteadyStateSummarizer(const RegressionOptions& options)
    : min_coverage_(options.min_coverage),
      warmup_(options.warmup_lookback, options.warmup_rise, options.max_warmup_s) {}

void SteadyStateSummarizer::Add(const OfuWindow& w) {
  if (frozen_ || w.gpu_coverage < min_coverage_ || !std::isfinite(w.ofu)) return;
  if (!warmup_.done()) {
    warmup_.Add(w);
    return;
  }
  const double peak = std::max(0.0, w.effective_peak_tflops);
  size_t i = 0;
  while (i < peaks_.size() && std::abs(peaks_[i] - peak) > 0.005 * std::max(peak, 1.0)) ++i;
  if (i == peaks_.size()) {
    if (peaks_.size() < kMaxMixes) {
      peaks_.push_back(peak);
      ofu_.emplace_back();
    } else {
      i = peaks_.size() - 1;
    }
  }
  ofu_[i].Add(w.ofu);
}

JobSteadyState SteadyStateSummarizer::Summary(std::string job_id) const {
  JobSteadyState s;
  s.job_id = std::move(job_id);
  int64_t best = -1;
  for (size_t i = 0; i < ofu_.size(); ++i) {
    if (ofu_[i].count() > best) {
      best = ofu_[i].count();
      s.steady_windows = ofu_[i].count();
      s.median_ofu = ofu_[i].Quantile(0.5);
      s.mad_ofu = ofu_[i].MedianAbsDeviation();
      s.effective_peak_tflops = peaks_[i];
    }
  }
  return s;
}

WorkloadBaseline::WorkloadBaseline(BaselineOptions options) : options_(options) {}

void WorkloadBaseline::AddJob(const JobSteadyState& job) {
  if (job.steady_windows < options_.min_steady_windows || job.median_ofu <= 0) return;
  jobs_.push_back(job);
  if (static_cast<int>(jobs_.size()) > options_.max_jobs) jobs_.pop_front();
}

std::optional<WorkloadBaseline::Level> WorkloadBaseline::level(double effective_peak_tflops) const {
  std::vector<const JobSteadyState*> use;
  if (effective_peak_tflops > 0) {
    for (const JobSteadyState& j : jobs_) {
      if (std::abs(j.effective_peak_tflops - effective_peak_tflops) <=
          0.01 * effective_peak_tflops) {
        use.push_back(&j);
      }
    }
  }
  if (static_cast<int>(use.size()) < options_.min_jobs) {
    use.clear();
    for (const JobSteadyState& j : jobs_) use.push_back(&j);
  }
  if (static_cast<int>(use.size()) < options_.min_jobs) return std::nullopt;
  std::vector<double> medians, peaks;
  for (const JobSteadyState* j : use) {
    medians.push_back(j->median_ofu);
    if (j->effective_peak_tflops > 0) peaks.push_back(j->effective_peak_tflops);
  }
  Level l;
  l.median_ofu = Median(medians);
  l.spread_ofu = kMadToSigma * MedianAbsDeviation(medians, l.median_ofu);
  l.jobs = static_cast<int>(use.size());
  l.effective_peak_tflops = peaks.empty() ? 0 : Median(peaks);
  return l;
}

NewJobComparator::NewJobComparator(WorkloadBaseline baseline, RegressionOptions warmup_options)
    : baseline_(std::move(baseline)),
      options_(baseline_.options()),
      min_coverage_(warmup_options.min_coverage),
      warmup_(warmup_options.warmup_lookback, warmup_options.warmup_rise,
              warmup_options.max_warmup_s) {}

std::optional<BaselineRegression> NewJobComparator::Add(const OfuWindow& w) {
  if (decided_ || w.gpu_coverage < min_coverage_ || !std::isfinite(w.ofu)) return std::nullopt;
  if (!warmup_.done()) {
    warmup_.Add(w);
    return std::nullopt;
  }
  const std::optional<WorkloadBaseline::Level> overall = baseline_.level();
  if (!overall) {
    decided_ = true;
    return std::nullopt;
  }
  // Checkpoints and stalls say nothing about the job's speed.
  if (w.ofu < overall->median_ofu * options_.dip_fraction) return std::nullopt;
  steady_.push_back(w);
  if (static_cast<int>(steady_.size()) < options_.first_steady_windows) return std::nullopt;
  decided_ = true;
  const double peak_after = MedianKnown(
      steady_, [](const OfuWindow& x) { return x.effective_peak_tflops; }, false);
  const WorkloadBaseline::Level baseline = *baseline_.level(std::max(0.0, peak_after));
  const double job_ofu = Median(Ofus(steady_));
  const double threshold = std::min(baseline.median_ofu / options_.min_factor,
                                    baseline.median_ofu - options_.spread_k * baseline.spread_ofu);
  if (!(job_ofu < threshold)) return std::nullopt;
  BaselineRegression r;
  r.onset_s = steady_.front().start_s;
  r.detected_s = w.end_s;
  r.baseline_ofu = baseline.median_ofu;
  r.job_ofu = job_ofu;
  r.factor = job_ofu > 0 ? baseline.median_ofu / job_ofu : INFINITY;
  r.baseline_jobs = baseline.jobs;
  // Precision: the baseline's effective peak stands in for the "before" windows.
  if (baseline.effective_peak_tflops > 0 && peak_after > 0) {
    const double q = peak_after / baseline.effective_peak_tflops;
    if (q > 1.01 && r.factor <= q * options_.precision_tolerance) {
      r.precision_switch = true;
      r.annotation = absl::StrFormat(
          "OFU %.1f%% is %.2fx below the %d earlier jobs of this workload (%.1f%%), but the job "
          "runs a faster precision mix (effective peak %.0f vs %.0f TFLOP/s, up to %.2fx): not "
          "a regression",
          job_ofu * 100, r.factor, r.baseline_jobs, r.baseline_ofu * 100, peak_after,
          baseline.effective_peak_tflops, q);
      return r;
    }
  }
  r.annotation = absl::StrFormat(
      "OFU %.1f%% from its first steady windows is %.2fx below the %d earlier jobs of this "
      "workload (%.1f%%): the job was slow from the start; look for debug settings or new "
      "collectives",
      job_ofu * 100, r.factor, r.baseline_jobs, r.baseline_ofu * 100);
  return r;
}

}  // namespace goodput::detect
