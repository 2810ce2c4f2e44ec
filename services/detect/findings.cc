#include "services/detect/findings.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_format.h"
#include "services/core/characterization.h"
#include "services/detect/robust_stats.h"

namespace goodput::detect {

GpuFindingsTracker::GpuFindingsTracker(int gpu_count, FindingsOptions options)
    : options_(options), gpus_(static_cast<size_t>(std::max(0, gpu_count))) {}

void GpuFindingsTracker::AddWindow(int64_t start_s, int64_t end_s,
                                   std::span<const GpuWindowValue> per_gpu) {
  ++windows_;
  const size_t n = std::min(per_gpu.size(), gpus_.size());
  // The job's median over GPUs that are not idle: idle GPUs would drag the reference down
  // and hide stragglers in jobs with many unused GPUs.
  scratch_.clear();
  for (size_t g = 0; g < n; ++g) {
    const GpuWindowValue& v = per_gpu[g];
    if (!v.reporting) continue;
    PerGpu& s = gpus_[g];
    ++s.observed;
    const bool idle = v.ofu < options_.idle_activity && v.sm_active < options_.idle_activity;
    if (idle) {
      ++s.idle;
      if (s.first_idle_s < 0) s.first_idle_s = start_s;
    } else {
      scratch_.push_back(v.ofu);
    }
  }
  const double median = Median(scratch_);
  if (median < options_.computing_ofu) return;
  // Straggler scores per window from the core library: (median - OFU) / median over the GPUs
  // that compute; a GPU is slow in the window when its score reaches 1 - straggler_ratio.
  gpu_ofu_.clear();
  for (size_t g = 0; g < n; ++g) {
    const GpuWindowValue& v = per_gpu[g];
    if (!v.reporting) continue;
    if (v.ofu < options_.idle_activity && v.sm_active < options_.idle_activity) continue;
    gpu_ofu_.emplace_back(std::to_string(g), v.ofu);
  }
  absl::StatusOr<std::vector<core::GpuStraggler>> scores =
      core::ScoreStragglers(gpu_ofu_, std::clamp(1 - options_.straggler_ratio, 1e-6, 1.0));
  if (!scores.ok()) return;
  for (const core::GpuStraggler& sc : *scores) {
    if (!sc.score) continue;
    const size_t g = std::stoul(sc.gpu_id);
    PerGpu& s = gpus_[g];
    ++s.computing;
    s.ratio_sum += 1 - *sc.score;
    if (sc.straggler) {
      ++s.slow;
      if (s.first_slow_s < 0) s.first_slow_s = start_s;
    }
  }
}

void GpuFindingsTracker::Grow(int gpu_count) {
  if (gpu_count > static_cast<int>(gpus_.size())) gpus_.resize(static_cast<size_t>(gpu_count));
}

std::vector<GpuFinding> GpuFindingsTracker::Findings() const {
  std::vector<GpuFinding> idle, slow;
  for (size_t g = 0; g < gpus_.size(); ++g) {
    const PerGpu& s = gpus_[g];
    if (s.observed >= options_.idle_min_windows &&
        static_cast<double>(s.idle) >= options_.idle_share * static_cast<double>(s.observed)) {
      GpuFinding f;
      f.kind = GpuFinding::Kind::kIdle;
      f.gpu_index = static_cast<int>(g);
      f.score = static_cast<double>(s.idle) / static_cast<double>(s.observed);
      f.windows = s.idle;
      f.first_seen_s = s.first_idle_s;
      f.annotation = absl::StrFormat(
          "GPU %d is allocated but idle in %d of %d windows (tensor and SM activity < %.0f%%)",
          f.gpu_index, s.idle, s.observed, options_.idle_activity * 100);
      idle.push_back(f);
      continue;
    }
    if (s.computing >= options_.straggler_min_windows &&
        static_cast<double>(s.slow) >=
            options_.straggler_share * static_cast<double>(s.computing)) {
      GpuFinding f;
      f.kind = GpuFinding::Kind::kStraggler;
      f.gpu_index = static_cast<int>(g);
      f.score = s.ratio_sum / static_cast<double>(s.computing);
      f.windows = s.slow;
      f.first_seen_s = s.first_slow_s;
      f.annotation =
          absl::StrFormat("GPU %d runs at %.0f%% of the job's median GPU OFU in %d of %d windows",
                          f.gpu_index, f.score * 100, s.slow, s.computing);
      slow.push_back(f);
    }
  }
  std::sort(slow.begin(), slow.end(),
            [](const GpuFinding& a, const GpuFinding& b) { return a.score < b.score; });
  idle.insert(idle.end(), slow.begin(), slow.end());
  return idle;
}

}  // namespace goodput::detect
