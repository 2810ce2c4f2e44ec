#include "tools/fleetsim/evaluation.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <set>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "services/alerting/alert_lifecycle.h"
#include "services/alerting/job_evaluator.h"
#include "services/core/mfu.h"
#include "services/core/ofu.h"
#include "services/detect/robust_stats.h"

namespace goodput::sim {
namespace {

using detect::Cause;
using detect::Verdict;

// The verdict and top cause a job's miscount should produce.
std::pair<Verdict, Cause> Expected(Miscount m) {
  switch (m) {
    case Miscount::kNone:
      return {Verdict::kConsistent, Cause::kTileQuantization};
    case Miscount::kMoeLatentProjection:
      return {Verdict::kAppFlopsOvercount, Cause::kLatentProjectionMoe};
    case Miscount::kLayerTypes:
      return {Verdict::kAppFlopsOvercount, Cause::kLayerTypesAsAttentionMlp};
    case Miscount::kRecomputeNotCounted:
      return {Verdict::kAppFlopsUndercount, Cause::kRecomputeNotCounted};
    case Miscount::kDoubled:
      return {Verdict::kAppFlopsOvercount, Cause::kDoubledFlopsOrHalfPeak};
    case Miscount::kHalved:
      return {Verdict::kAppFlopsUndercount, Cause::kHalvedFlopsOrDoublePeak};
  }
  return {Verdict::kConsistent, Cause::kTileQuantization};
}

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  return v[i];
}

// One delivery's view of a job: alerting's detector state, the windows not yet delivered,
// and the alerts it holds.
struct DeliveryState {
  std::unique_ptr<alerting::JobEvaluator> evaluator;
  std::vector<alerting::JobWindow> pending;
  std::map<std::string, alerting::OpenAlertRef> open;  // by fingerprint
  std::set<std::pair<std::string, int64_t>> recorded;  // (fingerprint, onset)
  std::vector<bool> drop_matched;
  bool debug_found = false;
  bool miscount_found = false;
};

// What the services do for one job, fed from the simulator's stream.
struct JobState {
  const JobTruth* job = nullptr;
  detect::InJobRegressionDetector in_job;
  std::optional<detect::NewJobComparator> comparator;
  detect::SteadyStateSummarizer summarizer;
  detect::GpuFindingsTracker findings;
  std::vector<detect::PairedWindow> paired;
  std::vector<bool> drop_matched;
  bool debug_found = false;
  bool flagged_against_baseline = false;
  detect::WorkloadBaseline::Level comparator_baseline_level;
  // The window being assembled: samples and truth first, then the MFU report.
  bool pending = false;
  detect::OfuWindow window;
  double active_ofu = 0;
  double ofu_ci95_half = 0;
  DeliveryState delivery[kDeliveryModes];
  double last_peak_tflops = 0;  // of the reported precision mix, for mfu's switch events
  JobState(const JobTruth* j, const EvaluationOptions& o)
      : job(j),
        in_job(o.regression),
        summarizer(o.regression),
        findings(j->gpu_count, o.findings),
        drop_matched(j->drops.size(), false) {}
};

class EvaluationSink : public FleetSink {
 public:
  EvaluationSink(const EvaluationOptions& options, EvaluationResult& result)
      : options_(options), result_(result) {}

  void OnJobStart(const JobTruth& job) override {
    auto state = std::make_unique<JobState>(&job, options_);
    auto it = baselines_.find(job.workload);
    if (it != baselines_.end()) {
      if (auto level = it->second.level()) {
        state->comparator.emplace(it->second, options_.regression);
        state->comparator_baseline_level = *level;
      }
    }
    alerting::DetectorOptions detector_options;
    detector_options.regression = options_.regression;
    detector_options.baseline = options_.baseline;
    detector_options.findings = options_.findings;
    const std::vector<alerting::EarlierJob>& earlier = earlier_jobs_[job.workload];
    for (DeliveryState& d : state->delivery) {
      d.evaluator = std::make_unique<alerting::JobEvaluator>(detector_options, earlier);
      d.drop_matched.assign(job.drops.size(), false);
    }
    ++result_.jobs;
    const double hours = static_cast<double>(job.end_s - job.start_s) / 3600;
    result_.job_hours += hours;
    result_.gpu_hours += hours * job.gpu_count;
    result_.precision_switches += static_cast<int>(job.precision.size()) - 1;
    if (job.debug_flag) {
      ++result_.debug_jobs;
      if (state->comparator) ++result_.debug_jobs_with_baseline;
    }
    for (const InjectedDrop& d : job.drops) {
      if (d.factor >= options_.eligible_min_factor &&
          d.end_s - d.onset_s >= options_.eligible_min_duration_s) {
        ++result_.drops_eligible;
      } else if (d.factor >= options_.eligible_min_factor && d.end_s - d.onset_s >= 120) {
        ++result_.short_drops;
      }
    }
    jobs_[job.index] = std::move(state);
  }

