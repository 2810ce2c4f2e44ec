#pragma once
// Regression detectors over a job's OFU windows.
//
// InJobRegressionDetector finds a sustained drop inside one job (onset, before/after levels,
// factor) and ignores warm-up, checkpoint/evaluation dips and short stalls. WorkloadBaseline
// and NewJobComparator find a job that is bad from its start by comparing its first steady
// windows with earlier jobs of the same workload fingerprint (the 2.5x debug-flag case).
// Both are precision-aware: a drop that a change of the reported precision mix explains is
// annotated as a precision switch, not called a regression.
//
// Streaming: feed windows in time order, one at a time; memory is bounded by the options.
//
//   InJobRegressionDetector detector;
//   for (const OfuWindow& w : windows)
//     if (std::optional<RegressionEvent> e = detector.Add(w); e && e->is_regression()) ...

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "services/detect/robust_stats.h"

namespace goodput::detect {

struct StateCodec;  // state_codec.h: checkpoints of the detectors' state

// One OFU window of a job (fractions, not percent).
struct OfuWindow {
  int64_t start_s = 0;
  int64_t end_s = 0;
  // Job OFU over the GPUs that compute: GPUs idle all along are a separate finding (and the
  // framework's MFU does not count them either), so leave them out.
  double ofu = 0;
  double gpu_coverage = 1.0;  // windows below the option's min coverage are skipped
  // Effective dense peak (eq. 12) of the precision mix the framework reported for this window;
  // 0 when unknown. Only ratios of it matter.
  double effective_peak_tflops = 0;
  double app_mfu = -1;  // framework MFU for the window; negative when unknown
  // The framework marks its phases (the SDK's checkpoint, evaluation, warm-up and compilation
  // markers): a low window outside a marked phase is none of them.
  bool phases_marked = false;
  // The window lies (partly) in a phase the framework marked: no evidence of the job's speed.
  bool in_marked_phase = false;
};

struct RegressionOptions {
  double min_factor = 1.35;       // smallest sustained drop (before/after) reported
  int test_windows = 10;          // persistence window (10 x 60 s windows = 10 min)
  double persistence = 0.8;       // share of the test windows that must be low
  double level_band = 1.3;        // low windows within this factor of their median form a level
  int reference_windows = 60;     // reference level = median of up to this many windows
  int min_reference_windows = 5;  // no decision before this many reference windows
  double mad_k = 5.0;             // drop must also exceed k x robust sigma of the reference
  double min_drop = 0.01;         // and be at least this much OFU (1 pp)
  double min_coverage = 0.5;      // windows with fewer GPUs reporting are skipped
  double dip_fraction = 0.2;      // below this share of the level a window is a dip
  int stall_windows = 20;         // this many dips in a row (all but one): a stall
  int warmup_lookback = 5;        // warm-up ends when the level stops rising over this
  double warmup_rise = 1.05;      // "still rising" = recent median above previous x this
  int64_t max_warmup_s = 1800;    // warm-up never lasts longer than this
  double recovery_factor = 1.25;  // after a drop, a rise back to within this of before
  // A drop explained by a precision switch: the effective peak rose by q and OFU fell by at
  // most q x this tolerance, and MFU moved with OFU within this tolerance.
  double precision_tolerance = 1.12;
  // Fast confirmation of deep drops (services/alerting/README.md, "Deep drops and transient slowdowns"): a run
  // of consecutive low windows at one level at least deep_factor below the reference is
  // confirmed after fast_windows when the framework marks its phases (an unmarked drop is no
  // phase); otherwise after unseen_phase_windows, or the longest low phase the job has shown
  // and recovered from plus phase_margin_windows when that is longer.
  double deep_factor = 1.8;  // a 2x drop qualifies through 10% noise
  int fast_windows = 3;           // the onset's partial window counts
  int unseen_phase_windows = 7;   // a 5-minute evaluation pass, plus its two edge windows
  int phase_margin_windows = 2;
  int max_phase_windows = 12;     // longer recovered runs are not phases
  // A low run that recovers before it is confirmed, at least this many windows long and
  // min_factor deep, is a transient slowdown (kTransient).
  int min_transient_windows = 2;
};

struct RegressionEvent {
  // kTransient: a low run that recovered before it was confirmed (onset_s..detected_s, its
  // depth in factor); recorded, never an alert.
  enum class Kind { kDrop, kRecovery, kTransient };
  Kind kind = Kind::kDrop;
  int64_t onset_s = 0;            // start of the first low (or recovered) window
  int64_t detected_s = 0;         // end of the window that confirmed it
  double before_ofu = 0;          // reference level (median)
  double after_ofu = 0;           // level since onset (median)
  double factor = 0;              // before / after for a drop, after / before for recovery
  bool precision_switch = false;  // explained by a change of precision mix
  bool stalled = false;           // the job stopped computing (dips for stall_windows)
  int low_windows = 0;            // kTransient, and drops confirmed fast: the run's windows
  bool fast = false;              // confirmed by the run rule (deep drop), not persistence
  double effective_peak_before_tflops = 0;
  double effective_peak_after_tflops = 0;
  std::string annotation;  // one sentence for a human
  bool is_regression() const { return kind == Kind::kDrop && !precision_switch; }
};

// Tells when a job's warm-up is over: the first point at which the OFU level stops rising.
class WarmupTracker {
  friend struct StateCodec;

