#include "services/ofu/window_engine.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"
#include "services/core/mig.h"

namespace goodput::ofu {
namespace {

constexpr int64_t kNoTime = std::numeric_limits<int64_t>::min();

int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

double Finite(float v) { return std::isfinite(v) ? static_cast<double>(v) : kNoValue; }

// Whether a sample carries both OFU counters (missing ones are NaN).
bool CarriesOfu(const WindowInput::Packed& p) {
  return !std::isnan(p.tensor_active) && !std::isnan(p.sm_clock_mhz);
}

// DCGM profiling fields all missing while the GPU still reports clock, power or memory:
// profiling paused (Nsight holds the counters, `dcgmi profile --pause`) or not loaded.
bool ProfilingUnavailable(const WindowInput::Packed& p) {
  return std::isnan(p.tensor_active) && std::isnan(p.gr_engine_active) &&
         std::isnan(p.dram_active) &&
         (!std::isnan(p.sm_clock_mhz) || !std::isnan(p.power_w) || !std::isnan(p.fb_used_mib));
}

// The samples whose times judge a GPU's sampling: those with the OFU counters, and those
// whose profiling fields are unavailable (the GPU reported; it was not silent).
bool CountsForSampling(const WindowInput::Packed& p) {
  return CarriesOfu(p) || ProfilingUnavailable(p);
}

// Tensor and GR-engine activity exactly 0, DRAM activity 0 or missing (the counters do not
// move), while the GPU draws near its board power at boost clock: a busy GPU whose profiling
// counters are stuck, a known dcgm-exporter failure. A model without a board power is never
// judged stuck.
bool ProfilingCounterStuck(const WindowInput::Packed& p, const core::GpuSpec* spec,
                           const EngineOptions& options) {
  if (spec == nullptr || !spec->board_power_w.has_value()) return false;
  const auto zero_or_missing = [](float v) { return std::isnan(v) || v == 0; };
  return p.tensor_active == 0 && zero_or_missing(p.gr_engine_active) &&
         zero_or_missing(p.dram_active) &&
         p.power_w >= options.stuck_min_power_fraction * *spec->board_power_w &&
         p.sm_clock_mhz >= options.stuck_min_clock_fraction * spec->sm_boost_clock_mhz;
}

uint32_t MapCoreFlags(uint32_t core_flags) {
  uint32_t out = 0;
  if (core_flags & core::kOfuFlagCoarseSampling) out |= kFlagSparseSampling;
  if (core_flags & core::kOfuFlagTensorActiveOutOfRange) out |= kFlagTensorActiveOutOfRange;
  if (core_flags & core::kOfuFlagSmClockAboveBoost) out |= kFlagSmClockAboveBoost;
  if (core_flags & core::kOfuFlagGap) out |= kFlagGap;
  if (core_flags & core::kOfuFlagDuplicateTimestamp) out |= kFlagDuplicateTimestamp;
  return out;
}

Roofline MapRoofline(core::RooflineClass c) {
  switch (c) {
    case core::RooflineClass::kComputeBound:
      return Roofline::kComputeBound;
    case core::RooflineClass::kMemoryBound:
      return Roofline::kMemoryBound;
    case core::RooflineClass::kIdle:
      return Roofline::kIdle;
    case core::RooflineClass::kUnknown:
      break;
  }
  return Roofline::kUnspecified;
}

// Mean of the finite values; nullopt if none.
template <class Get>
std::optional<double> MeanOf(const core::GpuTelemetrySeries& series, Get get) {
  double sum = 0;
  int64_t n = 0;
  for (const core::GpuTelemetrySample& s : series.samples) {
    const double v = get(s);
    if (std::isfinite(v)) {
      sum += v;
      ++n;
    }
  }
  if (n == 0) return std::nullopt;
  return sum / static_cast<double>(n);
}

}  // namespace

int64_t RestoreLookbackMs(const EngineOptions& options) {
  return std::max<int64_t>(options.window_ms, int64_t{core::kSamplingHistory} * 60'000);
}

int64_t WindowStart(int64_t timestamp_ms, int64_t window_ms) {
  return FloorDiv(timestamp_ms, window_ms) * window_ms;
}

std::vector<WindowResult> ComputeWindow(const WindowInput& input, const EngineOptions& options) {
  using Packed = WindowInput::Packed;
  const size_t gpu_count = input.gpu_names.size();
  // Counting sort by GPU, then by time within a GPU.
  std::vector<uint32_t> begin(gpu_count + 1, 0);
  for (const Packed& p : input.samples) ++begin[p.gpu + 1];
  for (size_t g = 0; g < gpu_count; ++g) begin[g + 1] += begin[g];
  std::vector<const Packed*> ordered(input.samples.size());
  {
    std::vector<uint32_t> fill(begin.begin(), begin.end() - 1);
    for (const Packed& p : input.samples) ordered[fill[p.gpu]++] = &p;
  }

  std::vector<core::GpuOfuSeries> ofu_series;
  std::vector<core::GpuTelemetrySeries> telemetry;
  std::vector<uint32_t> gpu_of_series;
  // Per series: samples whose profiling counters were unavailable, and stuck.
  std::vector<int64_t> unavailable, stuck;
  bool any_gr_engine = false;
  for (size_t g = 0; g < gpu_count; ++g) {
    if (begin[g] == begin[g + 1]) continue;
    std::stable_sort(ordered.begin() + begin[g], ordered.begin() + begin[g + 1],
                     [](const Packed* a, const Packed* b) { return a->offset_ms < b->offset_ms; });
    core::GpuOfuSeries os{.gpu_id = input.gpu_names[g], .samples = {}, .sampling = {}};
    if (g < input.sampling.size()) os.sampling = input.sampling[g];
    core::GpuTelemetrySeries ts{.gpu_id = input.gpu_names[g], .samples = {}};
    os.samples.reserve(begin[g + 1] - begin[g]);
    ts.samples.reserve(begin[g + 1] - begin[g]);
    int64_t gpu_unavailable = 0, gpu_stuck = 0;
    const bool mig = g < input.mig_instance.size() && input.mig_instance[g];
    for (uint32_t i = begin[g]; i < begin[g + 1]; ++i) {
      const Packed& p = *ordered[i];
      const int64_t t = input.start_ms + p.offset_ms;
      const bool is_unavailable = ProfilingUnavailable(p);
      const bool is_stuck =
          !is_unavailable && !mig && ProfilingCounterStuck(p, input.spec, options);
      gpu_unavailable += is_unavailable;
      gpu_stuck += is_stuck;
      const bool usable = !is_unavailable && !is_stuck;
      if (!usable || CarriesOfu(p)) {
        os.samples.push_back({.timestamp_ms = t,
                              .tensor_active = p.tensor_active,
                              .sm_clock_mhz = p.sm_clock_mhz,
                              .counters_usable = usable});
      }
      core::GpuTelemetrySample s;
      s.timestamp_ms = t;
      s.sm_clock_mhz = Finite(p.sm_clock_mhz);
      // Stuck counters read 0 on a busy GPU: no activity figure, idle or not, comes from them.
      s.tensor_active = usable ? Finite(p.tensor_active) : kNoValue;
      s.dram_active = usable ? Finite(p.dram_active) : kNoValue;
      s.gr_engine_active = usable ? Finite(p.gr_engine_active) : kNoValue;
      s.sm_active = usable ? Finite(p.sm_active) : kNoValue;
      s.fb_used_mib = Finite(p.fb_used_mib);
      s.total_energy_mj = std::isfinite(p.energy_mj) ? p.energy_mj : kNoValue;
      if (std::isfinite(s.gr_engine_active)) any_gr_engine = true;
      ts.samples.push_back(s);
    }
    ofu_series.push_back(std::move(os));
    telemetry.push_back(std::move(ts));
    gpu_of_series.push_back(static_cast<uint32_t>(g));
    unavailable.push_back(gpu_unavailable);
    stuck.push_back(gpu_stuck);
  }
  // GPUs of the job without a sample here but with samples around it are judged too: a
  // silent GPU is a gap (and counts as allocated).
  std::vector<SilentGpuResult> silent;
  for (size_t g = 0; g < std::min(gpu_count, input.sampling.size()); ++g) {
    const core::SamplingContext& c = input.sampling[g];
    if (begin[g] != begin[g + 1] || (c.earlier_ms.empty() && !c.next_ms.has_value())) continue;
    ofu_series.push_back({.gpu_id = input.gpu_names[g], .samples = {}, .sampling = c});
    // Silent while others report (none reporting: the job's telemetry stopped, not a GPU).
    if (!c.earlier_ms.empty() && !telemetry.empty()) {
      silent.push_back(
          {.gpu = input.gpu_names[g],
           .last_sample_ms = *std::max_element(c.earlier_ms.begin(), c.earlier_ms.end())});
    }
  }
  if (!silent.empty()) {
    // A host is silent when none of the job's GPUs on it sent anything here.
    const auto host_of = [](absl::string_view gpu) { return gpu.substr(0, gpu.find('/')); };
    absl::flat_hash_set<absl::string_view> reporting_hosts;
    for (const core::GpuTelemetrySeries& t : telemetry) reporting_hosts.insert(host_of(t.gpu_id));
    for (SilentGpuResult& s : silent) s.host_silent = !reporting_hosts.contains(host_of(s.gpu));
  }

  // Energy series: the previous reading (if any) in front, so the window's energy covers the
  // interval from the last reading before it.
  auto energy_series = [&](size_t k) {
    core::GpuTelemetrySeries e{.gpu_id = telemetry[k].gpu_id, .samples = {}};
    const uint32_t g = gpu_of_series[k];
    if (g < input.previous_energy.size() && input.previous_energy[g].first != kNoTime) {
      core::GpuTelemetrySample s;
      s.timestamp_ms = input.previous_energy[g].first;
      s.total_energy_mj = input.previous_energy[g].second;
      e.samples.push_back(s);
    }
    for (const core::GpuTelemetrySample& s : telemetry[k].samples) {
      if (std::isfinite(s.total_energy_mj)) {
        core::GpuTelemetrySample t;
        t.timestamp_ms = s.timestamp_ms;
        t.total_energy_mj = s.total_energy_mj;
        e.samples.push_back(t);
      }
    }
    return e;
  };

  const int allocated = std::max(input.gpus_allocated, static_cast<int>(ofu_series.size()));
  // What the window stands for in fleet figures (WindowResult::gpu_equivalents).
  auto equivalents_of = [&](uint32_t g) {
    double share = g < input.gpu_share.size() ? input.gpu_share[g] : 1.0;
    if (auto it = input.shared_by.find(g); it != input.shared_by.end()) share /= it->second;
    return share;
  };
  WindowResult job;
  job.job = input.job;
  job.start_ms = input.start_ms;
  job.end_ms = input.end_ms;
  job.gpu_model = input.gpu_model;
  job.gpus_allocated = allocated;
  job.silent_gpus = std::move(silent);
  std::vector<WindowResult> per_gpu(telemetry.size());

  std::vector<core::GpuOfuWindow> gpu_ofu(telemetry.size());
  if (input.spec == nullptr) {
    job.flags |= kFlagUnknownGpuModel;
  } else if (!ofu_series.empty()) {
    core::JobOfuWindowInput in;
    in.window_start_ms = input.start_ms;
    in.window_end_ms = input.end_ms;
    in.allocated_gpu_count = allocated;
    in.gpus = std::move(ofu_series);
    in.options = options.ofu;
    absl::StatusOr<core::JobOfuWindow> w = core::ComputeJobOfuWindow(*input.spec, in);
    if (w.ok()) {
      job.sample_count = w->stats.sample_count;
      job.ofu = w->stats.mean_ofu;
      job.ofu_stddev = w->stats.stddev_ofu;
      job.ofu_ci95_half_width = w->stats.ci95_half_width;
      job.gpus_reporting = w->gpus_reporting;
      job.gpu_ofu_min = w->min_gpu_ofu;
      job.gpu_ofu_median = w->median_gpu_ofu;
      job.gpu_ofu_max = w->max_gpu_ofu;
      job.flags |= MapCoreFlags(w->flags);
      for (size_t k = 0; k < gpu_ofu.size(); ++k) gpu_ofu[k] = std::move(w->per_gpu[k]);
    }
  }
  job.gpu_coverage = allocated > 0 ? static_cast<double>(job.gpus_reporting) / allocated : 0;
  if (job.gpu_coverage < options.low_coverage_fraction) job.flags |= kFlagLowGpuCoverage;
  if (job.sample_count == 1) job.flags |= kFlagSingleSample;

  if (!telemetry.empty()) {
    job.tensor_active_mean = std::nullopt;
    double tensor_sum = 0, clock_sum = 0, power_sum = 0;
    int64_t tensor_n = 0, clock_n = 0;
    bool any_power = false;
    double energy_sum = 0;
    bool any_energy = false;
    std::vector<std::pair<std::string, double>> gpu_means;
    absl::flat_hash_set<std::string> untrusted_gpus;  // unavailable or stuck counters seen
    for (size_t k = 0; k < telemetry.size(); ++k) {
      WindowResult& r = per_gpu[k];
      r.job = input.job;
      r.gpu = telemetry[k].gpu_id;
      r.start_ms = input.start_ms;
      r.end_ms = input.end_ms;
      r.gpu_model = input.gpu_model;
      r.gpus_allocated = 1;
      r.gpu_equivalents = equivalents_of(gpu_of_series[k]);
      r.sample_count = gpu_ofu[k].stats.sample_count;
      r.ofu = gpu_ofu[k].stats.mean_ofu;
      r.ofu_stddev = gpu_ofu[k].stats.stddev_ofu;
      r.ofu_ci95_half_width = gpu_ofu[k].stats.ci95_half_width;
      r.gpus_reporting = r.ofu.has_value() ? 1 : 0;
      r.gpu_coverage = r.gpus_reporting;
      r.flags = MapCoreFlags(gpu_ofu[k].flags);
      if (input.shared_by.contains(gpu_of_series[k])) r.flags |= kFlagSharedGpu;
      if (input.spec == nullptr) r.flags |= kFlagUnknownGpuModel;
      if (r.sample_count == 1) r.flags |= kFlagSingleSample;
      if (unavailable[k] > 0) r.flags |= kFlagProfilingUnavailable;
      if (stuck[k] > 0) r.flags |= kFlagProfilingCounterStuck;
      job.flags |= r.flags & (kFlagProfilingUnavailable | kFlagProfilingCounterStuck);
      // A GPU whose counters could not be trusted for part of the window is not compared with
      // the others: its OFU covers only the rest.
      if (unavailable[k] > 0 || stuck[k] > 0) {
        untrusted_gpus.insert(r.gpu);
      } else if (r.ofu.has_value()) {
        gpu_means.emplace_back(r.gpu, *r.ofu);
      }
      for (const core::GpuTelemetrySample& s : telemetry[k].samples) {
        if (std::isfinite(s.tensor_active)) {
          tensor_sum += s.tensor_active;
          ++tensor_n;
        }
        if (std::isfinite(s.sm_clock_mhz)) {
          clock_sum += s.sm_clock_mhz;
          ++clock_n;
        }
      }
      r.tensor_active_mean =
          MeanOf(telemetry[k], [](const core::GpuTelemetrySample& s) { return s.tensor_active; });
      r.sm_clock_mhz_mean =
          MeanOf(telemetry[k], [](const core::GpuTelemetrySample& s) { return s.sm_clock_mhz; });
      // Power is not part of the core's telemetry sample; take it from the packed samples.
      double p_sum = 0;
      int64_t p_n = 0;
      const uint32_t g = gpu_of_series[k];
      for (uint32_t i = begin[g]; i < begin[g + 1]; ++i) {
        if (std::isfinite(ordered[i]->power_w)) {
          p_sum += ordered[i]->power_w;
          ++p_n;
        }
      }
      if (p_n > 0) {
        r.power_w_mean = p_sum / static_cast<double>(p_n);
        power_sum += *r.power_w_mean;
        any_power = true;
      }
      const std::vector<core::GpuTelemetrySeries> one = {energy_series(k)};
      const core::EnergySummary e = core::ComputeEnergy(one);
      if (one[0].samples.size() >= 2) {
        r.energy_j = e.energy_j;
        energy_sum += e.energy_j;
        any_energy = true;
        if (e.counter_resets > 0) {
          r.flags |= kFlagEnergyCounterReset;
          job.flags |= kFlagEnergyCounterReset;
        }
      } else if (one[0].samples.empty() && r.power_w_mean.has_value()) {
        // No energy counter (an exporter without DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION, a GPU
        // older than Volta): board power over the window, marked as the estimate it is.
        r.energy_j = *r.power_w_mean * static_cast<double>(input.end_ms - input.start_ms) / 1000.0;
        energy_sum += *r.energy_j;
        any_energy = true;
        r.flags |= kFlagEnergyEstimated;
        job.flags |= kFlagEnergyEstimated;
      }
      if (input.spec != nullptr) {
        const std::vector<core::GpuTelemetrySeries> single = {telemetry[k]};
        r.roofline = MapRoofline(
            core::SummarizeRoofline(*input.spec, options.roofline_precision, single).job_class);
        absl::StatusOr<std::optional<double>> hbm = core::PeakHbmFraction(*input.spec, single);
        if (hbm.ok()) r.hbm_peak_fraction = *hbm;
        absl::StatusOr<core::TemporalImbalance> ti =
            core::ComputeTemporalImbalance(single, core::ActivityCounter::kTensorActive);
        if (ti.ok()) r.temporal_imbalance = ti->ti;
      }
    }
    if (tensor_n > 0) job.tensor_active_mean = tensor_sum / static_cast<double>(tensor_n);
    // What alerting tells hung from idle by (alerting/README.md, "Hung and idle jobs").
    double gr_sum = 0, sm_sum = 0;
    int64_t gr_n = 0, sm_n = 0;
    const auto raise = [](std::optional<double>& max, std::optional<double> v) {
      if (v.has_value()) max = std::max(max.value_or(0.0), *v);
    };
    for (const core::GpuTelemetrySeries& t : telemetry) {
      for (const core::GpuTelemetrySample& x : t.samples) {
        if (std::isfinite(x.gr_engine_active)) {
          gr_sum += x.gr_engine_active;
          ++gr_n;
        }
        if (std::isfinite(x.sm_active)) {
          sm_sum += x.sm_active;
          ++sm_n;
        }
      }
      raise(job.gpu_tensor_active_max,
            MeanOf(t, [](const core::GpuTelemetrySample& x) { return x.tensor_active; }));
      raise(job.gpu_sm_active_max,
            MeanOf(t, [](const core::GpuTelemetrySample& x) { return x.sm_active; }));
      raise(job.gpu_gr_engine_active_max,
            MeanOf(t, [](const core::GpuTelemetrySample& x) { return x.gr_engine_active; }));
    }
    if (gr_n > 0) job.gr_engine_active_mean = gr_sum / static_cast<double>(gr_n);
    if (sm_n > 0) job.sm_active_mean = sm_sum / static_cast<double>(sm_n);
    if (clock_n > 0) job.sm_clock_mhz_mean = clock_sum / static_cast<double>(clock_n);
    if (any_power) job.power_w_mean = power_sum;
    if (any_energy) job.energy_j = energy_sum;

    // Job-level characterization over the window.
    absl::StatusOr<core::SpatialImbalance> si =
        core::ComputeSpatialImbalance(telemetry, core::ActivityCounter::kTensorActive,
                                      input.start_ms, input.end_ms - input.start_ms);
    if (si.ok()) job.spatial_imbalance = si->si;
    absl::StatusOr<core::TemporalImbalance> ti =
        core::ComputeTemporalImbalance(telemetry, core::ActivityCounter::kTensorActive);
    if (ti.ok()) job.temporal_imbalance = ti->ti;
    job.idle_gpus = core::FindIdleGpus(telemetry,
                                       any_gr_engine ? core::ActivityCounter::kGrEngineActive
                                                     : core::ActivityCounter::kTensorActive,
                                       options.idle_threshold);
    // A GPU with unavailable or stuck counters in the window is not known to be idle.
    std::erase_if(job.idle_gpus, [&](const std::string& g) { return untrusted_gpus.contains(g); });
    // An idle GPU is reported as idle only: scored among the computing GPUs it would be the
    // slowest straggler (score 0) of every window.
    std::erase_if(gpu_means, [&](const std::pair<std::string, double>& g) {
      return std::find(job.idle_gpus.begin(), job.idle_gpus.end(), g.first) != job.idle_gpus.end();
    });
    absl::StatusOr<std::vector<core::GpuStraggler>> stragglers =
        core::ScoreStragglers(gpu_means, options.straggler_threshold);
    if (stragglers.ok()) {
      for (const core::GpuStraggler& s : *stragglers) {
        if (!s.straggler || !s.score.has_value()) continue;
        job.stragglers.push_back({.gpu = s.gpu_id, .ofu = s.ofu_fraction, .score = 1 - *s.score});
      }
      std::sort(job.stragglers.begin(), job.stragglers.end(),
                [](const StragglerResult& a, const StragglerResult& b) { return a.ofu < b.ofu; });
    }
    if (input.spec != nullptr) {
      job.roofline = MapRoofline(
          core::SummarizeRoofline(*input.spec, options.roofline_precision, telemetry).job_class);
      absl::StatusOr<std::optional<double>> hbm = core::PeakHbmFraction(*input.spec, telemetry);
      if (hbm.ok()) job.hbm_peak_fraction = *hbm;
    }
  }

  job.gpu_equivalents = static_cast<double>(allocated - static_cast<int>(per_gpu.size()));
  for (const WindowResult& r : per_gpu) {
    job.gpu_equivalents += r.gpu_equivalents;
    job.flags |= r.flags & kFlagSharedGpu;
  }
  job.gpu_equivalents = std::max(job.gpu_equivalents, 0.0);

  std::vector<WindowResult> out;
  out.reserve(per_gpu.size() + 1);
  out.push_back(std::move(job));
  for (WindowResult& r : per_gpu) out.push_back(std::move(r));
  return out;
}

// ---------------------------------------------------------------------------------------

namespace {

// The newest few distinct sample times of one GPU, ascending.
struct RecentTimes {
  std::array<int64_t, core::kSamplingHistory> ms{};
  size_t n = 0;

  void Add(int64_t t) {
    int64_t* const first = ms.data();
    int64_t* const end = first + n;
    int64_t* const pos = std::lower_bound(first, end, t);
    if (pos != end && *pos == t) return;
    if (n == ms.size()) {
      if (pos == first) return;  // older than every time kept
      std::move(first + 1, pos, first);
      *(pos - 1) = t;
      return;
    }
    std::move_backward(pos, end, end + 1);
    *pos = t;
    ++n;
  }
};

// Everything of a result but `finalized`, for telling whether finalizing a window changes what
// was emitted when it closed. In-process only (absl::Hash is seeded per process).
uint64_t ContentDigest(const WindowResult& r) {
  std::vector<std::tuple<std::string, double, double>> stragglers;
  stragglers.reserve(r.stragglers.size());
  for (const StragglerResult& s : r.stragglers) stragglers.emplace_back(s.gpu, s.ofu, s.score);
  return absl::Hash<std::tuple<int64_t, std::string, int64_t, int64_t, std::string, int64_t,
                               std::optional<double>, double, std::optional<double>, int, int,
                               double, std::optional<double>, std::optional<double>,
                               std::optional<double>, std::optional<double>,
                               std::optional<double>, uint32_t>>{}(
             {r.job, r.gpu, r.start_ms, r.end_ms, r.gpu_model, r.sample_count, r.ofu,
              r.ofu_stddev, r.ofu_ci95_half_width, r.gpus_reporting, r.gpus_allocated,
              r.gpu_coverage, r.gpu_ofu_min, r.gpu_ofu_median, r.gpu_ofu_max,
              r.tensor_active_mean, r.sm_clock_mhz_mean, r.flags}) ^
         absl::Hash<std::tuple<std::optional<double>, std::optional<double>,
                               std::vector<std::tuple<std::string, double, double>>,
                               std::vector<std::string>, int, std::optional<double>,
                               std::optional<double>, std::optional<double>, double, int64_t>>{}(
             {r.spatial_imbalance, r.temporal_imbalance, stragglers, r.idle_gpus,
              static_cast<int>(r.roofline), r.hbm_peak_fraction, r.energy_j, r.power_w_mean,
              r.gpu_equivalents, r.late_sample_count}) * 0x9E3779B97F4A7C15ull;
}

}  // namespace

struct WindowEngine::OpenWindow {
  int64_t start_ms = 0;
  std::vector<WindowInput::Packed> samples;
  int64_t first_ms = std::numeric_limits<int64_t>::max();  // sample times, any GPU
  int64_t last_ms = kNoTime;
  bool closed = false;  // emitted at least once
  bool dirty = false;   // samples added since the last emission
  // Per-GPU result last emitted for this window, by GPU name: its content digest. A per-GPU
  // result that a revision or finalization would emit unchanged is not emitted again.
  absl::flat_hash_map<std::string, uint64_t> emitted_gpu;

  // GPU index -> most workloads seen sharing it (time-slicing), only for shared GPUs.
  absl::flat_hash_map<uint32_t, int> shared_by;

  void Shared(uint32_t gpu, int workloads) {
    int& n = shared_by[gpu];
    n = std::max(n, workloads);
  }

  void Add(const WindowInput::Packed& p) {
    samples.push_back(p);
    first_ms = std::min(first_ms, start_ms + p.offset_ms);
    last_ms = std::max(last_ms, start_ms + p.offset_ms);
  }
};

struct WindowEngine::JobState {
  JobInfo info;
  const core::GpuSpec* spec = nullptr;
  std::vector<std::string> gpu_names;
  absl::flat_hash_map<std::string, uint32_t> gpu_index;
  // Per GPU, of the samples in windows already final: the last energy reading, and the times
  // of the latest samples carrying OFU (the sampling history).
  std::vector<std::pair<int64_t, double>> last_energy;
  std::vector<RecentTimes> final_times;
  // The job's newest sample time in final windows; for a job back after a flush, the newest
  // of its earlier run (`resumed_after_ms`, which also stands in for the history of GPUs
  // without one).
  int64_t final_sample_max_ms = kNoTime;
  int64_t resumed_after_ms = kNoTime;
  std::map<int64_t, OpenWindow> windows;
  int64_t final_before_ms = kNoTime;
  int64_t max_event_ms = kNoTime;
  int64_t last_arrival_ms = kNoTime;

  // By GPU index: the share of the GPU's SMs (a MIG instance's, 1 for a whole GPU), and
  // whether it is a MIG instance.
  std::vector<double> gpu_share;
  std::vector<bool> mig_instance;

  // The index of the sample's GPU in the job, registering it if new.
  uint32_t GpuIndex(const Sample& sample) {
    auto [it, inserted] =
        gpu_index.try_emplace(sample.gpu, static_cast<uint32_t>(gpu_names.size()));
    if (inserted) {
      gpu_names.push_back(sample.gpu);
      last_energy.emplace_back(kNoTime, 0.0);
      final_times.emplace_back();
      // A profile the MIG table lacks counts as a whole GPU (mig.h: no guessed shares).
      double share = 1.0;
      if (!sample.mig_profile.empty() && spec != nullptr) {
        if (absl::StatusOr<core::MigInstanceShape> shape =
                core::FindMigProfile(*spec, sample.mig_profile);
            shape.ok()) {
          share = shape->SmShare();
        }
      }
      gpu_share.push_back(share);
      mig_instance.push_back(!sample.mig_profile.empty());
    }
    return it->second;
  }
};

WindowEngine::WindowEngine(const core::GpuCatalog* catalog, EngineOptions options)
    : catalog_(catalog), options_(std::move(options)) {}

WindowEngine::~WindowEngine() = default;

bool WindowEngine::Knows(int64_t job) const { return jobs_.contains(job); }

WindowEngine::JobState& WindowEngine::StateFor(const JobInfo& info) {
  auto [it, inserted] = jobs_.try_emplace(info.job);
  if (inserted) {
    it->second = std::make_unique<JobState>();
    JobState& s = *it->second;
    s.info = info;
    absl::StatusOr<const core::GpuSpec*> spec = catalog_->Find(info.gpu_model);
    s.spec = spec.ok() ? *spec : nullptr;
    s.final_before_ms = info.final_before_ms;
    s.max_event_ms = info.max_event_ms;
    // Every window of an earlier run is final: the job was flushed and is back.
    if (info.max_event_ms != kNoTime && info.max_event_ms < info.final_before_ms) {
      s.final_sample_max_ms = s.resumed_after_ms = info.max_event_ms;
    }
  }
  return *it->second;
}

namespace {
WindowInput::Packed Pack(const Sample& s, int64_t window_start_ms, uint32_t gpu) {
  return {.offset_ms = static_cast<int32_t>(s.timestamp_ms - window_start_ms),
          .gpu = gpu,
          .tensor_active = static_cast<float>(s.tensor_active),
          .sm_clock_mhz = static_cast<float>(s.sm_clock_mhz),
          .dram_active = static_cast<float>(s.dram_active),
          .gr_engine_active = static_cast<float>(s.gr_engine_active),
          .fb_used_mib = static_cast<float>(s.fb_used_mib),
          .power_w = static_cast<float>(s.power_w),
          .sm_active = static_cast<float>(s.sm_active),
          .energy_mj = s.energy_mj};
}
}  // namespace

AddOutcome WindowEngine::Add(const JobInfo& info, const Sample& sample, int64_t arrival_ms) {
  JobState& job = StateFor(info);
  const int64_t ws = WindowStart(sample.timestamp_ms, options_.window_ms);
  job.last_arrival_ms = std::max(job.last_arrival_ms, arrival_ms);
  if (ws < job.final_before_ms) {
    if (!late_.empty() && late_.back().job == info.job && late_.back().window_start_ms == ws) {
      ++late_.back().count;
    } else {
      late_.push_back({.job = info.job, .window_start_ms = ws, .count = 1});
    }
    return AddOutcome::kLate;
  }
  const uint32_t gpu = job.GpuIndex(sample);
  OpenWindow& w = job.windows[ws];
  w.start_ms = ws;
  w.Add(Pack(sample, ws, gpu));
  if (sample.shared_by > 1) w.Shared(gpu, sample.shared_by);
  w.dirty = true;
  job.max_event_ms = std::max(job.max_event_ms, sample.timestamp_ms);
  progress_[info.job] = {
      .job = info.job, .final_before_ms = job.final_before_ms, .max_event_ms = job.max_event_ms};
  return AddOutcome::kAccepted;
}

void WindowEngine::FoldIntoFinal(JobState& job, uint32_t gpu, int64_t timestamp_ms,
                                 bool counts_for_sampling, double energy_mj) {
  std::pair<int64_t, double>& last = job.last_energy[gpu];
  if (std::isfinite(energy_mj) && timestamp_ms >= last.first) last = {timestamp_ms, energy_mj};
  if (counts_for_sampling) job.final_times[gpu].Add(timestamp_ms);
  job.final_sample_max_ms = std::max(job.final_sample_max_ms, timestamp_ms);
}

void WindowEngine::Restore(const JobInfo& info, const Sample& sample) {
  JobState& job = StateFor(info);
  const int64_t ws = WindowStart(sample.timestamp_ms, options_.window_ms);
  const uint32_t gpu = job.GpuIndex(sample);
  const WindowInput::Packed packed = Pack(sample, ws, gpu);
  if (ws < job.final_before_ms) {
    // A final window: only what the next windows need of it (energy, sampling history).
    FoldIntoFinal(job, gpu, sample.timestamp_ms, CountsForSampling(packed), sample.energy_mj);
    return;
  }
  OpenWindow& w = job.windows[ws];
  w.start_ms = ws;
  w.Add(packed);
  if (sample.shared_by > 1) w.Shared(gpu, sample.shared_by);
}

void WindowEngine::RestoreDone(int64_t job_id) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return;
  JobState& job = *it->second;
  for (auto& [start, w] : job.windows) {
    w.closed = start + options_.window_ms <= job.max_event_ms;
    w.dirty = false;
  }
}

void WindowEngine::Emit(JobState& job, OpenWindow& window, bool finalize) {
  WindowInput in;
  in.job = job.info.job;
  in.gpu_model = job.info.gpu_model;
  in.spec = job.spec;
  in.gpus_allocated = job.info.gpus_allocated;
  in.start_ms = window.start_ms;
  in.end_ms = window.start_ms + options_.window_ms;
  // Borrow the names and samples for the computation (no copies); they go back below.
  in.gpu_names = std::move(job.gpu_names);
  in.gpu_share = std::move(job.gpu_share);
  in.mig_instance = std::move(job.mig_instance);
  in.shared_by = window.shared_by;
  in.samples = std::move(window.samples);
  in.previous_energy = job.last_energy;
  // A previous window still open holds the freshest readings before this one.
  auto prev = job.windows.find(window.start_ms - options_.window_ms);
  if (prev != job.windows.end()) {
    for (const WindowInput::Packed& p : prev->second.samples) {
      const int64_t t = prev->second.start_ms + p.offset_ms;
      if (std::isfinite(p.energy_mj) && t >= in.previous_energy[p.gpu].first) {
        in.previous_energy[p.gpu] = {t, p.energy_mj};
      }
    }
  }
  // Each GPU's samples around the window: the history of the final windows, then the other
  // open windows. Silence counts only as far as lateness lets the window see.
  const size_t gpus = in.gpu_names.size();
  std::vector<RecentTimes> earlier = job.final_times;
  in.sampling.resize(gpus);
  for (const auto& [start, other] : job.windows) {
    if (start == window.start_ms) continue;
    for (const WindowInput::Packed& p : other.samples) {
      if (!CountsForSampling(p)) continue;
      const int64_t t = start + p.offset_ms;
      if (start < window.start_ms) {
        earlier[p.gpu].Add(t);
      } else if (std::optional<int64_t>& next = in.sampling[p.gpu].next_ms; !next || t < *next) {
        next = t;
      }
    }
  }
  const int64_t known_until = std::min(job.max_event_ms, in.end_ms + options_.allowed_lateness_ms);
  for (size_t g = 0; g < gpus; ++g) {
    core::SamplingContext& c = in.sampling[g];
    c.known_until_ms = known_until;
    RecentTimes& e = earlier[g];
    if (e.n == 0 && job.resumed_after_ms != kNoTime && job.resumed_after_ms < in.start_ms) {
      e.Add(job.resumed_after_ms);
    }
    // A GPU silent for longer than a gap is filled is no longer taken for one of the job's.
    if (e.n > 0 && in.end_ms - e.ms[e.n - 1] <= options_.max_gap_fill_ms) {
      c.earlier_ms.assign(e.ms.begin(), e.ms.begin() + static_cast<std::ptrdiff_t>(e.n));
    }
  }
  std::vector<WindowResult> results = ComputeWindow(in, options_);
  job.gpu_names = std::move(in.gpu_names);
  job.gpu_share = std::move(in.gpu_share);
  job.mig_instance = std::move(in.mig_instance);
  window.samples = std::move(in.samples);
  for (WindowResult& r : results) {
    r.finalized = finalize;
    if (!r.gpu.empty()) {
      const uint64_t digest = ContentDigest(r);
      auto [slot, first] = window.emitted_gpu.try_emplace(r.gpu, digest);
      if (!first && slot->second == digest) continue;  // as already emitted
      slot->second = digest;
    }
    results_.push_back(std::move(r));
  }
  window.closed = true;
  window.dirty = false;
}

void WindowEngine::FillGaps(JobState& job) {
  const int64_t W = options_.window_ms;
  int64_t previous_ms = job.final_sample_max_ms;
  for (auto it = job.windows.begin(); it != job.windows.end(); ++it) {
    const OpenWindow& w = it->second;
    if (w.samples.empty()) continue;
    if (previous_ms != kNoTime && w.first_ms > previous_ms &&
        w.first_ms - previous_ms <= options_.max_gap_fill_ms) {
      for (int64_t start = std::max(WindowStart(previous_ms, W) + W, job.final_before_ms);
           start < w.start_ms; start += W) {
        job.windows.try_emplace(start).first->second.start_ms = start;
      }
    }
    previous_ms = std::max(previous_ms, w.last_ms);
  }
}

void WindowEngine::CloseAndFinalize(JobState& job, bool everything) {
  const int64_t W = options_.window_ms;
  FillGaps(job);
  int64_t final_before = job.final_before_ms;
  if (job.max_event_ms != kNoTime) {
    const int64_t by_event = WindowStart(job.max_event_ms - options_.allowed_lateness_ms, W);
    final_before = std::max(final_before, by_event);
  }
  if (everything) {
    if (!job.windows.empty()) {
      final_before = std::max(final_before, job.windows.rbegin()->first + W);
    }
  }
  for (auto it = job.windows.begin(); it != job.windows.end();) {
    OpenWindow& w = it->second;
    const bool final_now = w.start_ms < final_before;
    const bool close_now = everything || w.start_ms + W <= job.max_event_ms;
    if (final_now) {
      Emit(job, w, /*finalize=*/true);
      for (const WindowInput::Packed& p : w.samples) {
        FoldIntoFinal(job, p.gpu, w.start_ms + p.offset_ms, CountsForSampling(p), p.energy_mj);
      }
      it = job.windows.erase(it);
      continue;
    }
    if (close_now && (!w.closed || w.dirty)) Emit(job, w, /*finalize=*/false);
    ++it;
  }
  if (final_before != job.final_before_ms) {
    job.final_before_ms = final_before;
    progress_[job.info.job] = {.job = job.info.job,
                               .final_before_ms = job.final_before_ms,
                               .max_event_ms = job.max_event_ms};
  }
}

void WindowEngine::Advance(std::optional<int64_t> now_ms) {
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    JobState& job = *it->second;
    const bool idle = now_ms.has_value() && job.last_arrival_ms != kNoTime &&
                      job.last_arrival_ms + options_.idle_flush_ms <= *now_ms;
    CloseAndFinalize(job, idle);
    if (idle) {
      jobs_.erase(it++);
    } else {
      ++it;
    }
  }
}