  void OnSamples(const JobTruth& job, int64_t start_s, int64_t end_s,
                 const std::vector<GpuSample>& samples) override {
    JobState& s = *jobs_.at(job.index);
    Flush(s);
    // Per-GPU series for the core library's window, plus SM activity for the findings.
    core::JobOfuWindowInput in;
    in.window_start_ms = start_s * 1000;
    in.window_end_ms = end_s * 1000;
    in.allocated_gpu_count = job.gpu_count;
    std::vector<int> series_of_gpu(job.gpu_count, -1);
    std::vector<double> sm_sum(job.gpu_count, 0);
    std::vector<int> sm_n(job.gpu_count, 0);
    for (const GpuSample& x : samples) {
      int& idx = series_of_gpu[x.gpu_index];
      if (idx < 0) {
        idx = static_cast<int>(in.gpus.size());
        in.gpus.push_back({x.uuid, {}});
      }
      in.gpus[idx].samples.push_back({x.timestamp_ms, x.tensor_active, x.sm_clock_mhz});
      sm_sum[x.gpu_index] += x.sm_active;
      ++sm_n[x.gpu_index];
    }
    absl::StatusOr<core::JobOfuWindow> w = core::ComputeJobOfuWindow(*job.spec, in);
    if (!w.ok() || !w->stats.mean_ofu) return;
    std::vector<detect::GpuWindowValue> per_gpu(job.gpu_count, {0, 0, false});
    double active_sum = 0;
    int64_t active_n = 0;
    for (int g = 0; g < job.gpu_count; ++g) {
      const int idx = series_of_gpu[g];
      if (idx < 0) continue;
      const core::GpuOfuWindow& gw = w->per_gpu[idx];
      if (!gw.stats.mean_ofu) continue;
      const double sm = sm_sum[g] / sm_n[g];
      per_gpu[g] = {*gw.stats.mean_ofu, sm, true};
      // The framework's world excludes GPUs it does not use: pair MFU with those only.
      if (sm >= options_.findings.idle_activity) {
        active_sum += *gw.stats.mean_ofu * static_cast<double>(gw.stats.sample_count);
        active_n += gw.stats.sample_count;
      }
    }
    s.findings.AddWindow(start_s, end_s, per_gpu);
    s.pending = true;
    s.window = {};
    s.window.start_s = start_s;
    s.window.end_s = end_s;
    s.active_ofu = active_n > 0 ? active_sum / static_cast<double>(active_n) : 0;
    s.window.ofu = s.active_ofu;
    s.window.gpu_coverage = w->gpu_coverage;
    s.ofu_ci95_half = w->stats.ci95_half_width.value_or(0);
    last_measured_ = *w->stats.mean_ofu;
    last_ci_ = s.ofu_ci95_half;
    have_measured_ = true;
  }

  void OnWindowTruth(const JobTruth& job, int64_t, int64_t, double true_ofu) override {
    if (!have_measured_) return;
    have_measured_ = false;
    const double err = std::abs(last_measured_ - true_ofu) * 100;
    errors_pp_.push_back(err);
    if (std::abs(last_measured_ - true_ofu) <= last_ci_) ++ci_hits_;
  }

  void OnMfuReport(const JobTruth& job, const MfuReport& report) override {
    JobState& s = *jobs_.at(job.index);
    if (!s.pending || report.start_s != s.window.start_s) return;
    // Interpret the report in the form the framework sent, as the mfu service does.
    core::MfuReport in;
    if (report.form == "tflops_per_gpu") {
      in.tflops_per_gpu = report.tflops_per_gpu;
    } else if (report.form == "total_tflops") {
      in.total_tflops = report.total_tflops;
      in.gpu_count = report.gpu_count;
    } else if (report.form == "flops_per_step") {
      in.flops_per_step = report.flops_per_step;
      in.step_time_s = report.step_time_s;
      in.gpu_count = report.gpu_count;
    } else {
      in.mfu_fraction = report.mfu;
    }
    in.precision_mix.push_back({core::Precision::kBf16, 1 - report.fp8_share});
    if (report.fp8_share > 0) in.precision_mix.push_back({core::Precision::kFp8, report.fp8_share});
    absl::StatusOr<core::MfuResult> mfu = core::ComputeMfu(*job.spec, in);
    if (!mfu.ok()) return;
    absl::StatusOr<double> peak = core::EffectivePeakTflops(*job.spec, in.precision_mix);
    s.window.app_mfu = mfu->mfu_fraction;
    s.window.effective_peak_tflops = peak.value_or(0);
    s.paired.push_back({report.start_s, report.end_s, std::min(1.5, mfu->mfu_fraction),
                        std::min(1.5, s.active_ofu), s.ofu_ci95_half, s.window.gpu_coverage});
    Flush(s);
  }

