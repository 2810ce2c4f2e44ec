#include "tools/fleetsim/evaluation.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
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
    if (job.reports_mfu) {
      absl::StatusOr<detect::DivergenceResult> r =
          detect::ClassifyDivergence(s.paired, options_.divergence);
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
  // Runs the detectors on the assembled window.
  void Flush(JobState& s) {
    if (!s.pending) return;
    s.pending = false;
    const JobTruth& job = *s.job;
    const detect::OfuWindow& w = s.window;
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
