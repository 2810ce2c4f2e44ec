#include "services/mfu/reconcile.h"

#include <algorithm>
#include <cmath>

namespace goodput::mfu {
namespace {

// The classifier refuses values outside [0, 1.5]; an app MFU above that is an overcount all
// the same, and clamping keeps the verdict while bounding the ratio.
constexpr double kMaxClassifiedFraction = 1.5;

bool SameMix(const std::vector<std::pair<int, double>>& a,
             const std::vector<std::pair<int, double>>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].first != b[i].first || std::abs(a[i].second - b[i].second) > 1e-6) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<JobReconciliation> Reconcile(std::vector<WindowInput> windows,
                                            std::vector<ReportInput> reports,
                                            const ReconcileOptions& options) {
  std::sort(windows.begin(), windows.end(),
            [](const WindowInput& a, const WindowInput& b) { return a.start_us < b.start_us; });
  std::sort(reports.begin(), reports.end(), [](const ReportInput& a, const ReportInput& b) {
    return a.start_us != b.start_us ? a.start_us < b.start_us : a.end_us < b.end_us;
  });
  JobReconciliation out;
  std::vector<detect::PairedWindow> paired;
  std::vector<size_t> paired_point;  // index into out.points of each paired window

  // Reports are sorted by start: the scan of a window stops at the first one starting after
  // it, and starts past the reports that ended before it (windows come in time order), so
  // contiguous report streams cost O(windows + reports).
  size_t first = 0;
  for (const WindowInput& w : windows) {
    while (first < reports.size() && reports[first].end_us <= w.start_us) ++first;
    PointResult p;
    p.start_us = w.start_us;
    p.end_us = w.end_us;
    p.ofu = w.ofu;
    p.ofu_ci95_low = w.ofu_ci95_low;
    p.ofu_ci95_high = w.ofu_ci95_high;
    p.gpu_coverage = w.gpu_coverage;
    p.gpus_allocated = w.gpus_allocated;
    double weighted = 0, covered_us = 0;
    for (size_t k = first; k < reports.size(); ++k) {
      const ReportInput& r = reports[k];
      if (r.start_us >= w.end_us) break;
      const int64_t overlap = std::min(r.end_us, w.end_us) - std::max(r.start_us, w.start_us);
      if (overlap <= 0) continue;
      ++p.report_count;
      if (!r.app_mfu) continue;
      double app_mfu = *r.app_mfu;
      if (r.gpu_count > 0 && w.gpus_allocated > r.gpu_count) {
        app_mfu *= static_cast<double>(r.gpu_count) / static_cast<double>(w.gpus_allocated);
      }
      weighted += app_mfu * static_cast<double>(overlap);
      covered_us += static_cast<double>(overlap);
    }
    if (covered_us > 0) {
      p.app_mfu = weighted / covered_us;
      p.difference_pp = (*p.app_mfu - p.ofu) * 100;
      if (p.ofu > 0) p.ratio = *p.app_mfu / p.ofu;
      const double length_us = static_cast<double>(w.end_us - w.start_us);
      p.paired = !w.warmup && covered_us >= options.min_report_coverage * length_us;
    }
    if (p.paired) {
      paired.push_back({.start_s = w.start_us / 1000000,
                        .end_s = w.end_us / 1000000,
                        .app_mfu = std::min(*p.app_mfu, kMaxClassifiedFraction),
                        .ofu = std::clamp(w.ofu, 0.0, kMaxClassifiedFraction),
                        .ofu_ci95_half = std::max(0.0, (w.ofu_ci95_high - w.ofu_ci95_low) / 2),
                        .gpu_coverage = std::clamp(w.gpu_coverage, 0.0, 1.0)});
      paired_point.push_back(out.points.size());
    }
    out.points.push_back(std::move(p));
  }

  absl::StatusOr<detect::JobDivergence> divergence =
      detect::ClassifyJobDivergence(paired, options.interval_s, options.divergence);
  if (!divergence.ok()) return divergence.status();
  out.divergence = *std::move(divergence);
  for (size_t k = 0; k < paired.size(); ++k) {
    for (const detect::IntervalVerdict& iv : out.divergence.intervals) {
      if (paired[k].start_s >= iv.start_s && paired[k].start_s < iv.end_s) {
        out.points[paired_point[k]].verdict = iv.result.verdict;
        break;
      }
    }
  }

  const ReportInput* previous = nullptr;
  for (const ReportInput& r : reports) {
    if (r.precision_mix.empty()) continue;
    if (previous != nullptr && !SameMix(previous->precision_mix, r.precision_mix)) {
      out.switches.push_back({.time_us = r.start_us,
                              .before = previous->precision_mix,
                              .after = r.precision_mix,
                              .peak_tflops_before = previous->peak_tflops,
                              .peak_tflops_after = r.peak_tflops});
    }
    previous = &r;
  }
  return out;
}

}  // namespace goodput::mfu