  void OnJobEnd(const JobTruth& job) override {
    JobState& s = *jobs_.at(job.index);
    Flush(s);
    // Baseline for later jobs of the workload.
    // A job found bad against its workload does not join the workload's baseline.
    if (!s.flagged_against_baseline) {
      auto [it, inserted] = baselines_.try_emplace(job.workload, options_.baseline);
      it->second.AddJob(s.summarizer.Summary(job.job_id));
      std::vector<alerting::EarlierJob>& earlier = earlier_jobs_[job.workload];
      earlier.insert(earlier.begin(),
                     {job.job_id, job.end_s, s.summarizer.Summary(job.job_id)});
      if (static_cast<int>(earlier.size()) > options_.baseline.max_jobs) earlier.pop_back();
    }
    for (size_t i = 0; i < job.drops.size(); ++i) {
      const InjectedDrop& d = job.drops[i];
      if (!s.drop_matched[i] && d.factor >= options_.eligible_min_factor &&
          d.end_s - d.onset_s >= options_.eligible_min_duration_s) {
        Note(absl::StrFormat("missed drop job %s %.2fx at +%ds for %ds (ckpt %d/%ds)", job.job_id,
                             d.factor, d.onset_s - job.start_s, d.end_s - d.onset_s,
                             job.checkpoint_period_s, job.checkpoint_s));
      }
    }
    if (job.debug_flag && s.comparator && !s.debug_found) {
      const auto level = s.comparator_baseline_level;
      Note(absl::StrFormat("missed debug-flag job %s %.2fx (%s), baseline %.3f spread %.3f jobs %d",
                           job.job_id, job.debug_factor, job.workload, level.median_ofu,
                           level.spread_ofu, level.jobs));
    }
    // Divergence verdict.
    std::optional<alerting::DivergenceObs> verdict;
    if (job.reports_mfu) {
      absl::StatusOr<detect::DivergenceResult> r =
          detect::ClassifyDivergence(s.paired, options_.divergence);
      if (r.ok() && !s.paired.empty()) {
        alerting::DivergenceObs obs;
        obs.time_s = job.end_s;
        obs.interval_start_s = s.paired.front().start_s;
        obs.interval_end_s = s.paired.back().end_s;
        obs.verdict = std::string(detect::VerdictName(r->verdict));
        obs.ratio = r->ratio;
        obs.confidence = r->confidence;
        verdict = obs;
      }
      VerdictTally& t = result_.verdicts[MiscountName(job.miscount)];
      ++t.jobs;
      if (r.ok()) {
        const auto [verdict, cause] = Expected(job.miscount);
        if (r->verdict == Verdict::kInsufficientEvidence) ++t.insufficient;
        if (r->verdict == verdict) {
          ++t.right_verdict;
          if (job.miscount == Miscount::kNone ||
              (!r->causes.empty() && r->causes[0].cause == cause)) {
            ++t.right_cause;
          }
        }
      }
    }
    // The job's last windows and mfu's verdict reach alerting: before EndJob, or after it.
    for (int m = 0; m < kDeliveryModes; ++m) {
      DeliveryState& d = s.delivery[m];
      for (const alerting::JobWindow& w : d.pending) d.evaluator->AddWindow(w);
      d.pending.clear();
      if (verdict) d.evaluator->SetDivergence(*verdict);
      Apply(s, static_cast<Delivery>(m), /*job_active=*/m != static_cast<int>(Delivery::kEarlyEnd));
      DeliveryTally& t = result_.delivery[m];
      if (job.reports_mfu && job.miscount != Miscount::kNone) {
        ++t.miscount_jobs;
        if (d.miscount_found) ++t.miscounts_found;
      }
    }

    // Findings.
    std::vector<int> idle_found, slow_found;
    for (const detect::GpuFinding& f : s.findings.Findings()) {
      (f.kind == detect::GpuFinding::Kind::kIdle ? idle_found : slow_found).push_back(f.gpu_index);
    }
    auto score = [](const std::vector<int>& truth, const std::vector<int>& found, int& injected,
                    int& hit, int& wrong) {
      injected += static_cast<int>(truth.size());
      for (int g : found) {
        if (std::find(truth.begin(), truth.end(), g) != truth.end()) {
          ++hit;
        } else {
          ++wrong;
        }
      }
    };
    score(job.idle_gpus, idle_found, result_.idle_injected, result_.idle_found, result_.idle_false);
    score(job.straggler_gpus, slow_found, result_.straggler_injected, result_.straggler_found,
          result_.straggler_false);
    jobs_.erase(job.index);
  }