 public:
  explicit WarmupTracker(int lookback, double rise, int64_t max_warmup_s);
  // Feeds a window; returns true once warm-up is over (and stays true).
  bool Add(const OfuWindow& w);
  bool done() const { return done_; }

 private:
  int lookback_;
  double rise_;
  int64_t max_warmup_s_;
  std::deque<double> recent_;
  int64_t first_start_s_ = -1;
  bool done_ = false;
};

// Decides whether a drop from `before` to `after` windows is explained by a switch of precision
// mix. Fills the event's precision fields and annotation; returns whether it is explained.
bool ExplainByPrecisionSwitch(const std::vector<OfuWindow>& before,
                              const std::vector<OfuWindow>& after, double ofu_drop_factor,
                              double tolerance, RegressionEvent& event);

// Change-point detector inside one job.
//
// Method: robust two-window test with persistence over the job's computing windows. Windows
// below dip_fraction of the reference level (checkpoints, stalls: the job is barely computing)
// are set aside, and a run of stall_windows of them is reported as a stall. Over the remaining
// windows, the reference level is the median of the last `reference_windows` windows before a
// `test_windows` window; a drop is declared when at least `persistence` of the test windows
// sit below reference / min_factor (and below reference - k x 1.4826 MAD) at one level
// (within level_band of each other). The level before, the level after, the onset (first
// window at the new level) and the factor are reported; a later rise back is a recovery.
// Why this and not the alternatives, on the phenomena:
// - Checkpoint dips and stalls are short, deep excursions (OFU near 0 for 1-6 minutes).
//   CUSUM on (log) OFU integrates them — one 3-minute dip to ~0 adds as much evidence as 30
//   minutes of a 1.3x drop — so it needs clipping and a drift tuned per job. Setting dips
//   aside removes them by what they are (no computing), whatever their length or period.
// - Evaluation passes are shallower (~40% of steady) and last a few minutes: a drop has to
//   hold for 8 of 10 computing minutes at one new level (the low windows within level_band
//   of their median), which an evaluation pass, even next to a checkpoint or stall whose
//   edges cut windows to assorted levels, does not. The same rule detects the target — drops
//   >= 1.5x lasting >= 10 minutes — within about 8-10 minutes of onset.
// - Medians keep dips and outliers out of the reference without a noise model. Bayesian
//   online change points need a likelihood; OFU's is heavy-tailed (dips) and per-job, and a
//   misfit model produces change points at every dip. E-divisive means (Otava) is offline and
//   O(n^2) per update.
// - The threshold is a factor, the unit alerts speak in; memory is bounded by the windows.
class InJobRegressionDetector {
  friend struct StateCodec;

 public:
  explicit InJobRegressionDetector(RegressionOptions options = {});
  // Feeds the next window (time order). Returns an event when a drop (or, after a drop, a
  // recovery) is confirmed; at most one event per window.
  std::optional<RegressionEvent> Add(const OfuWindow& w);
  bool warmed_up() const { return warmup_.done(); }
  // Current reference level (median), 0 before enough windows.
  double reference_level() const;
  // Windows a deep drop must hold before it is confirmed, from what the job has shown.
  int deep_drop_windows() const;
  // Longest low run (windows) the job recovered from without a confirmed drop; 0 if none.
  int longest_phase_windows() const { return longest_phase_windows_; }

 private:
  // The reference level (median), the drop margin (k x robust sigma, at least min_drop) and
  // the threshold below which a window is low; nullopt before min_reference_windows.
  struct Reference {
    double level = 0;
    double margin = 0;
    double low = 0;
  };
  std::optional<Reference> CurrentReference() const;
  std::optional<RegressionEvent> Evaluate(const OfuWindow& latest, const Reference& ref);
  // The run rule: feeds a computing window into the current low run; returns a confirmed deep
  // drop, or the transient slowdown of a run that just recovered.
  std::optional<RegressionEvent> TrackRun(const OfuWindow& w, const Reference& ref);
  // Reports the drop to `after` (the windows since its onset, among the last `of_windows`)
  // and restarts from them.
  std::optional<RegressionEvent> Confirm(const std::vector<OfuWindow>& after, double level,
                                         double after_level, const OfuWindow& latest,
                                         int of_windows);
  void Restart(const std::vector<OfuWindow>& seed);

