#include "services/ofu/ofu_queries.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <map>
#include <tuple>

#include "absl/container/flat_hash_set.h"
#include "services/core/characterization.h"
#include "services/core/ofu.h"

namespace goodput::ofu {
namespace {

core::OfuStats StatsOf(const WindowResult& w) {
  core::OfuStats s;
  if (!w.ofu.has_value() || w.sample_count <= 0) return s;
  s.sample_count = w.sample_count;
  s.mean_ofu = w.ofu;
  s.stddev_ofu = w.ofu_stddev;
  return s;
}

void MaxInto(std::optional<double>& into, const std::optional<double>& v) {
  if (v.has_value()) into = into.has_value() ? std::max(*into, *v) : *v;
}
void MinInto(std::optional<double>& into, const std::optional<double>& v) {
  if (v.has_value()) into = into.has_value() ? std::min(*into, *v) : *v;
}

struct Mean {
  double sum = 0, weight = 0;
  void Add(const std::optional<double>& v, double w = 1) {
    if (v.has_value() && std::isfinite(*v)) {
      sum += *v * w;
      weight += w;
    }
  }
  std::optional<double> Get() const {
    if (weight <= 0) return std::nullopt;
    return sum / weight;
  }
};

}  // namespace

int32_t EffectiveResolutionS(int32_t resolution_s, int32_t native_s) {
  if (native_s <= 0) return resolution_s;
  if (resolution_s <= native_s) return native_s;
  return (resolution_s + native_s - 1) / native_s * native_s;
}

std::vector<StoredWindow> Downsample(const std::vector<StoredWindow>& windows, int32_t bucket_s) {
  std::vector<StoredWindow> out;
  if (windows.empty()) return out;
  if (bucket_s <= windows.front().window_s) return windows;
  const int64_t bucket_ms = int64_t{bucket_s} * 1000;
  size_t i = 0;
  while (i < windows.size()) {
    const std::string& gpu = windows[i].result.gpu;
    const int64_t start = WindowStart(windows[i].result.start_ms, bucket_ms);
    size_t j = i;
    core::OfuStats stats;
    Mean coverage, median, si, tensor, clock, power;
    StoredWindow b;
    WindowResult& r = b.result;
    r = windows[i].result;
    r.start_ms = start;
    r.end_ms = start + bucket_ms;
    b.window_s = bucket_s;
    r.flags = 0;
    r.gpu_ofu_min.reset();
    r.gpu_ofu_max.reset();
    r.temporal_imbalance.reset();
    r.hbm_peak_fraction.reset();
    r.energy_j.reset();
    r.stragglers.clear();
    r.idle_gpus.clear();
    r.late_sample_count = 0;
    r.finalized = true;
    r.gpus_reporting = 0;
    r.gpus_allocated = 0;
    absl::flat_hash_set<std::string> idle;
    std::map<std::string, StragglerResult> stragglers;
    int compute = 0, memory = 0, idle_class = 0;
    for (; j < windows.size() && windows[j].result.gpu == gpu &&
           WindowStart(windows[j].result.start_ms, bucket_ms) == start;
         ++j) {
      const WindowResult& w = windows[j].result;
      stats = core::MergeOfuStats(stats, StatsOf(w));
      coverage.Add(w.gpu_coverage);
      median.Add(w.gpu_ofu_median, static_cast<double>(w.sample_count));
      si.Add(w.spatial_imbalance);
      tensor.Add(w.tensor_active_mean, static_cast<double>(w.sample_count));
      clock.Add(w.sm_clock_mhz_mean, static_cast<double>(w.sample_count));
      power.Add(w.power_w_mean);
      MinInto(r.gpu_ofu_min, w.gpu_ofu_min);
      MaxInto(r.gpu_ofu_max, w.gpu_ofu_max);
      MaxInto(r.temporal_imbalance, w.temporal_imbalance);
      MaxInto(r.hbm_peak_fraction, w.hbm_peak_fraction);
      if (w.energy_j.has_value()) r.energy_j = r.energy_j.value_or(0) + *w.energy_j;
      r.flags |= w.flags;
      r.late_sample_count += w.late_sample_count;
      r.finalized = r.finalized && w.finalized;
      r.gpus_reporting = std::max(r.gpus_reporting, w.gpus_reporting);
      r.gpus_allocated = std::max(r.gpus_allocated, w.gpus_allocated);
      for (const std::string& g : w.idle_gpus) idle.insert(g);
      for (const StragglerResult& s : w.stragglers) {
        auto [it, inserted] = stragglers.try_emplace(s.gpu, s);
        if (!inserted && s.score < it->second.score) it->second = s;
      }
      if (w.roofline == Roofline::kComputeBound) ++compute;
      if (w.roofline == Roofline::kMemoryBound) ++memory;
      if (w.roofline == Roofline::kIdle) ++idle_class;
      b.revision = std::max(b.revision, windows[j].revision);
    }
    r.sample_count = stats.sample_count;
    r.ofu = stats.mean_ofu;
    r.ofu_stddev = stats.stddev_ofu;
    r.ofu_ci95_half_width = stats.ci95_half_width;
    r.gpu_coverage = coverage.Get().value_or(0);
    r.gpu_ofu_median = median.Get();
    r.spatial_imbalance = si.Get();
    r.tensor_active_mean = tensor.Get();
    r.sm_clock_mhz_mean = clock.Get();
    r.power_w_mean = power.Get();
    r.idle_gpus.assign(idle.begin(), idle.end());
    std::sort(r.idle_gpus.begin(), r.idle_gpus.end());
    for (auto& [g, s] : stragglers) r.stragglers.push_back(s);
    std::sort(r.stragglers.begin(), r.stragglers.end(),
              [](const StragglerResult& a, const StragglerResult& b) { return a.ofu < b.ofu; });
    r.roofline = compute + memory == 0
                     ? (idle_class > 0 ? Roofline::kIdle : Roofline::kUnspecified)
                     : (compute > memory ? Roofline::kComputeBound : Roofline::kMemoryBound);
    out.push_back(std::move(b));
    i = j;
  }
  return out;
}

std::string OfuUnavailableReason(const JobSummaryFigures& figures, const std::string& gpu_model,
                                 bool has_windows) {
  if (figures.ofu.has_value()) return "";
  if (!has_windows) return "no telemetry has been attributed to the job yet";
  if (figures.flags & kFlagUnknownGpuModel) {
    return absl::StrCat("GPU model \"", gpu_model,
                        "\" is not in the GPU catalog, so there is no peak to divide by; its "
                        "samples are stored: add the model under gpu_catalog.overrides in the "
                        "configuration and OFU is computed from then on");
  }
  if (figures.flags & kFlagProfilingCounterStuck) {
    return "DCGM profiling counters read 0 while the GPUs drew high power at boost clock "
           "(stuck counters): restart the DCGM profiling module or dcgm-exporter";
  }
  if (figures.flags & kFlagProfilingUnavailable) {
    return "DCGM profiling fields (tensor activity) are missing: profiling is paused (Nsight "
           "holds the counters) or not enabled in dcgm-exporter's metric list";
  }
  return "no sample carried both tensor activity (DCGM_FI_PROF_PIPE_TENSOR_ACTIVE) and SM clock "
         "(DCGM_FI_DEV_SM_CLOCK)";
}

JobSummaryFigures SummarizeJob(const JobRow& job, const std::vector<StoredWindow>& job_windows,
                               const std::vector<PerGpuFigure>& gpus, int64_t now_ms,
                               double steady_fraction, double straggler_threshold) {
  JobSummaryFigures f;
  core::OfuStats all;
  Mean coverage, si;
  std::vector<double> window_ofu;
  int compute = 0, memory = 0, idle_class = 0;
  double windows_gpu_hours = 0;
  double windows_allocated_hours = 0;
  for (const StoredWindow& sw : job_windows) {
    const WindowResult& w = sw.result;
    if (!f.first_start_ms.has_value()) f.first_start_ms = w.start_ms;
    f.last_end_ms = std::max(f.last_end_ms.value_or(w.end_ms), w.end_ms);
    all = core::MergeOfuStats(all, StatsOf(w));
    coverage.Add(w.gpu_coverage);
    si.Add(w.spatial_imbalance);
    MaxInto(f.temporal_imbalance, w.temporal_imbalance);
    MaxInto(f.hbm_peak_fraction, w.hbm_peak_fraction);
    if (w.energy_j.has_value()) f.energy_j = f.energy_j.value_or(0) + *w.energy_j;
    f.flags |= w.flags;
    for (uint32_t rest = w.flags; rest != 0; rest &= rest - 1) {
      ++f.flag_windows[std::countr_zero(rest)];
    }
    f.all_final = f.all_final && w.finalized;
    const double hours = static_cast<double>(sw.window_s) / 3600.0;
    // GPU-equivalents: a MIG instance counts its share of the GPU, a time-sliced GPU 1/n.
    windows_gpu_hours += w.gpu_equivalents * hours;
    windows_allocated_hours += w.gpus_allocated * hours;
    f.effective_gpu_hours += w.gpu_equivalents * hours * w.ofu.value_or(0);
    f.idle_gpu_hours += static_cast<double>(w.idle_gpus.size()) * hours;
    if (w.ofu.has_value()) window_ofu.push_back(*w.ofu);
    if (w.roofline == Roofline::kComputeBound) ++compute;
    if (w.roofline == Roofline::kMemoryBound) ++memory;
    if (w.roofline == Roofline::kIdle) ++idle_class;
  }
  f.sample_count = all.sample_count;
  f.ofu = all.mean_ofu;
  f.ofu_ci95_half_width = all.ci95_half_width;
  f.gpu_coverage = coverage.Get().value_or(0);
  f.spatial_imbalance = si.Get();
  f.roofline = compute + memory == 0
                   ? (idle_class > 0 ? Roofline::kIdle : Roofline::kUnspecified)
                   : (compute > memory ? Roofline::kComputeBound : Roofline::kMemoryBound);

  // GPU-hours held: the scheduler's times when known, else the windows' span; allocations
  // of MIG instances or shared GPUs count as the GPU-equivalents their windows stand for.
  f.gpu_hours = windows_gpu_hours;
  if (job.start_ms.has_value() && job.gpus_allocated > 0) {
    const int64_t end = job.end_ms.value_or(std::max(now_ms, f.last_end_ms.value_or(now_ms)));
    const double equivalent_share =
        windows_allocated_hours > 0 ? windows_gpu_hours / windows_allocated_hours : 1.0;
    if (end > *job.start_ms) {
      f.gpu_hours =
          std::max(windows_gpu_hours, job.gpus_allocated * equivalent_share *
                                          static_cast<double>(end - *job.start_ms) / 3.6e6);
    }
  }
  if (f.energy_j.has_value() && f.gpu_hours > 0) {
    f.energy_kwh_per_gpu_hour = *f.energy_j / 3.6e6 / f.gpu_hours;
  }

  // Steady state.
  if (!window_ofu.empty()) {
    std::vector<double> sorted = window_ofu;
    std::sort(sorted.begin(), sorted.end());
    const size_t n = sorted.size();
    const double median = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
    size_t first = 0;
    bool found = false;
    for (size_t k = 0; k < job_windows.size(); ++k) {
      const std::optional<double>& o = job_windows[k].result.ofu;
      if (o.has_value() && *o >= steady_fraction * median) {
        first = k;
        found = true;
        break;
      }
    }
    if (found && (first > 0 || job_windows.size() >= 3)) {
      core::OfuStats steady;
      for (size_t k = first; k < job_windows.size(); ++k) {
        steady = core::MergeOfuStats(steady, StatsOf(job_windows[k].result));
      }
      f.steady_state_ofu = steady.mean_ofu;
      f.steady_state_start_ms = job_windows[first].result.start_ms;
    }
  }

  // Stragglers and idle GPUs over the whole job, from the per-GPU means.
  std::vector<std::pair<std::string, double>> means;
  for (const PerGpuFigure& g : gpus) {
    // An idle GPU is reported as idle only, not also as the slowest straggler.
    if (g.idle) {
      f.idle_gpus.push_back(g.gpu);
    } else {
      means.emplace_back(g.gpu, g.ofu);
    }
  }
  absl::StatusOr<std::vector<core::GpuStraggler>> s =
      core::ScoreStragglers(means, straggler_threshold);
  if (s.ok()) {
    for (const core::GpuStraggler& g : *s) {
      if (g.straggler && g.score.has_value()) {
        f.stragglers.push_back({.gpu = g.gpu_id, .ofu = g.ofu_fraction, .score = 1 - *g.score});
      }
    }
    std::sort(f.stragglers.begin(), f.stragglers.end(),
              [](const StragglerResult& a, const StragglerResult& b) { return a.ofu < b.ofu; });
  }
  return f;
}

FleetPiece FleetPieceOf(const JobRow& job, const StoredWindow& window,
                        double low_efficiency_threshold) {
  const WindowResult& w = window.result;
  const double hours = static_cast<double>(window.window_s) / 3600.0;
  const double gh = w.gpu_equivalents * hours;
  FleetPiece p{.job = job, .gpu_model = w.gpu_model, .gpu_hours = gh};
  p.idle_gpu_hours = static_cast<double>(w.idle_gpus.size()) * hours;
  if (w.ofu.has_value()) {
    p.effective_gpu_hours = gh * *w.ofu;
    if (*w.ofu < low_efficiency_threshold) p.low_efficiency_gpu_hours = gh;
    const int decile = std::clamp(static_cast<int>(std::floor(*w.ofu * 10)), 0, 9);
    p.gpu_hours_by_ofu_decile[decile] = gh;
  }
  return p;
}

std::pair<std::vector<FleetGroupFigures>, FleetGroupFigures> SummarizeFleet(
    const std::vector<FleetPiece>& pieces, const FleetFilter& filter,
    const std::vector<FleetDimension>& group_by) {
  using Key =
      std::tuple<std::string, std::string, std::string, std::string, std::string, std::string>;
  std::map<Key, FleetGroupFigures> groups;
  std::map<Key, absl::flat_hash_set<int64_t>> jobs;
  FleetGroupFigures total;
  absl::flat_hash_set<int64_t> total_jobs;
  auto add = [](FleetGroupFigures& g, const FleetPiece& p) {
    g.gpu_hours += p.gpu_hours;
    g.idle_gpu_hours += p.idle_gpu_hours;
    g.effective_gpu_hours += p.effective_gpu_hours;
    g.low_efficiency_gpu_hours += p.low_efficiency_gpu_hours;
    for (size_t d = 0; d < g.gpu_hours_by_ofu_decile.size(); ++d) {
      g.gpu_hours_by_ofu_decile[d] += p.gpu_hours_by_ofu_decile[d];
    }
  };
  for (const FleetPiece& p : pieces) {
    const JobRow& job = p.job;
    if (!filter.cluster.empty() && job.cluster != filter.cluster) continue;
    if (!filter.gpu_model.empty() && job.gpu_model != filter.gpu_model &&
        p.gpu_model != filter.gpu_model) {
      continue;
    }
    if (!filter.team.empty() && job.team != filter.team) continue;
    if (!filter.scheduler.empty() && job.scheduler != filter.scheduler) continue;
    if (!filter.user.empty() && job.user != filter.user) continue;
    if (!filter.workload_fingerprint.empty() &&
        job.workload_fingerprint != filter.workload_fingerprint) {
      continue;
    }
    const std::string model = job.gpu_model.empty() ? p.gpu_model : job.gpu_model;
    Key key;
    for (FleetDimension d : group_by) {
      switch (d) {
        case FleetDimension::kCluster:
          std::get<0>(key) = job.cluster;
          break;
        case FleetDimension::kGpuModel:
          std::get<1>(key) = model;
          break;
        case FleetDimension::kTeam:
          std::get<2>(key) = job.team;
          break;
        case FleetDimension::kScheduler:
          std::get<3>(key) = job.scheduler;
          break;
        case FleetDimension::kUser:
          std::get<4>(key) = job.user;
          break;
        case FleetDimension::kWorkload:
          std::get<5>(key) = job.workload_fingerprint;
          break;
      }
    }
    FleetGroupFigures& g = groups[key];
    std::tie(g.cluster, g.gpu_model, g.team, g.scheduler, g.user, g.workload_fingerprint) = key;
    add(g, p);
    add(total, p);
    jobs[key].insert(job.id);
    total_jobs.insert(job.id);
  }
  std::vector<FleetGroupFigures> out;
  for (auto& [key, g] : groups) {
    g.job_count = static_cast<int64_t>(jobs[key].size());
    g.ofu_mean = g.gpu_hours > 0 ? g.effective_gpu_hours / g.gpu_hours : 0;
    out.push_back(g);
  }
  std::sort(out.begin(), out.end(), [](const FleetGroupFigures& a, const FleetGroupFigures& b) {
    return a.gpu_hours > b.gpu_hours;
  });
  total.job_count = static_cast<int64_t>(total_jobs.size());
  total.ofu_mean = total.gpu_hours > 0 ? total.effective_gpu_hours / total.gpu_hours : 0;
  return {out, total};
}

std::pair<std::vector<FleetGroupFigures>, FleetGroupFigures> SummarizeFleet(
    const std::vector<std::pair<JobRow, StoredWindow>>& windows, const FleetFilter& filter,
    const std::vector<FleetDimension>& group_by, double low_efficiency_threshold) {
  std::vector<FleetPiece> pieces;
  pieces.reserve(windows.size());
  for (const auto& [job, w] : windows)
    pieces.push_back(FleetPieceOf(job, w, low_efficiency_threshold));
  return SummarizeFleet(pieces, filter, group_by);
}

}  // namespace goodput::ofu