  void Finish() {
    result_.ofu_windows = static_cast<int64_t>(errors_pp_.size());
    if (!errors_pp_.empty()) {
      double sum = 0;
      for (double e : errors_pp_) sum += e;
      result_.ofu_abs_error_mean_pp = sum / static_cast<double>(errors_pp_.size());
      result_.ofu_abs_error_p95_pp = Quantile(errors_pp_, 0.95);
      result_.ofu_abs_error_max_pp = *std::max_element(errors_pp_.begin(), errors_pp_.end());
      result_.ofu_ci_coverage =
          static_cast<double>(ci_hits_) / static_cast<double>(errors_pp_.size());
    }
  }

 private:
  // Applies alerting's lifecycle to what one delivery's detector state found, and scores the
  // alerts it opens or records.
  void Apply(JobState& s, Delivery delivery, bool job_active) {
    const JobTruth& job = *s.job;
    DeliveryState& d = s.delivery[static_cast<int>(delivery)];
    DeliveryTally& t = result_.delivery[static_cast<int>(delivery)];
    alerting::LifecycleInput in;
    in.job_active = job_active;
    in.kinds = {alerting::Kind::kRegressionInJob, alerting::Kind::kRegressionVsWorkload,
                alerting::Kind::kDivergence};
    in.holding = d.evaluator->current();
    in.ended = d.evaluator->TakeEnded();
    std::vector<alerting::OpenAlertRef> open;
    for (const auto& [fp, ref] : d.open) open.push_back(ref);
    for (const alerting::Decision& dec :
         alerting::DecideLifecycle("sim", job.job_id, in, open)) {
      switch (dec.action) {
        case alerting::Decision::Action::kUpdate:
          break;
        case alerting::Decision::Action::kResolve:
          d.open.erase(dec.fingerprint);
          break;
        case alerting::Decision::Action::kOpen:
          d.open[dec.fingerprint] = {++next_alert_id_, dec.fingerprint, dec.finding->kind};
          Score(s, delivery, *dec.finding);
          break;
        case alerting::Decision::Action::kRecordResolved:
          if (!d.recorded.insert({dec.fingerprint, dec.finding->onset_s}).second) break;
          ++t.recorded_resolved;
          if (dec.found_after_job_end) ++t.found_after_end;
          Score(s, delivery, *dec.finding);
          break;
      }
    }
  }

  void Score(JobState& s, Delivery delivery, const alerting::Finding& f) {
    const JobTruth& job = *s.job;
    DeliveryState& d = s.delivery[static_cast<int>(delivery)];
    DeliveryTally& t = result_.delivery[static_cast<int>(delivery)];
    if (f.kind == alerting::Kind::kRegressionInJob) {
      for (size_t i = 0; i < job.drops.size(); ++i) {
        const InjectedDrop& drop = job.drops[i];
        if (f.onset_s >= drop.onset_s - options_.match_slack_s &&
            f.onset_s <= drop.end_s + options_.match_slack_s / 3) {
          if (!d.drop_matched[i]) {
            d.drop_matched[i] = true;
            if (drop.factor >= options_.eligible_min_factor &&
                drop.end_s - drop.onset_s >= options_.eligible_min_duration_s) {
              ++t.drops_detected;
            }
          }
          return;
        }
      }
      ++t.false_alarms;
      Note(absl::StrFormat("false alarm (in job, delivery %d) job %s onset +%ds",
                           static_cast<int>(delivery), job.job_id, f.onset_s - job.start_s));
    } else if (f.kind == alerting::Kind::kRegressionVsWorkload) {
      if (!job.debug_flag) {
        ++t.false_alarms;
      } else if (!d.debug_found) {
        d.debug_found = true;
        if (s.comparator) ++t.debug_detected;
      }
    } else if (f.kind == alerting::Kind::kDivergence && f.divergence) {
      const Verdict expected = Expected(job.miscount).first;
      if (job.miscount != Miscount::kNone && f.divergence->verdict == std::string(detect::VerdictName(expected))) {
        d.miscount_found = true;
      } else {
        ++t.miscount_false;
      }
    }
  }