void WindowEngine::FlushJob(int64_t job_id) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return;
  CloseAndFinalize(*it->second, /*everything=*/true);
  jobs_.erase(it);
}

std::vector<WindowResult> WindowEngine::TakeResults() { return std::exchange(results_, {}); }

std::vector<LateCount> WindowEngine::TakeLateCounts() { return std::exchange(late_, {}); }

std::vector<JobProgress> WindowEngine::TakeProgress() {
  std::vector<JobProgress> out;
  out.reserve(progress_.size());
  for (auto& [job, p] : progress_) out.push_back(p);
  progress_.clear();
  std::sort(out.begin(), out.end(),
            [](const JobProgress& a, const JobProgress& b) { return a.job < b.job; });
  return out;
}

std::optional<WindowEngine::Standing> WindowEngine::StandingOf(int64_t job) const {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return std::nullopt;
  return Standing{.final_before_ms = it->second->final_before_ms,
                  .max_event_ms = it->second->max_event_ms,
                  .gpus = it->second->gpu_names.size()};
}

std::vector<RecomputeSpan> LateRecomputeSpans(std::vector<int64_t> late_starts,
                                              int64_t final_before_ms, int64_t window_ms,
                                              int max_windows) {
  std::sort(late_starts.begin(), late_starts.end());
  late_starts.erase(std::unique(late_starts.begin(), late_starts.end()), late_starts.end());
  std::vector<RecomputeSpan> merged;
  for (int64_t start : late_starts) {
    const int64_t from = start - window_ms;
    const int64_t to = std::min(start + 2 * window_ms, std::max(final_before_ms, start + window_ms));
    if (!merged.empty() && from <= merged.back().to_ms) {
      merged.back().to_ms = std::max(merged.back().to_ms, to);
    } else {
      merged.push_back({from, to});
    }
  }
  const int64_t most = int64_t{std::max(1, max_windows)} * window_ms;
  std::vector<RecomputeSpan> out;
  for (const RecomputeSpan& m : merged) {
    for (int64_t from = m.from_ms; from < m.to_ms; from += most) {
      out.push_back({from, std::min(m.to_ms, from + most)});
    }
  }
  return out;
}

