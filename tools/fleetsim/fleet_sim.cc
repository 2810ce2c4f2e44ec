#include "tools/fleetsim/fleet_sim.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "services/core/mfu.h"
#include "tools/fleetsim/random.h"

namespace goodput::sim {
namespace {

constexpr int kOffsetSlots = 4;  // hosts are scraped at a few different phases

template <typename T>
const T& WeightedPick(Rng& rng, const std::vector<T>& items) {
  double total = 0;
  for (const T& i : items) total += i.weight;
  double x = rng.Uniform() * total;
  for (const T& i : items) {
    if (x < i.weight) return i;
    x -= i.weight;
  }
  return items.back();
}

// Share of its step time a job's tensor pipe is busy, from its OFU (clocks under load run at
// ~78% of the tensor max clock, so busy share = OFU / 0.78).
double TensorBusyShare(double ofu) { return std::clamp(ofu / 0.78, 0.02, 0.95); }

// OFU after a precision change relative to before: the tensor part of each step scales by
// r = P_before / P_after (same FLOPs, different peak), the rest does not.
double PrecisionLevelFactor(double steady_ofu, double peak_before, double peak_after) {
  const double s = TensorBusyShare(steady_ofu);
  const double r = peak_before / peak_after;
  return r / (s * r + 1 - s);
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

const char* MiscountName(Miscount m) {
  switch (m) {
    case Miscount::kNone:
      return "none";
    case Miscount::kMoeLatentProjection:
      return "moe_latent_projection";
    case Miscount::kLayerTypes:
      return "layer_types";
    case Miscount::kRecomputeNotCounted:
      return "recompute_not_counted";
    case Miscount::kDoubled:
      return "doubled";
    case Miscount::kHalved:
      return "halved";
  }
  return "unknown";
}

double EffectivePeakTflops(const core::GpuSpec& spec, double fp8_share) {
  if (fp8_share <= 0 || !spec.Supports(core::Precision::kFp8)) {
    return spec.PeakTflops(core::Precision::kBf16).value_or(0);
  }
  // eq. 12 through the core library.
  absl::StatusOr<double> peak = core::EffectivePeakTflops(
      spec, {{core::Precision::kBf16, 1 - fp8_share}, {core::Precision::kFp8, fp8_share}});
  return peak.value_or(0);
}

FleetConfig DefaultFleetConfig(uint64_t seed) {
  FleetConfig c;
  c.seed = seed;
  c.models = {{"NVIDIA H100 80GB HBM3", 6, 700, 70, true},
              {"NVIDIA H200", 2, 700, 75, true},
              {"NVIDIA A100-SXM4-80GB", 2, 400, 55, false},
              {"NVIDIA GB200", 1, 1200, 110, true}};
  c.gpu_counts = {{8, 5},   {16, 4},    {32, 4},     {64, 4},     {128, 3},    {256, 3},
                  {288, 1}, {512, 1.5}, {1024, 0.6}, {1536, 0.3}, {6144, 0.15}};
  return c;
}

FleetConfig HeldOutFleetConfig(uint64_t seed) {
  FleetConfig c = DefaultFleetConfig(seed);
  c.name = "held-out";
  c.models = {{"NVIDIA A100-SXM4-80GB", 3, 400, 55, false},
              {"NVIDIA GB200", 2, 1200, 110, true},
              {"NVIDIA H100 80GB HBM3", 2, 700, 70, true},
              {"NVIDIA GH200 480GB", 1, 900, 90, true}};
  c.sample_interval_s = 15;
  c.sample_loss = 0.01;
  c.steady_ofu_min = 0.12;
  c.steady_ofu_max = 0.65;
  c.job_to_job_sd = 0.05;
  c.slow_drift_sd = 0.02;
  c.warmup_min_s = 300;
  c.warmup_max_s = 1500;
  c.checkpoint_period_min_s = 1200;
  c.checkpoint_period_max_s = 2700;
  c.checkpoint_min_s = 120;
  c.checkpoint_max_s = 360;
  c.eval_probability = 0.6;
  c.eval_period_s = 3600;
  c.eval_duration_s = 300;
  c.stalls_per_hour = 0.6;
  c.stall_max_s = 300;
  c.clock_wander_sd = 0.045;
  c.clock_point_sd = 0.03;
  c.straggler_job_probability = 0.25;
  c.idle_gpu_job_probability = 0.15;
  c.in_job_regression_probability = 0.25;
  c.regression_factor_min = 1.5;
  c.regression_factor_max = 3.0;
  c.regression_min_s = 600;
  c.regression_max_s = 2400;
  c.debug_flag_probability = 0.15;
  c.moe_expert_share_min = 0.6;
  c.moe_inflation_min = 2.7;
  c.moe_inflation_max = 3.6;
  c.layer_types_factor_min = 1.42;
  c.layer_types_factor_max = 1.75;
  c.tile_overhead_min = 0.005;
  c.tile_overhead_max = 0.07;
  c.precision_switch_probability = 0.35;
  c.fp8_share_min = 0.4;
  c.fp8_share_max = 1.0;
  c.mfu_noise_sd = 0.02;
  return c;
}

FleetConfig SmallFleetConfig(uint64_t seed) {
  FleetConfig c = DefaultFleetConfig(seed);
  c.name = "small";
  c.workloads = 12;
  c.gpu_counts = {{8, 3}, {16, 2}, {32, 1}};
  c.job_duration_min_s = 2 * 3600;
  c.job_duration_max_s = 5 * 3600;
  c.sample_interval_s = 30;
  return c;
}

double JobLevelAt(const JobTruth& job, double t_s) {
  const double rel = t_s - static_cast<double>(job.start_s);
  double level = job.steady_ofu;
  if (rel < static_cast<double>(job.warmup_s)) {
    const double x = rel / static_cast<double>(std::max<int64_t>(1, job.warmup_s));
    level *= 0.05 + 0.95 * std::pow(std::max(0.0, x), 1.5);
  } else {
    if (job.checkpoint_period_s > 0) {
      const double phase = std::fmod(rel - static_cast<double>(job.checkpoint_phase_s),
                                     static_cast<double>(job.checkpoint_period_s));
      if (phase >= 0 && phase < static_cast<double>(job.checkpoint_s)) level *= 0.02;
    }
    if (job.has_eval) {
      constexpr double kEvalLevel = 0.4;  // forward only, small batches
      const double period = static_cast<double>(std::max<int64_t>(1, job.eval_period_s));
      const double phase = std::fmod(rel, period);
      if (phase >= period / 2 && phase < period / 2 + static_cast<double>(job.eval_s)) {
        level *= kEvalLevel;
      }
    }
  }
  for (const auto& [start, end] : job.stalls) {
    if (t_s >= static_cast<double>(start) && t_s < static_cast<double>(end)) level *= 0.01;
  }
  for (const InjectedDrop& d : job.drops) {
    if (t_s >= static_cast<double>(d.onset_s) && t_s < static_cast<double>(d.end_s)) {
      level /= d.factor;
    }
  }
  if (job.debug_flag) level /= job.debug_factor;
  // Precision: relative to the first phase, which steady_ofu describes.
  const PrecisionPhase* phase = &job.precision.front();
  for (const PrecisionPhase& p : job.precision) {
    if (static_cast<double>(p.start_s) <= t_s) phase = &p;
  }
  if (phase != &job.precision.front()) {
    level *= PrecisionLevelFactor(job.steady_ofu, job.precision.front().effective_peak_tflops,
                                  phase->effective_peak_tflops);
  }
  return level;
}

struct FleetSimulator::Running {
  const JobTruth* job = nullptr;
  uint64_t seed = 0;
  int64_t window_index = 0;
  double drift = 1.0;
  std::vector<double> gpu_factor;   // 0 for idle GPUs
  std::vector<double> clock_mean;   // fraction of f_max under load
  std::vector<double> clock_state;  // fraction of f_max
  std::vector<double> energy_mj;
  std::vector<int> offset_slot;
  std::vector<std::string> hostnames;
  std::vector<std::string> uuids;
  double fb_fraction = 0.7;
  double dram_intensity = 0.3;
  std::vector<GpuSample> samples;  // reused buffer
};

FleetSimulator::FleetSimulator(FleetConfig config) : config_(std::move(config)) {}
FleetSimulator::~FleetSimulator() = default;

absl::StatusOr<std::unique_ptr<FleetSimulator>> FleetSimulator::Create(
    const FleetConfig& config, const core::GpuCatalog& catalog) {
  if (config.window_s <= 0 || config.sample_interval_s <= 0 ||
      config.sample_interval_s > config.window_s) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "sample_interval_s=%d and window_s=%d must be positive with the interval within the "
        "window",
        config.sample_interval_s, config.window_s));
  }
  if (config.models.empty() || config.gpu_counts.empty() || config.workloads <= 0) {
    return absl::InvalidArgumentError("models, gpu_counts and workloads must not be empty");
  }
  if (config.jobs_per_workload_min < 1 ||
      config.jobs_per_workload_max < config.jobs_per_workload_min ||
      config.job_duration_max_s < config.job_duration_min_s || config.job_duration_min_s <= 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "jobs_per_workload [%d, %d] and job_duration_s [%d, %d] must be non-empty ranges",
        config.jobs_per_workload_min, config.jobs_per_workload_max, config.job_duration_min_s,
        config.job_duration_max_s));
  }
  std::vector<const core::GpuSpec*> specs;
  for (const GpuModelShare& m : config.models) {
    absl::StatusOr<const core::GpuSpec*> spec = catalog.Find(m.model_name);
    if (!spec.ok()) return spec.status();
    specs.push_back(*spec);
  }
  std::unique_ptr<FleetSimulator> sim(new FleetSimulator(config));
  const FleetConfig& c = sim->config_;
  Rng plan(DeriveSeed(c.seed, 0));
  const int64_t w = c.window_s;
  auto align = [&](int64_t s) { return (s / w) * w; };
  static constexpr const char* kArch[] = {"dense-gpt",   "moe-deepseek", "hybrid-mamba",
                                          "world-model", "vit-robot",    "llama-ft"};
  static constexpr const char* kTeams[] = {"pretrain", "research", "robotics", "inference-opt"};
  std::vector<JobTruth> jobs;
  for (int wl = 0; wl < c.workloads; ++wl) {
    const size_t model_index = static_cast<size_t>(&WeightedPick(plan, c.models) - c.models.data());
    const GpuModelShare& model = c.models[model_index];
    const core::GpuSpec* spec = specs[model_index];
    const int gpus = WeightedPick(plan, c.gpu_counts).gpus;
    const double steady = plan.Uniform(c.steady_ofu_min, c.steady_ofu_max);
    const bool mixed = model.has_fp8 && plan.Bernoulli(c.mixed_precision_probability);
    const double fp8_share = mixed ? plan.Uniform(c.fp8_share_min, c.fp8_share_max) : 0.0;
    const double tile = plan.Uniform(c.tile_overhead_min, c.tile_overhead_max);
    // The FLOPs formula belongs to the workload's framework config: all its jobs share it.
    Miscount miscount = Miscount::kNone;
    double miscount_factor = 1;
    double x = plan.Uniform();
    auto take = [&](double p) {
      x -= p;
      return x < 0;
    };
    if (take(c.miscount_moe_probability)) {
      miscount = Miscount::kMoeLatentProjection;
      const double f = plan.Uniform(c.moe_expert_share_min, c.moe_expert_share_max);
      const double k = plan.Uniform(c.moe_inflation_min, c.moe_inflation_max);
      miscount_factor = 1 - f + f * k;
    } else if (take(c.miscount_layer_types_probability)) {
      miscount = Miscount::kLayerTypes;
      miscount_factor = plan.Uniform(c.layer_types_factor_min, c.layer_types_factor_max);
    } else if (take(c.miscount_recompute_probability)) {
      miscount = Miscount::kRecomputeNotCounted;
      miscount_factor = 0.75;
    } else if (take(c.miscount_doubled_probability)) {
      miscount = Miscount::kDoubled;
      miscount_factor = 2.0;
    } else if (take(c.miscount_halved_probability)) {
      miscount = Miscount::kHalved;
      miscount_factor = 0.5;
    }
    const bool reports = plan.Bernoulli(c.mfu_report_probability);
    static constexpr const char* kForms[] = {"mfu", "tflops_per_gpu", "total_tflops",
                                             "flops_per_step"};
    const std::string form = kForms[plan.UniformInt(0, 3)];
    const char* arch = kArch[plan.UniformInt(0, 5)];
    const std::string team = kTeams[plan.UniformInt(0, 3)];
    const std::string workload = absl::StrFormat(
        "%s-%02d/%s/%dx%s", arch, wl, mixed ? "fp8-mixed" : "bf16", gpus, Lower(spec->name));
    const int n_jobs =
        static_cast<int>(plan.UniformInt(c.jobs_per_workload_min, c.jobs_per_workload_max));
    int64_t t =
        align(c.start_unix_s + static_cast<int64_t>(plan.Uniform() * c.workload_start_spread_s));
    for (int j = 0; j < n_jobs; ++j) {
      JobTruth job;
      job.workload = workload;
      job.job_in_workload = j;
      job.gpu_model = model.model_name;
      job.spec = spec;
      job.tdp_w = model.tdp_w;
      job.idle_w = model.idle_w;
      job.gpu_count = gpus;
      job.gpus_per_host = std::min(gpus, spec->name.rfind("GB200", 0) == 0 ? 4 : 8);
      job.team = team;
      job.user = absl::StrFormat("user%02d", plan.UniformInt(1, 30));
      job.start_s = t;
      const int64_t duration = align(static_cast<int64_t>(plan.Uniform(
          static_cast<double>(c.job_duration_min_s), static_cast<double>(c.job_duration_max_s))));
      job.end_s = job.start_s + std::max(w * 20, duration);
      t = align(job.end_s + static_cast<int64_t>(plan.Uniform() * c.gap_between_jobs_max_s)) + w;
      job.steady_ofu = std::clamp(steady * (1 + plan.Normal(0, c.job_to_job_sd)), 0.03, 0.8);
      job.warmup_s = static_cast<int64_t>(
          plan.Uniform(static_cast<double>(c.warmup_min_s), static_cast<double>(c.warmup_max_s)));
      job.checkpoint_period_s =
          static_cast<int64_t>(plan.Uniform(static_cast<double>(c.checkpoint_period_min_s),
                                            static_cast<double>(c.checkpoint_period_max_s)));
      job.checkpoint_s = static_cast<int64_t>(plan.Uniform(
          static_cast<double>(c.checkpoint_min_s), static_cast<double>(c.checkpoint_max_s)));
      job.checkpoint_phase_s =
          static_cast<int64_t>(plan.Uniform(0, static_cast<double>(job.checkpoint_period_s)));
      job.has_eval = plan.Bernoulli(c.eval_probability);
      job.eval_period_s = c.eval_period_s;
      job.eval_s = c.eval_duration_s;
      const double hours = static_cast<double>(job.end_s - job.start_s) / 3600;
      const int stalls = static_cast<int>(plan.Uniform() * 2 * c.stalls_per_hour * hours);
      for (int s = 0; s < stalls; ++s) {
        const int64_t at =
            job.start_s +
            static_cast<int64_t>(plan.Uniform() * static_cast<double>(job.end_s - job.start_s));
        job.stalls.push_back(
            {at, at + static_cast<int64_t>(plan.Uniform(30, static_cast<double>(c.stall_max_s)))});
      }
      // In-job regression: after warm-up and half an hour of steady running.
      const int64_t earliest = job.start_s + job.warmup_s + 1800;
      const int64_t latest = job.end_s - 900;
      if (latest > earliest && plan.Bernoulli(c.in_job_regression_probability)) {
        InjectedDrop d;
        d.onset_s = earliest +
                    static_cast<int64_t>(plan.Uniform() * static_cast<double>(latest - earliest));
        d.factor = plan.Uniform(c.regression_factor_min, c.regression_factor_max);
        d.end_s =
            plan.Bernoulli(c.regression_sustained_probability)
                ? job.end_s
                : std::min(job.end_s, d.onset_s + static_cast<int64_t>(plan.Uniform(
                                                      static_cast<double>(c.regression_min_s),
                                                      static_cast<double>(c.regression_max_s))));
        job.drops.push_back(d);
      }
      if (j >= 2 && plan.Bernoulli(c.debug_flag_probability)) {
        job.debug_flag = true;
        job.debug_factor = plan.Uniform(c.debug_factor_min, c.debug_factor_max);
      }
      job.miscount = miscount;
      job.miscount_factor = miscount_factor;
      job.tile_overhead = tile;
      job.reports_mfu = reports;
      job.mfu_form = form;
      job.precision.push_back({job.start_s, fp8_share, EffectivePeakTflops(*spec, fp8_share)});
      // Precision switches are modelled in jobs that report through the SDK: without the
      // reported precision mix nobody, the detectors included, can tell a switch to a faster
      // mix (OFU lower, job faster) from a slowdown.
      if (model.has_fp8 && reports && plan.Bernoulli(c.precision_switch_probability)) {
        // Mixed -> BF16-only for debugging (or BF16 -> FP8 mixed when trying it), maybe back.
        const int64_t span = job.end_s - job.start_s;
        const int64_t at = align(
            job.start_s + static_cast<int64_t>(plan.Uniform(0.2, 0.6) * static_cast<double>(span)));
        const double other = mixed ? 0.0 : plan.Uniform(c.fp8_share_min, c.fp8_share_max);
        job.precision.push_back({at, other, EffectivePeakTflops(*spec, other)});
        if (plan.Bernoulli(0.5)) {
          const int64_t back =
              align(at + static_cast<int64_t>(plan.Uniform(0.1, 0.3) * static_cast<double>(span)));
          if (back < job.end_s) {
            job.precision.push_back({back, fp8_share, EffectivePeakTflops(*spec, fp8_share)});
          }
        }
      }
      if (gpus >= 8 && plan.Bernoulli(c.straggler_job_probability)) {
        const int n = gpus >= 64 ? 2 : 1;
        for (int s = 0; s < n; ++s) {
          job.straggler_gpus.push_back(static_cast<int>(plan.UniformInt(0, gpus - 1)));
          job.straggler_factors.push_back(
              plan.Uniform(c.straggler_factor_min, c.straggler_factor_max));
        }
      }
      if (plan.Bernoulli(c.idle_gpu_job_probability)) {
        const int n = static_cast<int>(plan.UniformInt(1, std::max(1, std::min(3, gpus / 4))));
        for (int s = 0; s < n; ++s) {
          const int g = static_cast<int>(plan.UniformInt(0, gpus - 1));
          if (std::find(job.straggler_gpus.begin(), job.straggler_gpus.end(), g) ==
                  job.straggler_gpus.end() &&
              std::find(job.idle_gpus.begin(), job.idle_gpus.end(), g) == job.idle_gpus.end()) {
            job.idle_gpus.push_back(g);
          }
        }
      }
      jobs.push_back(std::move(job));
    }
  }
  std::stable_sort(jobs.begin(), jobs.end(),
                   [](const JobTruth& a, const JobTruth& b) { return a.start_s < b.start_s; });
  for (size_t i = 0; i < jobs.size(); ++i) {
    jobs[i].index = static_cast<int>(i);
    jobs[i].job_id = absl::StrFormat("%d", 100000 + i);
  }
  sim->jobs_ = std::move(jobs);
  sim->now_s_ = sim->jobs_.empty() ? c.start_unix_s : sim->jobs_.front().start_s;
  for (const JobTruth& j : sim->jobs_) sim->end_s_ = std::max(sim->end_s_, j.end_s);
  return sim;
}