  RegressionOptions options_;
  WarmupTracker warmup_;
  std::deque<OfuWindow> reference_;
  std::deque<OfuWindow> test_;
  std::deque<bool> recent_dips_;  // dip flags of the last stall_windows windows
  bool stall_open_ = false;       // a stall was reported and the job has not resumed
  // Level before the last reported drop, for recovery; 0 when no drop is open.
  double open_drop_before_ = 0;
  // The drop rule held at the previous computing window: it must hold at two in a row, so
  // that phases back to back (evaluation passes around a checkpoint, whose edges cut windows
  // to assorted levels) do not make a level change of their eight or nine slow minutes.
  bool drop_pending_ = false;
  // The current run of consecutive low computing windows (dips neither extend nor end it),
  // at most max_phase_windows + fast_windows of them (a dip ends it); whether a drop was
  // confirmed in it.
  std::deque<OfuWindow> run_;
  bool run_confirmed_ = false;
  int longest_phase_windows_ = 0;
  bool phases_marked_ = false;  // the framework has marked its phases
};

// Steady-state summary of one finished (or running) job, for workload baselines.
struct JobSteadyState {
  std::string job_id;
  double median_ofu = 0;
  double mad_ofu = 0;
  int64_t steady_windows = 0;
  double effective_peak_tflops = 0;  // median reported effective peak, 0 if unknown
};

// Streams a job's windows into its steady-state summary in fixed memory (warm-up excluded).
// Windows are summarized per reported precision mix (effective peak): the summary is the
// precision mix the job ran longest, so a BF16-only debugging phase does not shift it.
class SteadyStateSummarizer {
  friend struct StateCodec;

 public:
  explicit SteadyStateSummarizer(const RegressionOptions& options = {});
  void Add(const OfuWindow& w);
  // Stops taking windows: call on a confirmed regression, so the summary describes the job
  // as it ran before (a baseline of regressed runs would hide the next regression).
  void Freeze() { frozen_ = true; }
  JobSteadyState Summary(std::string job_id) const;

 private:
  static constexpr size_t kMaxMixes = 4;  // further mixes share the last histogram
  double min_coverage_;
  WarmupTracker warmup_;
  std::vector<double> peaks_;  // effective peak per histogram (0 = unknown)
  std::vector<FractionHistogram> ofu_;
  bool frozen_ = false;
};

struct BaselineOptions {
  int min_jobs = 2;                 // fewer earlier jobs -> no baseline
  int max_jobs = 20;                // most recent jobs kept per fingerprint
  int64_t min_steady_windows = 10;  // earlier jobs shorter than this are not used
  double min_factor = 1.3;          // new job flagged when baseline / new >= this
  double spread_k = 3.0;            // and new < baseline - k x spread
  // Decide from this many steady computing windows of the new job: long enough that an
  // evaluation pass among them does not move their median.
  int first_steady_windows = 15;
  double dip_fraction = 0.2;  // windows below this share of the baseline are dips
  double precision_tolerance = 1.12;
};

// Baseline level of one workload fingerprint: median of earlier jobs' steady medians.
class WorkloadBaseline {
  friend struct StateCodec;

 public:
  explicit WorkloadBaseline(BaselineOptions options = {});
  void AddJob(const JobSteadyState& job);
  struct Level {
    double median_ofu = 0;
    double spread_ofu = 0;  // 1.4826 x MAD of the job medians (robust sd)
    int jobs = 0;
    double effective_peak_tflops = 0;  // median over jobs that reported one, 0 otherwise
  };
  // The baseline, or nullopt with fewer than min_jobs usable jobs. With a positive
  // `effective_peak_tflops`, only jobs that ran that precision mix (within 1%) count, when
  // there are min_jobs of them.
  std::optional<Level> level(double effective_peak_tflops = 0) const;
  const BaselineOptions& options() const { return options_; }

 private:
  BaselineOptions options_;
  std::deque<JobSteadyState> jobs_;
};

// Compares a new job's first steady windows with its workload's baseline.
struct BaselineRegression {
  int64_t onset_s = 0;  // start of the job's first steady window
  int64_t detected_s = 0;
  double baseline_ofu = 0;
  double job_ofu = 0;
  double factor = 0;  // baseline / job
  int baseline_jobs = 0;
  bool precision_switch = false;
  std::string annotation;
  bool is_regression() const { return !precision_switch; }
};

class NewJobComparator {
  friend struct StateCodec;

 public:
  // `baseline` must have a level(); it is copied (at most max_jobs summaries).
  NewJobComparator(WorkloadBaseline baseline, RegressionOptions warmup_options = {});
  // Feeds the job's next window. Returns a finding once, when the first steady windows are
  // in and they are well below the baseline (also when explained by a precision switch,
  // annotated). Returns nullopt otherwise; decided() tells when the comparison is over.
  std::optional<BaselineRegression> Add(const OfuWindow& w);
  bool decided() const { return decided_; }

 private:
  WorkloadBaseline baseline_;
  BaselineOptions options_;
  double min_coverage_;
  WarmupTracker warmup_;
  std::vector<OfuWindow> steady_;
  bool decided_ = false;
};

}  // namespace goodput::detect