RecomputeSpan RecomputeSampleRange(const RecomputeSpan& span, const EngineOptions& options) {
  return {span.from_ms - RestoreLookbackMs(options), span.to_ms + options.allowed_lateness_ms};
}

std::vector<WindowResult> RecomputeFinalWindows(const core::GpuCatalog* catalog,
                                                const EngineOptions& options, const JobInfo& info,
                                                std::vector<Sample> samples,
                                                const RecomputeSpan& span) {
  std::stable_sort(samples.begin(), samples.end(), [](const Sample& a, const Sample& b) {
    return a.timestamp_ms < b.timestamp_ms;
  });
  // The windows before the span are final and give the span its energy readings and sampling
  // history; the span's are open until the flush below finalizes them, as event time did.
  JobInfo job = info;
  job.final_before_ms = span.from_ms;
  if (!samples.empty()) job.max_event_ms = std::max(job.max_event_ms, samples.back().timestamp_ms);
  WindowEngine engine(catalog, options);
  for (const Sample& s : samples) engine.Restore(job, s);
  engine.RestoreDone(job.job);
  engine.FlushJob(job.job);
  std::vector<WindowResult> out;
  for (WindowResult& w : engine.TakeResults()) {
    if (w.start_ms < span.from_ms || w.start_ms >= span.to_ms) continue;
    w.finalized = true;
    w.flags = (w.flags & ~kFlagLateSamplesDropped) | kFlagLateSamplesRecomputed;
    out.push_back(std::move(w));
  }
  return out;
}

size_t WindowEngine::MemoryBytes() const {
  size_t bytes = 0;
  for (const auto& [id, job] : jobs_) {
    bytes += sizeof(JobState);
    for (const std::string& n : job->gpu_names) {
      bytes += sizeof(std::string) + (n.capacity() > 15 ? n.capacity() + 1 : 0);
    }
    // Hash map slots: key string + value + control byte.
    bytes += job->gpu_index.capacity() * (sizeof(std::string) + sizeof(uint32_t) + 1);
    bytes += job->last_energy.capacity() * sizeof(std::pair<int64_t, double>);
    bytes += job->final_times.capacity() * sizeof(RecentTimes);
    for (const auto& [start, w] : job->windows) {
      bytes += sizeof(OpenWindow) + 4 * sizeof(void*);  // map node
      bytes += w.samples.capacity() * sizeof(WindowInput::Packed);
    }
  }
  return bytes;
}

size_t WindowEngine::ActiveGpuCount() const {
  size_t n = 0;
  for (const auto& [id, job] : jobs_) n += job->gpu_names.size();
  return n;
}

}  // namespace goodput::ofu