bool FleetSimulator::Step(FleetSink& sink) {
  const int64_t window_end = now_s_ + config_.window_s;
  while (next_job_ < jobs_.size() && jobs_[next_job_].start_s < window_end) {
    const JobTruth& job = jobs_[next_job_++];
    auto r = std::make_unique<Running>();
    r->job = &job;
    r->seed = DeriveSeed(config_.seed, 1000 + static_cast<uint64_t>(job.index));
    Rng rng(r->seed);
    const int g = job.gpu_count;
    r->gpu_factor.assign(g, 1.0);
    r->clock_mean.resize(g);
    r->clock_state.resize(g);
    r->energy_mj.resize(g);
    r->offset_slot.resize(g);
    r->hostnames.resize(g);
    r->uuids.resize(g);
    for (int i = 0; i < g; ++i) {
      r->gpu_factor[i] = 1 + rng.Normal(0, 0.015);
      r->clock_mean[i] = rng.Uniform(config_.clock_low + 0.03, config_.clock_high - 0.05);
      r->clock_state[i] = r->clock_mean[i];
      r->energy_mj[i] = rng.Uniform(1e8, 5e9);
      const int host = i / job.gpus_per_host;
      r->offset_slot[i] = host % kOffsetSlots;
      r->hostnames[i] = absl::StrFormat("node-%s-%04d", job.job_id, host);
      r->uuids[i] = absl::StrFormat("GPU-%08x-%04x-%04x", static_cast<uint32_t>(rng.Next()),
                                    static_cast<uint32_t>(job.index & 0xffff), i & 0xffff);
    }
    for (size_t s = 0; s < job.straggler_gpus.size(); ++s) {
      r->gpu_factor[job.straggler_gpus[s]] = job.straggler_factors[s];
      // A straggler is often also power- or thermally-capped.
      r->clock_mean[job.straggler_gpus[s]] = config_.clock_low + 0.02;
    }
    for (int i : job.idle_gpus) r->gpu_factor[i] = 0;
    r->fb_fraction = rng.Uniform(0.35, 0.95);
    r->dram_intensity = rng.Uniform(0.15, 0.5);
    sink.OnJobStart(job);
    running_.push_back(std::move(r));
  }
  for (auto& r : running_) StepJob(*r, now_s_, sink);
  for (auto it = running_.begin(); it != running_.end();) {
    if ((*it)->job->end_s <= window_end) {
      sink.OnJobEnd(*(*it)->job);
      it = running_.erase(it);
    } else {
      ++it;
    }
  }
  now_s_ = window_end;
  return !running_.empty() || next_job_ < jobs_.size();
}

