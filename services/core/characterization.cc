#include "services/core/characterization.h"

#include <algorithm>
#include <cmath>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace goodput::core {
namespace {

// Below this, an activity fraction counts as zero for idle classification.
constexpr double kIdleActivity = 0.01;

absl::Status RequireGpus(const std::vector<GpuTelemetrySeries>& gpus) {
  if (gpus.empty()) {
    return absl::InvalidArgumentError("gpus is empty: a job has at least one allocated GPU");
  }
  return absl::OkStatus();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

double CounterValue(const GpuTelemetrySample& s, ActivityCounter counter) {
  switch (counter) {
    case ActivityCounter::kTensorActive:
      return s.tensor_active;
    case ActivityCounter::kFp64Active:
      return s.fp64_active;
    case ActivityCounter::kSmActive:
      return s.sm_active;
    case ActivityCounter::kGrEngineActive:
      return s.gr_engine_active;
    case ActivityCounter::kDramActive:
      return s.dram_active;
  }
  return kMissing;
}

absl::StatusOr<SpatialImbalance> ComputeSpatialImbalance(
    const std::vector<GpuTelemetrySeries>& gpus, ActivityCounter counter, int64_t job_start_ms,
    int64_t window_ms) {
  if (absl::Status s = RequireGpus(gpus); !s.ok()) return s;
  if (window_ms <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("window_ms=", window_ms, " must be > 0"));
  }
  // window index -> TC per GPU
  absl::flat_hash_map<int64_t, std::vector<double>> totals;
  for (size_t g = 0; g < gpus.size(); ++g) {
    for (const GpuTelemetrySample& s : gpus[g].samples) {
      const double v = CounterValue(s, counter);
      if (s.timestamp_ms < job_start_ms || !std::isfinite(v)) continue;
      std::vector<double>& tc = totals[(s.timestamp_ms - job_start_ms) / window_ms];
      if (tc.empty()) tc.assign(gpus.size(), 0.0);
      tc[g] += v;
    }
  }
  SpatialImbalance out;
  double si_sum = 0;
  for (const auto& [window, tc] : totals) {
    const double max_tc = *std::max_element(tc.begin(), tc.end());
    if (max_tc <= 0) {
      ++out.windows_all_zero;
      continue;
    }
    double sum = 0;
    for (double v : tc) sum += v;
    si_sum += 1.0 - sum / (static_cast<double>(gpus.size()) * max_tc);
    ++out.windows_scored;
  }
  if (out.windows_scored > 0) out.si = si_sum / static_cast<double>(out.windows_scored);
  return out;
}

absl::StatusOr<TemporalImbalance> ComputeTemporalImbalance(
    const std::vector<GpuTelemetrySeries>& gpus, ActivityCounter counter) {
  if (absl::Status s = RequireGpus(gpus); !s.ok()) return s;
  TemporalImbalance out;
  for (const GpuTelemetrySeries& gpu : gpus) {
    double sum = 0, max_v = 0;
    int64_t t = 0;
    for (const GpuTelemetrySample& s : gpu.samples) {
      const double v = CounterValue(s, counter);
      if (!std::isfinite(v)) continue;
      sum += v;
      max_v = std::max(max_v, v);
      ++t;
    }
    std::optional<double> ti;
    if (t > 0 && max_v > 0) ti = 1.0 - sum / (static_cast<double>(t) * max_v);
    out.per_gpu.push_back(ti);
    if (ti.has_value()) out.ti = std::max(out.ti.value_or(0.0), *ti);
  }
  return out;
}

absl::StatusOr<std::vector<GpuStraggler>> ScoreStragglers(
    const std::vector<std::pair<std::string, double>>& gpu_ofu, double threshold) {
  if (!std::isfinite(threshold) || threshold <= 0 || threshold > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("straggler threshold=", threshold, " is outside (0, 1]"));
  }
  std::vector<double> values;
  for (const auto& [id, ofu] : gpu_ofu) {
    if (!std::isfinite(ofu) || ofu < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("gpu \"", id, "\": ofu_fraction=", ofu, " must be a finite value >= 0"));
    }
    values.push_back(ofu);
  }
  std::vector<GpuStraggler> out;
  if (values.empty()) return out;
  const double median = Median(values);
  for (const auto& [id, ofu] : gpu_ofu) {
    GpuStraggler s;
    s.gpu_id = id;
    s.ofu_fraction = ofu;
    if (median > 0) {
      s.score = (median - ofu) / median;
      s.straggler = *s.score >= threshold;
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<std::string> FindIdleGpus(const std::vector<GpuTelemetrySeries>& gpus,
                                      ActivityCounter counter, double threshold) {
  std::vector<std::string> idle;
  for (const GpuTelemetrySeries& gpu : gpus) {
    bool active = false;
    for (const GpuTelemetrySample& s : gpu.samples) {
      const double v = CounterValue(s, counter);
      if (std::isfinite(v) && v > threshold) {
        active = true;
        break;
      }
    }
    if (!active) idle.push_back(gpu.gpu_id);
  }
  return idle;
}

absl::string_view RooflineClassName(RooflineClass c) {
  switch (c) {
    case RooflineClass::kUnknown:
      return "unknown";
    case RooflineClass::kIdle:
      return "idle";
    case RooflineClass::kMemoryBound:
      return "memory_bound";
    case RooflineClass::kComputeBound:
      return "compute_bound";
  }
  return "unknown";
}

RooflineClass ClassifyRoofline(const GpuSpec& spec, Precision precision,
                               const GpuTelemetrySample& sample) {
  absl::StatusOr<double> peak_tflops = spec.PeakTflops(precision);
  if (!peak_tflops.ok() || !(spec.hbm_bandwidth_gb_per_s > 0)) return RooflineClass::kUnknown;
  const double tensor = sample.tensor_active;
  const double dram = sample.dram_active;
  if (!std::isfinite(tensor) || !std::isfinite(dram) || tensor < 0 || dram < 0) {
    return RooflineClass::kUnknown;
  }
  const double fp64 = std::isfinite(sample.fp64_active) ? std::max(0.0, sample.fp64_active) : 0;
  if (tensor <= kIdleActivity && dram <= kIdleActivity && fp64 <= kIdleActivity) {
    return RooflineClass::kIdle;
  }
  const double peak_flops = *peak_tflops * 1e12;
  double achieved_flops = tensor * peak_flops;
  if (absl::StatusOr<double> fp64_peak = spec.PeakTflops(Precision::kFp64); fp64_peak.ok()) {
    achieved_flops += fp64 * *fp64_peak * 1e12;
  }
  const double bandwidth_bytes = spec.hbm_bandwidth_gb_per_s * 1e9;
  const double achieved_bytes = dram * bandwidth_bytes;
  if (achieved_bytes <= 0) return RooflineClass::kComputeBound;
  const double ridge = peak_flops / bandwidth_bytes;  // FLOPs per byte
  return achieved_flops / achieved_bytes > ridge ? RooflineClass::kComputeBound
                                                 : RooflineClass::kMemoryBound;
}

RooflineSummary SummarizeRoofline(const GpuSpec& spec, Precision precision,
                                  const std::vector<GpuTelemetrySeries>& gpus) {
  RooflineSummary out;
  for (const GpuTelemetrySeries& gpu : gpus) {
    for (const GpuTelemetrySample& s : gpu.samples) {
      switch (ClassifyRoofline(spec, precision, s)) {
        case RooflineClass::kComputeBound:
          ++out.compute_bound_samples;
          break;
        case RooflineClass::kMemoryBound:
          ++out.memory_bound_samples;
          break;
        case RooflineClass::kIdle:
          ++out.idle_samples;
          break;
        case RooflineClass::kUnknown:
          ++out.unknown_samples;
          break;
      }
    }
  }
  if (out.compute_bound_samples + out.memory_bound_samples > 0) {
    out.job_class = out.compute_bound_samples > out.memory_bound_samples
                        ? RooflineClass::kComputeBound
                        : RooflineClass::kMemoryBound;
  } else if (out.idle_samples > 0) {
    out.job_class = RooflineClass::kIdle;
  }
  return out;
}

absl::StatusOr<std::optional<double>> PeakHbmFraction(const GpuSpec& spec,
                                                      const std::vector<GpuTelemetrySeries>& gpus) {
  if (!(spec.hbm_capacity_gib > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GPU model ", spec.name, ": hbm_capacity_gib=", spec.hbm_capacity_gib, " must be > 0"));
  }
  std::optional<double> peak_mib;
  for (const GpuTelemetrySeries& gpu : gpus) {
    for (const GpuTelemetrySample& s : gpu.samples) {
      if (std::isfinite(s.fb_used_mib)) peak_mib = std::max(peak_mib.value_or(0.0), s.fb_used_mib);
    }
  }
  if (!peak_mib.has_value()) return std::optional<double>();
  return std::optional<double>(*peak_mib / (spec.hbm_capacity_gib * 1024.0));
}

EnergySummary ComputeEnergy(const std::vector<GpuTelemetrySeries>& gpus) {
  EnergySummary out;
  double energy_mj = 0, span_ms = 0;
  for (const GpuTelemetrySeries& gpu : gpus) {
    std::vector<const GpuTelemetrySample*> samples;
    for (const GpuTelemetrySample& s : gpu.samples) {
      if (std::isfinite(s.total_energy_mj) && s.total_energy_mj >= 0) samples.push_back(&s);
    }
    if (samples.size() < 2) continue;
    std::stable_sort(samples.begin(), samples.end(),
                     [](const GpuTelemetrySample* a, const GpuTelemetrySample* b) {
                       return a->timestamp_ms < b->timestamp_ms;
                     });
    for (size_t i = 1; i < samples.size(); ++i) {
      const double delta = samples[i]->total_energy_mj - samples[i - 1]->total_energy_mj;
      if (delta >= 0) {
        energy_mj += delta;
      } else {
        ++out.counter_resets;
        energy_mj += samples[i]->total_energy_mj;
      }
    }
    span_ms += static_cast<double>(samples.back()->timestamp_ms - samples.front()->timestamp_ms);
  }
  out.energy_j = energy_mj / 1000.0;
  out.gpu_hours = span_ms / 3'600'000.0;
  if (out.gpu_hours > 0) {
    out.energy_per_gpu_hour_kwh = out.energy_j / 3.6e6 / out.gpu_hours;
    out.mean_power_w = out.energy_j / (out.gpu_hours * 3600.0);
  }
  return out;
}

absl::StatusOr<JobCharacterization> CharacterizeJob(const GpuSpec& spec,
                                                    const JobCharacterizationInput& input) {
  if (absl::Status s = RequireGpus(input.gpus); !s.ok()) return s;
  if (!(spec.tensor_max_clock_mhz > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("GPU model ", spec.name, ": tensor_max_clock_mhz=", spec.tensor_max_clock_mhz,
                     " must be > 0"));
  }
  JobCharacterization out;
  absl::StatusOr<SpatialImbalance> si = ComputeSpatialImbalance(
      input.gpus, input.imbalance_counter, input.job_start_ms, input.window_ms);
  if (!si.ok()) return si.status();
  out.spatial = *si;
  absl::StatusOr<TemporalImbalance> ti =
      ComputeTemporalImbalance(input.gpus, input.imbalance_counter);
  if (!ti.ok()) return ti.status();
  out.temporal = *std::move(ti);

  std::vector<std::pair<std::string, double>> gpu_ofu;
  for (const GpuTelemetrySeries& gpu : input.gpus) {
    double sum = 0;
    int64_t n = 0;
    for (const GpuTelemetrySample& s : gpu.samples) {
      if (!std::isfinite(s.tensor_active) || !std::isfinite(s.sm_clock_mhz) ||
          s.tensor_active < 0 || s.tensor_active > 1 || s.sm_clock_mhz < 0) {
        continue;
      }
      sum += s.tensor_active * s.sm_clock_mhz / spec.tensor_max_clock_mhz;
      ++n;
    }
    if (n > 0) gpu_ofu.emplace_back(gpu.gpu_id, sum / static_cast<double>(n));
  }
  absl::StatusOr<std::vector<GpuStraggler>> stragglers =
      ScoreStragglers(gpu_ofu, input.straggler_threshold);
  if (!stragglers.ok()) return stragglers.status();
  out.stragglers = *std::move(stragglers);

  out.idle_gpu_ids = FindIdleGpus(input.gpus, input.idle_counter, input.idle_threshold);
  out.roofline = SummarizeRoofline(spec, input.precision, input.gpus);
  if (spec.hbm_capacity_gib > 0) {
    absl::StatusOr<std::optional<double>> hbm = PeakHbmFraction(spec, input.gpus);
    if (!hbm.ok()) return hbm.status();
    out.peak_hbm_fraction = *hbm;
  }
  out.energy = ComputeEnergy(input.gpus);
  return out;
}

}  // namespace goodput::core
