#include "services/core/ofu.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"

namespace goodput::core {
namespace {

OfuStats StatsFromMoments(int64_t n, double mean, double m2) {
  OfuStats s;
  s.sample_count = n;
  if (n == 0) return s;
  s.mean_ofu = mean;
  if (n >= 2) {
    s.stddev_ofu = std::sqrt(std::max(0.0, m2) / static_cast<double>(n - 1));
    s.ci95_half_width = StudentT975(n - 1) * s.stddev_ofu / std::sqrt(static_cast<double>(n));
  }
  return s;
}

double M2Of(const OfuStats& s) {
  return s.sample_count >= 2 ? s.stddev_ofu * s.stddev_ofu * static_cast<double>(s.sample_count - 1)
                             : 0.0;
}

// Median of [first, last), not empty.
template <class It>
double Median(It first, It last) {
  absl::InlinedVector<double, 16> values(first, last);
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// Sample times and spacings of one GPU around a window: a few dozen at most in practice.
using Times = absl::InlinedVector<int64_t, 16>;
using Spacings = absl::InlinedVector<double, 16>;

// Median of the last kSamplingHistory - 1 spacings (fewer if there are fewer), not empty.
double RecentMedian(const Spacings& spacing_ms) {
  const size_t n = std::min(spacing_ms.size(), kSamplingHistory - 1);
  return Median(spacing_ms.end() - static_cast<std::ptrdiff_t>(n), spacing_ms.end());
}

// Sparse sampling and gaps of one GPU, judged on its sample times across the window's edges.
// `in_window_ms`: the times of its samples in the window, ascending, distinct.
uint32_t JudgeSampling(const SamplingContext& context, const Times& in_window_ms,
                       int64_t window_start_ms, int64_t window_end_ms,
                       const OfuWindowOptions& options) {
  Times times;
  for (int64_t t : context.earlier_ms) {
    if (t < window_start_ms) times.push_back(t);
  }
  std::sort(times.begin(), times.end());
  times.erase(std::unique(times.begin(), times.end()), times.end());
  if (times.size() > kSamplingHistory) {
    times.erase(times.begin(), times.end() - kSamplingHistory);
  }
  times.insert(times.end(), in_window_ms.begin(), in_window_ms.end());
  if (times.empty()) return kOfuFlagNone;

  // A silence is a gap when longer than min_gap_s and a few of the intervals before it.
  Spacings spacing_ms;
  auto is_gap = [&](double silence_ms) {
    if (silence_ms <= options.min_gap_s * 1000.0) return false;
    if (spacing_ms.empty()) return silence_ms > options.gap_threshold_s * 1000.0;
    return silence_ms > options.gap_intervals * RecentMedian(spacing_ms);
  };
  uint32_t flags = kOfuFlagNone;
  Spacings regular_ms;  // spacings ending in the window that are not gaps
  for (size_t i = 1; i < times.size(); ++i) {
    const double d = static_cast<double>(times[i] - times[i - 1]);
    const bool gap = times[i] >= window_start_ms && is_gap(d);
    spacing_ms.push_back(d);
    if (times[i] < window_start_ms) continue;
    if (gap) {
      flags |= kOfuFlagGap;
    } else {
      regular_ms.push_back(d);
    }
  }
  const int64_t known_until =
      std::min(context.next_ms.value_or(std::numeric_limits<int64_t>::max()),
               context.known_until_ms.value_or(window_end_ms));
  if (known_until > window_start_ms && is_gap(static_cast<double>(known_until - times.back()))) {
    flags |= kOfuFlagGap;
  }

  // The interval: the window's regular spacings, else (no sample, or one after a gap) the
  // GPU's recent ones.
  std::optional<double> interval_ms;
  if (!regular_ms.empty()) {
    interval_ms = Median(regular_ms.begin(), regular_ms.end());
  } else if (!spacing_ms.empty()) {
    interval_ms = RecentMedian(spacing_ms);
  }
  if (interval_ms.has_value() &&
      *interval_ms > options.max_sample_spacing_s * 1000.0 * (1 + options.spacing_tolerance)) {
    flags |= kOfuFlagCoarseSampling;
  }
  return flags;
}

absl::Status CheckWindow(int64_t window_start_ms, int64_t window_end_ms) {
  if (window_end_ms <= window_start_ms) {
    return absl::InvalidArgumentError(absl::StrCat(
        "window_end_ms=", window_end_ms, " must be after window_start_ms=", window_start_ms));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<double> SampleOfu(double tensor_active, double sm_clock_mhz,
                                 double tensor_max_clock_mhz) {
  if (!std::isfinite(tensor_active) || tensor_active < 0 || tensor_active > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor_active=", tensor_active, " is outside [0, 1]"));
  }
  if (!std::isfinite(sm_clock_mhz) || sm_clock_mhz < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("sm_clock_mhz=", sm_clock_mhz, " must be a finite value >= 0"));
  }
  if (!std::isfinite(tensor_max_clock_mhz) || tensor_max_clock_mhz <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor_max_clock_mhz=", tensor_max_clock_mhz, " must be > 0"));
  }
  return tensor_active * sm_clock_mhz / tensor_max_clock_mhz;
}

std::vector<std::string> OfuQualityFlagNames(uint32_t flags) {
  static constexpr std::array<const char*, 8> kNames = {
      "coarse_sampling",      "tensor_active_out_of_range",
      "sm_clock_above_boost", "gap",
      "duplicate_timestamp",  "invalid_value",
      "no_samples",           "partial_coverage"};
  std::vector<std::string> out;
  for (size_t bit = 0; bit < kNames.size(); ++bit) {
    if (flags & (1u << bit)) out.emplace_back(kNames[bit]);
  }
  return out;
}

double StudentT975(int64_t degrees_of_freedom) {
  static constexpr std::array<double, 30> kTable = {
      12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
      2.201,  2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
      2.080,  2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};
  if (degrees_of_freedom < 1) degrees_of_freedom = 1;
  if (degrees_of_freedom <= 30) return kTable[degrees_of_freedom - 1];
  // Cornish-Fisher expansion around the normal quantile; error < 1e-4 for df > 30.
  const double z = 1.959963984540054;
  const double v = static_cast<double>(degrees_of_freedom);
  const double z3 = z * z * z, z5 = z3 * z * z, z7 = z5 * z * z;
  return z + (z3 + z) / (4 * v) + (5 * z5 + 16 * z3 + 3 * z) / (96 * v * v) +
         (3 * z7 + 19 * z5 + 17 * z3 - 15 * z) / (384 * v * v * v);
}

OfuStats MergeOfuStats(const OfuStats& a, const OfuStats& b) {
  if (a.sample_count == 0) return b;
  if (b.sample_count == 0) return a;
  const int64_t n = a.sample_count + b.sample_count;
  const double na = static_cast<double>(a.sample_count);
  const double nb = static_cast<double>(b.sample_count);
  const double delta = *b.mean_ofu - *a.mean_ofu;
  const double mean = *a.mean_ofu + delta * nb / static_cast<double>(n);
  const double m2 = M2Of(a) + M2Of(b) + delta * delta * na * nb / static_cast<double>(n);
  return StatsFromMoments(n, mean, m2);
}

absl::StatusOr<GpuOfuWindow> ComputeGpuOfuWindow(const GpuSpec& spec, const GpuOfuSeries& series,
                                                 int64_t window_start_ms, int64_t window_end_ms,
                                                 const OfuWindowOptions& options) {
  if (absl::Status s = CheckWindow(window_start_ms, window_end_ms); !s.ok()) return s;
  if (!std::isfinite(spec.tensor_max_clock_mhz) || spec.tensor_max_clock_mhz <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("GPU model ", spec.name, ": tensor_max_clock_mhz=", spec.tensor_max_clock_mhz,
                     " must be > 0"));
  }
  GpuOfuWindow out;
  out.gpu_id = series.gpu_id;

  std::vector<const OfuSample*> in_window;
  in_window.reserve(series.samples.size());
  for (const OfuSample& s : series.samples) {
    if (s.timestamp_ms >= window_start_ms && s.timestamp_ms < window_end_ms) {
      in_window.push_back(&s);
    }
  }
  std::stable_sort(in_window.begin(), in_window.end(), [](const OfuSample* x, const OfuSample* y) {
    return x->timestamp_ms < y->timestamp_ms;
  });

  // Welford over the usable samples.
  int64_t n = 0;
  double mean = 0, m2 = 0;
  Times sent_ts;  // distinct sample times, usable or not
  sent_ts.reserve(in_window.size());
  for (const OfuSample* s : in_window) {
    if (!sent_ts.empty() && s->timestamp_ms == sent_ts.back()) {
      out.flags |= kOfuFlagDuplicateTimestamp;
      ++out.excluded_sample_count;
      continue;
    }
    sent_ts.push_back(s->timestamp_ms);
    if (!s->counters_usable) {
      ++out.excluded_sample_count;
      continue;
    }
    if (!std::isfinite(s->tensor_active) || !std::isfinite(s->sm_clock_mhz) ||
        s->sm_clock_mhz < 0) {
      out.flags |= kOfuFlagInvalidValue;
      ++out.excluded_sample_count;
      continue;
    }
    if (s->tensor_active < 0 || s->tensor_active > 1) {
      out.flags |= kOfuFlagTensorActiveOutOfRange;
      ++out.excluded_sample_count;
      continue;
    }
    if (s->sm_clock_mhz > spec.sm_boost_clock_mhz) out.flags |= kOfuFlagSmClockAboveBoost;
    const double ofu = s->tensor_active * s->sm_clock_mhz / spec.tensor_max_clock_mhz;
    ++n;
    const double delta = ofu - mean;
    mean += delta / static_cast<double>(n);
    m2 += delta * (ofu - mean);
  }
  out.stats = StatsFromMoments(n, mean, m2);
  if (n == 0) out.flags |= kOfuFlagNoSamples;
  out.flags |= JudgeSampling(series.sampling, sent_ts, window_start_ms, window_end_ms, options);
  return out;
}

absl::StatusOr<JobOfuWindow> ComputeJobOfuWindow(const GpuSpec& spec,
                                                 const JobOfuWindowInput& input) {
  if (absl::Status s = CheckWindow(input.window_start_ms, input.window_end_ms); !s.ok()) return s;
  if (input.allocated_gpu_count <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "allocated_gpu_count=", input.allocated_gpu_count, " must be > 0 for an OFU window"));
  }
  if (static_cast<int64_t>(input.gpus.size()) > input.allocated_gpu_count) {
    return absl::InvalidArgumentError(
        absl::StrCat("gpus has ", input.gpus.size(),
                     " series but allocated_gpu_count=", input.allocated_gpu_count));
  }
  absl::flat_hash_set<std::string> seen;
  for (const GpuOfuSeries& g : input.gpus) {
    if (!seen.insert(g.gpu_id).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("gpu_id=\"", g.gpu_id, "\" appears twice in the window input"));
    }
  }