void FleetSimulator::StepJob(Running& r, int64_t window_start_s, FleetSink& sink) {
  const JobTruth& job = *r.job;
  if (window_start_s < job.start_s) return;
  const int64_t window_end_s = window_start_s + config_.window_s;
  Rng rng(DeriveSeed(r.seed, static_cast<uint64_t>(r.window_index++)));
  const core::GpuSpec& spec = *job.spec;
  const double f_max = spec.tensor_max_clock_mhz;
  const double boost = std::max(spec.sm_boost_clock_mhz, f_max);
  const double interval = config_.sample_interval_s;
  // Slow drift of the whole job (data mix, thermal), a random walk per window.
  r.drift *= 1 + rng.Normal(0, config_.slow_drift_sd * std::sqrt(config_.window_s / 3600.0));
  r.drift = std::clamp(r.drift, 0.9, 1.1);

  // Job level per offset slot and sample within the window, averaged over the interval the
  // tensor counter integrates.
  const int per_window = std::max(1, config_.window_s / config_.sample_interval_s);
  std::vector<double> levels(kOffsetSlots * per_window);
  std::vector<int64_t> times_ms(kOffsetSlots * per_window);
  for (int slot = 0; slot < kOffsetSlots; ++slot) {
    const double offset = interval * (slot + 0.5) / kOffsetSlots;
    for (int k = 0; k < per_window; ++k) {
      const double ts = static_cast<double>(window_start_s) + offset + k * interval;
      double sum = 0;
      for (int q = 0; q < 3; ++q) sum += JobLevelAt(job, ts - interval * (q + 0.5) / 3);
      levels[slot * per_window + k] = sum / 3 * r.drift;
      times_ms[slot * per_window + k] = static_cast<int64_t>(ts * 1000);
    }
  }

  r.samples.clear();
  double truth_sum = 0;
  int64_t truth_n = 0;
  double active_truth_sum = 0;
  int64_t active_truth_n = 0;
  const double phi = 0.9;
  const double wander = config_.clock_wander_sd * std::sqrt(1 - phi * phi);
  const double fb_total_mib = spec.hbm_capacity_gib * 1024;
  for (int g = 0; g < job.gpu_count; ++g) {
    const double factor = r.gpu_factor[g];
    const bool idle = factor == 0;
    for (int k = 0; k < per_window; ++k) {
      const double level = levels[r.offset_slot[g] * per_window + k];
      const double u_target = level * factor * (1 + rng.Normal(0, 0.01));
      // Clock: wanders under load with power capping; rises towards boost when the tensor
      // pipe idles (checkpoints), drops to the idle clock on an unused GPU.
      r.clock_state[g] =
          r.clock_mean[g] + phi * (r.clock_state[g] - r.clock_mean[g]) + wander * rng.Normal();
      const double load = std::clamp(u_target / std::max(0.05, job.steady_ofu), 0.0, 1.0);
      double f_avg;
      if (idle) {
        f_avg = 345.0 / 1980.0 * boost;
      } else {
        const double loaded =
            std::clamp(r.clock_state[g], config_.clock_low, config_.clock_high) * f_max;
        f_avg = load * loaded + (1 - load) * 0.97 * boost;
      }
      const double f_point = std::min(boost, f_avg * (1 + rng.Normal(0, config_.clock_point_sd)));
      const double tpa = std::clamp(u_target * f_max / f_avg, 0.0, 1.0);
      const double true_ofu = tpa * f_avg / f_max;
      truth_sum += true_ofu;
      ++truth_n;
      if (!idle) {
        active_truth_sum += true_ofu;
        ++active_truth_n;
      }
      const double power_frac = idle ? 0.0 : std::clamp(0.25 + 0.9 * tpa, 0.0, 1.0);
      const double power = job.idle_w + (job.tdp_w - job.idle_w) * power_frac *
                                            (0.85 + 0.15 * f_avg / f_max) *
                                            (1 + rng.Normal(0, 0.02));
      r.energy_mj[g] += power * interval * 1000;
      if (rng.Bernoulli(config_.sample_loss)) continue;
      GpuSample s;
      s.timestamp_ms = times_ms[r.offset_slot[g] * per_window + k];
      s.gpu_index = g;
      s.hostname = r.hostnames[g];
      s.device = g % job.gpus_per_host;
      s.uuid = r.uuids[g];
      s.tensor_active = tpa;
      s.sm_clock_mhz = std::round(f_point);
      s.sm_active = idle ? 0.0 : std::clamp(0.06 + 1.15 * tpa + rng.Normal(0, 0.01), 0.0, 1.0);
      s.sm_occupancy = s.sm_active * 0.42;
      s.dram_active =
          idle ? 0.0 : std::clamp(r.dram_intensity * (0.3 + tpa) + rng.Normal(0, 0.01), 0.0, 1.0);
      s.fp16_active = idle ? 0.0 : std::clamp(0.02 + 0.03 * tpa, 0.0, 1.0);
      s.fp32_active = idle ? 0.0 : std::clamp(0.04 + 0.05 * tpa, 0.0, 1.0);
      s.fp64_active = 0;
      s.gr_engine_active = idle ? 0.0 : std::clamp(0.1 + 0.9 * load, 0.0, 1.0);
      s.fb_used_mib = idle ? 512 : fb_total_mib * r.fb_fraction;
      s.power_w = power;
      s.energy_mj = r.energy_mj[g];
      s.temperature_c = 32 + 45 * power / job.tdp_w;
      const double comm = idle ? 0.0 : 2.0e10 * interval * load;
      s.nvlink_tx_bytes = comm;
      s.nvlink_rx_bytes = comm;
      s.pcie_tx_bytes = idle ? 0.0 : 4e8 * interval;
      s.pcie_rx_bytes = idle ? 0.0 : 6e8 * interval;
      // DCGM clock-throttle reasons: 0x4 SW power cap under load below 95% of f_max.
      s.clock_throttle_reasons = (!idle && load > 0.5 && f_avg < 0.95 * f_max) ? 0x4 : 0;
      s.true_ofu = true_ofu;
      r.samples.push_back(std::move(s));
    }
  }
  sink.OnSamples(job, window_start_s, window_end_s, r.samples);
  sink.OnWindowTruth(job, window_start_s, window_end_s,
                     truth_n > 0 ? truth_sum / static_cast<double>(truth_n) : 0);

  if (job.reports_mfu) {
    // The framework measures model FLOPs over the GPUs it runs on (its world size excludes
    // GPUs it never uses) against the effective peak of the precision mix it reports.
    const double active_ofu =
        active_truth_n > 0 ? active_truth_sum / static_cast<double>(active_truth_n) : 0;
    const PrecisionPhase* phase = &job.precision.front();
    for (const PrecisionPhase& p : job.precision) {
      if (p.start_s <= window_start_s) phase = &p;
    }
    MfuReport m;
    m.start_s = window_start_s;
    m.end_s = window_end_s;
    m.form = job.mfu_form;
    m.mfu = std::max(0.0, active_ofu / (1 + job.tile_overhead) * job.miscount_factor *
                              (1 + rng.Normal(0, config_.mfu_noise_sd)));
    m.fp8_share = phase->fp8_share;
    m.effective_peak_tflops = phase->effective_peak_tflops;
    m.tflops_per_gpu = m.mfu * m.effective_peak_tflops;
    m.gpu_count = job.gpu_count - static_cast<int>(job.idle_gpus.size());
    m.total_tflops = m.tflops_per_gpu * m.gpu_count;
    m.step_time_s = 4.0;
    m.flops_per_step = m.total_tflops * 1e12 * m.step_time_s;
    sink.OnMfuReport(job, m);
  }
}

}  // namespace goodput::sim