  // The assembled window reaches alerting as each delivery brings it: ofu's job-level window
  // (no framework MFU in it) and, when the reported precision mix changed, mfu's switch event.
  void Deliver(JobState& s) {
    const detect::OfuWindow& w = s.window;
    alerting::JobWindow jw;
    jw.window = w;
    jw.window.effective_peak_tflops = 0;
    jw.window.app_mfu = -1;
    jw.gpus_allocated = s.job->gpu_count;
    jw.gpus_reporting = s.job->gpu_count;
    std::optional<alerting::PrecisionSwitchObs> change;
    if (w.effective_peak_tflops > 0) {
      if (s.last_peak_tflops > 0 &&
          std::abs(w.effective_peak_tflops - s.last_peak_tflops) > 0.005 * s.last_peak_tflops) {
        change = alerting::PrecisionSwitchObs{w.start_s, s.last_peak_tflops,
                                              w.effective_peak_tflops};
      }
      s.last_peak_tflops = w.effective_peak_tflops;
    }
    for (int m = 0; m < kDeliveryModes; ++m) {
      DeliveryState& d = s.delivery[m];
      if (change) d.evaluator->AddPrecisionSwitch(*change);
      if (m == static_cast<int>(Delivery::kLive)) {
        d.evaluator->AddWindow(jw);
        Apply(s, Delivery::kLive, true);
        continue;
      }
      d.pending.push_back(jw);
      if (static_cast<int>(d.pending.size()) >= kBurstWindows) {
        for (const alerting::JobWindow& p : d.pending) d.evaluator->AddWindow(p);
        d.pending.clear();
        Apply(s, static_cast<Delivery>(m), true);
      }
    }
  }

  // Runs the detectors on the assembled window.
  void Flush(JobState& s) {
    if (!s.pending) return;
    s.pending = false;
    const JobTruth& job = *s.job;
    const detect::OfuWindow& w = s.window;
    Deliver(s);
    if (job.job_id == options_.trace_job_id) {
      result_.notes.push_back(absl::StrFormat(
          "trace %s %s +%dmin ofu=%.4f mfu=%.4f peak=%.0f level=%.4f", job.job_id,
          result_.config_name, (w.start_s - job.start_s) / 60, w.ofu, w.app_mfu,
          w.effective_peak_tflops, JobLevelAt(job, static_cast<double>(w.start_s) + 30)));
    }
    s.summarizer.Add(w);
    if (s.comparator && !s.comparator->decided()) {
      if (std::optional<detect::BaselineRegression> r = s.comparator->Add(w)) {
        if (r->is_regression()) s.flagged_against_baseline = true;
        if (r->precision_switch) {
          ++result_.precision_annotations;
        } else if (job.debug_flag) {
          ++result_.debug_detected;
          s.debug_found = true;
          result_.debug_delays_s.push_back(static_cast<double>(r->detected_s - job.start_s));
        } else {
          ++result_.false_alarms_baseline;
          Note(absl::StrFormat("false alarm (baseline) job %s %s: %s", job.job_id, job.workload,
                               r->annotation));
        }
      }
    }
    if (std::optional<detect::RegressionEvent> e = s.in_job.Add(w)) {
      if (e->kind == detect::RegressionEvent::Kind::kTransient) {
        ++result_.transients_recorded;
        for (const InjectedDrop& d : job.drops) {
          if (e->onset_s < d.end_s && e->detected_s > d.onset_s) {
            ++result_.transients_on_injected;
            break;
          }
        }
        return;
      }
      if (e->kind != detect::RegressionEvent::Kind::kDrop) return;
      if (e->precision_switch) {
        ++result_.precision_annotations;
        return;
      }
      s.summarizer.Freeze();
      bool matched = false;
      for (size_t i = 0; i < job.drops.size(); ++i) {
        const InjectedDrop& d = job.drops[i];
        if (e->onset_s >= d.onset_s - options_.match_slack_s &&
            e->onset_s <= d.end_s + options_.match_slack_s / 3) {
          if (!s.drop_matched[i]) {
            s.drop_matched[i] = true;
            if (d.factor >= options_.eligible_min_factor &&
                d.end_s - d.onset_s >= options_.eligible_min_duration_s) {
              ++result_.drops_detected;
              result_.drop_delays_s.push_back(static_cast<double>(e->detected_s - d.onset_s));
              result_.drop_factors.push_back(d.factor);
            }
          }
          matched = true;
          break;
        }
      }
      if (!matched) {
        ++result_.false_alarms_in_job;
        Note(absl::StrFormat(
            "false alarm (in job) job %s at +%ds (onset +%ds, warmup %ds, ckpt %d/%ds, stalls %d, "
            "precision phases %d, drops %d): %s",
            job.job_id, e->detected_s - job.start_s, e->onset_s - job.start_s, job.warmup_s,
            job.checkpoint_period_s, job.checkpoint_s, job.stalls.size(), job.precision.size(),
            job.drops.size(), e->annotation));
      }
    }
  }