  JobOfuWindow out;
  out.window_start_ms = input.window_start_ms;
  out.window_end_ms = input.window_end_ms;
  out.gpus_allocated = input.allocated_gpu_count;
  out.per_gpu.reserve(input.gpus.size());
  std::vector<double> gpu_means;
  for (const GpuOfuSeries& g : input.gpus) {
    absl::StatusOr<GpuOfuWindow> w =
        ComputeGpuOfuWindow(spec, g, input.window_start_ms, input.window_end_ms, input.options);
    if (!w.ok()) return w.status();
    out.stats = MergeOfuStats(out.stats, w->stats);
    if (w->stats.mean_ofu.has_value()) gpu_means.push_back(*w->stats.mean_ofu);
    // A GPU without samples is reported through coverage, not as a job-level no_samples.
    out.flags |= (w->flags & ~static_cast<uint32_t>(kOfuFlagNoSamples));
    out.per_gpu.push_back(*std::move(w));
  }
  out.gpus_reporting = static_cast<int>(gpu_means.size());
  out.gpu_coverage =
      static_cast<double>(out.gpus_reporting) / static_cast<double>(out.gpus_allocated);
  if (out.gpus_reporting < out.gpus_allocated) out.flags |= kOfuFlagPartialCoverage;
  if (gpu_means.empty()) {
    out.flags |= kOfuFlagNoSamples;
  } else {
    out.min_gpu_ofu = *std::min_element(gpu_means.begin(), gpu_means.end());
    out.max_gpu_ofu = *std::max_element(gpu_means.begin(), gpu_means.end());
    out.median_gpu_ofu = Median(gpu_means.begin(), gpu_means.end());
  }
  return out;
}

}  // namespace goodput::core