  void Note(std::string note) {
    if (result_.notes.size() < 400) {
      result_.notes.push_back(
          absl::StrCat("[", result_.config_name, " s", result_.seed, "] ", note));
    }
  }

  const EvaluationOptions& options_;
  EvaluationResult& result_;
  absl::flat_hash_map<int, std::unique_ptr<JobState>> jobs_;
  absl::flat_hash_map<std::string, detect::WorkloadBaseline> baselines_;
  // The same, as alerting reads it: earlier jobs of each workload, most recent first.
  absl::flat_hash_map<std::string, std::vector<alerting::EarlierJob>> earlier_jobs_;
  int64_t next_alert_id_ = 0;
  std::vector<double> errors_pp_;
  int64_t ci_hits_ = 0;
  double last_measured_ = 0, last_ci_ = 0;
  bool have_measured_ = false;
};

}  // namespace

double EvaluationResult::Recall() const {
  const int eligible = drops_eligible + debug_jobs_with_baseline;
  return eligible == 0 ? 1.0 : static_cast<double>(drops_detected + debug_detected) / eligible;
}

double EvaluationResult::FalseAlarmsPer1000JobHours() const {
  return job_hours <= 0 ? 0 : (false_alarms_in_job + false_alarms_baseline) * 1000.0 / job_hours;
}

double EvaluationResult::MedianDelayS() const { return Quantile(drop_delays_s, 0.5); }
double EvaluationResult::P95DelayS() const { return Quantile(drop_delays_s, 0.95); }

absl::StatusOr<EvaluationResult> EvaluateFleet(const FleetConfig& config,
                                               const EvaluationOptions& options) {
  absl::StatusOr<std::unique_ptr<FleetSimulator>> sim = FleetSimulator::Create(config);
  if (!sim.ok()) return sim.status();
  EvaluationResult result;
  result.config_name = config.name;
  result.window_s = config.window_s;
  result.seed = config.seed;
  EvaluationSink sink(options, result);
  while ((*sim)->Step(sink)) {
  }
  sink.Finish();
  return result;
}

EvaluationResult CombineResults(const std::vector<EvaluationResult>& results,
                                const std::string& name) {
  EvaluationResult c;
  c.config_name = name;
  double err_sum = 0, ci_sum = 0;
  for (const EvaluationResult& r : results) {
    c.jobs += r.jobs;
    c.job_hours += r.job_hours;
    c.gpu_hours += r.gpu_hours;
    c.drops_eligible += r.drops_eligible;
    c.drops_detected += r.drops_detected;
    c.drop_delays_s.insert(c.drop_delays_s.end(), r.drop_delays_s.begin(), r.drop_delays_s.end());
    c.drop_factors.insert(c.drop_factors.end(), r.drop_factors.begin(), r.drop_factors.end());
    c.window_s = r.window_s;
    c.transients_recorded += r.transients_recorded;
    c.transients_on_injected += r.transients_on_injected;
    c.short_drops += r.short_drops;
    c.debug_jobs += r.debug_jobs;
    c.debug_jobs_with_baseline += r.debug_jobs_with_baseline;
    c.debug_detected += r.debug_detected;
    c.debug_delays_s.insert(c.debug_delays_s.end(), r.debug_delays_s.begin(),
                            r.debug_delays_s.end());
    c.false_alarms_in_job += r.false_alarms_in_job;
    c.false_alarms_baseline += r.false_alarms_baseline;
    c.precision_switches += r.precision_switches;
    c.precision_annotations += r.precision_annotations;
    c.notes.insert(c.notes.end(), r.notes.begin(), r.notes.end());
    for (int m = 0; m < kDeliveryModes; ++m) {
      DeliveryTally& a = c.delivery[m];
      const DeliveryTally& b = r.delivery[m];
      a.drops_detected += b.drops_detected;
      a.debug_detected += b.debug_detected;
      a.false_alarms += b.false_alarms;
      a.miscounts_found += b.miscounts_found;
      a.miscount_jobs += b.miscount_jobs;
      a.miscount_false += b.miscount_false;
      a.recorded_resolved += b.recorded_resolved;
      a.found_after_end += b.found_after_end;
    }
    for (const auto& [k, v] : r.verdicts) {
      VerdictTally& t = c.verdicts[k];
      t.jobs += v.jobs;
      t.right_verdict += v.right_verdict;
      t.right_cause += v.right_cause;
      t.insufficient += v.insufficient;
    }
    err_sum += r.ofu_abs_error_mean_pp * static_cast<double>(r.ofu_windows);
    ci_sum += r.ofu_ci_coverage * static_cast<double>(r.ofu_windows);
    c.ofu_windows += r.ofu_windows;
    c.ofu_abs_error_p95_pp = std::max(c.ofu_abs_error_p95_pp, r.ofu_abs_error_p95_pp);
    c.ofu_abs_error_max_pp = std::max(c.ofu_abs_error_max_pp, r.ofu_abs_error_max_pp);
    c.idle_injected += r.idle_injected;
    c.idle_found += r.idle_found;
    c.idle_false += r.idle_false;
    c.straggler_injected += r.straggler_injected;
    c.straggler_found += r.straggler_found;
    c.straggler_false += r.straggler_false;
  }
  if (c.ofu_windows > 0) {
    c.ofu_abs_error_mean_pp = err_sum / static_cast<double>(c.ofu_windows);
    c.ofu_ci_coverage = ci_sum / static_cast<double>(c.ofu_windows);
  }
  return c;
}

double DeliveryRecall(const EvaluationResult& r, Delivery d) {
  const DeliveryTally& t = r.delivery[static_cast<int>(d)];
  const int eligible = r.drops_eligible + r.debug_jobs_with_baseline;
  return eligible == 0 ? 1.0 : static_cast<double>(t.drops_detected + t.debug_detected) / eligible;
}

double DeliveryFalseAlarmsPer1000JobHours(const EvaluationResult& r, Delivery d) {
  return r.job_hours <= 0 ? 0
                          : r.delivery[static_cast<int>(d)].false_alarms * 1000.0 / r.job_hours;
}

std::string FormatDeliveryTable(const EvaluationResult& total) {
  static constexpr const char* kNames[] = {"live (window by window)", "30-min bursts",
                                           "30-min bursts, EndJob at end"};
  std::string out = absl::StrFormat(
      "%-30s | %-11s %-9s %7s | %-6s %8s | %-14s | %-8s %-11s\n", "delivery", "drops", "debug",
      "recall", "false", "/1000jh", "miscounts", "recorded", "after end");
  absl::StrAppend(&out, absl::StrFormat("%-30s | %-11s %-9s %7s | %-6s %8s | %-14s | %-8s %-11s\n",
                                        "", "found/elig", "found/elig", "", "alarms", "",
                                        "found/jobs+fp", "resolved", "of the job"));
  for (int m = 0; m < kDeliveryModes; ++m) {
    const DeliveryTally& t = total.delivery[m];
    absl::StrAppend(
        &out,
        absl::StrFormat(
            "%-30s | %-11s %-9s %6.1f%% | %-6d %8.2f | %-14s | %-8d %-11d\n", kNames[m],
            absl::StrCat(t.drops_detected, "/", total.drops_eligible),
            absl::StrCat(t.debug_detected, "/", total.debug_jobs_with_baseline),
            DeliveryRecall(total, static_cast<Delivery>(m)) * 100, t.false_alarms,
            DeliveryFalseAlarmsPer1000JobHours(total, static_cast<Delivery>(m)),
            absl::StrCat(t.miscounts_found, "/", t.miscount_jobs, "+", t.miscount_false),
            t.recorded_resolved, t.found_after_end));
  }
  return out;
}

std::string FormatDelayTable(const EvaluationResult& total) {
  std::string out = absl::StrFormat("%-14s %6s | %-9s %-9s %-9s\n", "drop depth", "drops",
                                    "p50 win", "p95 win", "max win");
  struct Band {
    const char* name;
    double low, high;
  };
  for (const Band& b : {Band{">= 2.5x", 2.5, 1e9}, Band{"2x - 2.5x", 2.0, 2.5},
                        Band{"1.5x - 2x", 1.5, 2.0}, Band{"all", 0, 1e9}}) {
    std::vector<double> delays;
    for (size_t i = 0; i < total.drop_delays_s.size(); ++i) {
      if (total.drop_factors[i] >= b.low && total.drop_factors[i] < b.high) {
        delays.push_back(total.drop_delays_s[i] / total.window_s);
      }
    }
    if (delays.empty()) {
      absl::StrAppend(&out, absl::StrFormat("%-14s %6d |\n", b.name, 0));
      continue;
    }
    absl::StrAppend(&out, absl::StrFormat("%-14s %6d | %9.2f %9.2f %9.2f\n", b.name,
                                          delays.size(), Quantile(delays, 0.5),
                                          Quantile(delays, 0.95),
                                          *std::max_element(delays.begin(), delays.end())));
  }
  absl::StrAppend(&out, absl::StrFormat(
                            "transient slowdowns recorded: %d (%d on injected drops, of %d "
                            "short drops >= 1.5x of 2-10 min; the rest are phases)\n",
                            total.transients_recorded, total.transients_on_injected,
                            total.short_drops));
  return out;
}

std::string FormatEvaluationTable(const std::vector<EvaluationResult>& results) {
  std::string out;
  absl::StrAppend(
      &out, absl::StrFormat(
                "%-22s %5s %8s %10s | %-11s %-9s %7s %7s | %-10s %8s | %-9s | %-7s %-7s "
                "%-7s %-6s | %-9s %-9s\n",
                "fleet", "jobs", "job-h", "GPU-h", "drops", "debug", "recall", "delay", "false",
                "/1000jh", "precision", "OFU err", "p95", "max", "CI cov", "idle", "straggler"));
  absl::StrAppend(
      &out,
      absl::StrFormat("%-22s %5s %8s %10s | %-11s %-9s %7s %7s | %-10s %8s | %-9s | %-7s %-7s "
                      "%-7s %-6s | %-9s %-9s\n",
                      "", "", "", "", "found/elig", "found/elig", "", "med s", "in-job+base", "",
                      "sw/annot", "mean pp", "pp", "pp", "", "found/inj", "found/inj"));
  for (const EvaluationResult& r : results) {
    absl::StrAppend(
        &out,
        absl::StrFormat(
            "%-22s %5d %8.0f %10.0f | %-11s %-9s %6.1f%% %7.0f | %-10s %8.2f | %-9s | %7.3f %7.3f "
            "%7.3f %5.1f%% | %-9s %-9s\n",
            absl::StrCat(r.config_name, r.seed ? absl::StrCat(" s", r.seed) : ""), r.jobs,
            r.job_hours, r.gpu_hours, absl::StrCat(r.drops_detected, "/", r.drops_eligible),
            absl::StrCat(r.debug_detected, "/", r.debug_jobs_with_baseline), r.Recall() * 100,
            r.MedianDelayS(), absl::StrCat(r.false_alarms_in_job, "+", r.false_alarms_baseline),
            r.FalseAlarmsPer1000JobHours(),
            absl::StrCat(r.precision_switches, "/", r.precision_annotations),
            r.ofu_abs_error_mean_pp, r.ofu_abs_error_p95_pp, r.ofu_abs_error_max_pp,
            r.ofu_ci_coverage * 100,
            absl::StrCat(r.idle_found, "/", r.idle_injected, r.idle_false ? "+" : "",
                         r.idle_false ? absl::StrCat(r.idle_false, "fp") : ""),
            absl::StrCat(r.straggler_found, "/", r.straggler_injected,
                         r.straggler_false ? absl::StrCat("+", r.straggler_false, "fp") : "")));
  }
  absl::StrAppend(&out,
                  "\nDivergence verdicts by case (right verdict / right verdict + top cause "
                  "/ jobs; insufficient evidence)\n");
  absl::StrAppend(&out, absl::StrFormat("%-22s", "fleet"));
  static constexpr const char* kCases[] = {
      "none", "moe_latent_projection", "layer_types", "recompute_not_counted", "doubled", "halved"};
  for (const char* c : kCases) absl::StrAppend(&out, absl::StrFormat(" %-23s", c));
  absl::StrAppend(&out, "\n");
  for (const EvaluationResult& r : results) {
    absl::StrAppend(
        &out, absl::StrFormat(
                  "%-22s", absl::StrCat(r.config_name, r.seed ? absl::StrCat(" s", r.seed) : "")));
    for (const char* c : kCases) {
      auto it = r.verdicts.find(c);
      const VerdictTally t = it == r.verdicts.end() ? VerdictTally{} : it->second;
      absl::StrAppend(
          &out, absl::StrFormat(" %-23s", absl::StrFormat("%d/%d/%d; %d", t.right_verdict,
                                                          t.right_cause, t.jobs, t.insufficient)));
    }
    absl::StrAppend(&out, "\n");
  }
  return out;
}

}  // namespace goodput::sim
