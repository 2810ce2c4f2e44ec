#include "services/core/ledger.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace goodput::core {
namespace {

// The cause of `kind` whose interval holds the window's start, if any.
const LedgerCause* CauseAt(const std::vector<LedgerCause>& causes, LedgerCause::Kind kind,
                           int64_t start_s) {
  for (const LedgerCause& c : causes) {
    if (c.kind == kind && c.from_s <= start_s && start_s < c.to_s) return &c;
  }
  return nullptr;
}

// The share of a window's busy GPU-hours a drop below `reference_ofu` cost, in [0, 1].
double LostShare(const LedgerCause& c, double ofu) {
  if (c.reference_ofu > 0) return std::clamp(1.0 - ofu / c.reference_ofu, 0.0, 1.0);
  if (c.factor > 1) return 1.0 - 1.0 / c.factor;
  return 0;
}

}  // namespace

JobLedger BuildJobLedger(const JobLedgerInput& in) {
  using Kind = LedgerCause::Kind;
  JobLedger l;
  // One record per transient cause, in time order; a window's loss goes to the one holding it.
  std::vector<const LedgerCause*> transient_causes;
  for (const LedgerCause& c : in.causes) {
    if (c.kind == Kind::kTransient) transient_causes.push_back(&c);
  }
  std::stable_sort(transient_causes.begin(), transient_causes.end(),
                   [](const LedgerCause* a, const LedgerCause* b) { return a->from_s < b->from_s; });
  for (const LedgerCause* c : transient_causes) {
    l.transients.push_back({.onset_s = c->from_s, .end_s = c->to_s,
                            .before_ofu = c->reference_ofu, .factor = c->factor});
  }
  l.transient_slowdowns = static_cast<int>(l.transients.size());
  double windows_gpu_hours = 0;
  for (const LedgerWindow& w : in.windows) {
    if (w.end_s <= w.start_s || w.gpus_allocated <= 0) continue;
    const double h = static_cast<double>(w.end_s - w.start_s) / 3600.0;
    const int allocated = w.gpus_allocated;
    const int reporting = std::clamp(w.gpus_reporting, 0, allocated);
    const int idle = std::clamp(w.idle_gpus, 0, reporting);
    windows_gpu_hours += allocated * h;
    l.silent_gpus += (allocated - reporting) * h;
    // A job that stopped computing holds every GPU that reports, idle ones included.
    if (CauseAt(in.causes, Kind::kHung, w.start_s) != nullptr) {
      l.hung += reporting * h;
      continue;
    }
    if (CauseAt(in.causes, Kind::kJobIdle, w.start_s) != nullptr) {
      l.job_idle += reporting * h;
      continue;
    }
    l.idle_gpus += idle * h;
    double busy = (reporting - idle) * h;
    if (busy <= 0) continue;
    if (w.warmup) {
      l.warmup += busy;
      continue;
    }
    // The level the window ran at, once a drop is taken out: the level before the drop.
    double level = w.ofu;
    if (const LedgerCause* c = CauseAt(in.causes, Kind::kRegression, w.start_s)) {
      const double lost = busy * LostShare(*c, w.ofu);
      l.regression += lost;
      busy -= lost;
      if (c->reference_ofu > 0) level = std::max(level, c->reference_ofu);
    } else if (const LedgerCause* t = CauseAt(in.causes, Kind::kTransient, w.start_s)) {
      const double lost = busy * LostShare(*t, w.ofu);
      l.transient += lost;
      const auto at = std::find(transient_causes.begin(), transient_causes.end(), t);
      l.transients[at - transient_causes.begin()].lost_gpu_hours += lost;
      busy -= lost;
      if (t->reference_ofu > 0) level = std::max(level, t->reference_ofu);
    }
    if (const LedgerCause* b = CauseAt(in.causes, Kind::kBelowWorkload, w.start_s)) {
      const double lost = busy * LostShare(*b, level);
      l.below_workload_baseline += lost;
      busy -= lost;
    }
    l.productive += busy;
  }
  // The allocation is the job's, or what the windows cover when that is larger (a job whose
  // allocation is unknown, or windows past the recorded end).
  l.allocated_gpu_hours = std::max(in.allocated_gpu_hours, windows_gpu_hours);
  l.no_telemetry = l.allocated_gpu_hours - windows_gpu_hours;
  l.coverage = l.allocated_gpu_hours > 0 ? windows_gpu_hours / l.allocated_gpu_hours : 0;
  return l;
}

void AddLedger(const JobLedger& part, JobLedger& sum) {
  const double allocated = sum.allocated_gpu_hours + part.allocated_gpu_hours;
  if (allocated > 0) {
    sum.coverage = (sum.coverage * sum.allocated_gpu_hours +
                    part.coverage * part.allocated_gpu_hours) /
                   allocated;
  }
  sum.allocated_gpu_hours = allocated;
  sum.productive += part.productive;
  sum.idle_gpus += part.idle_gpus;
  sum.silent_gpus += part.silent_gpus;
  sum.hung += part.hung;
  sum.job_idle += part.job_idle;
  sum.warmup += part.warmup;
  sum.regression += part.regression;
  sum.transient += part.transient;
  sum.transient_slowdowns += part.transient_slowdowns;
  sum.below_workload_baseline += part.below_workload_baseline;
  sum.no_telemetry += part.no_telemetry;
}

std::string LedgerWords(const JobLedger& l) {
  const std::string transient =
      l.transient_slowdowns > 0
          ? absl::StrCat("in ", l.transient_slowdowns, " transient slowdown",
                         l.transient_slowdowns == 1 ? "" : "s")
          : std::string("transient slowdowns");
  const std::pair<double, std::string> parts[] = {
      {l.productive, "productive"},
      {l.idle_gpus, "idle GPUs"},
      {l.silent_gpus, "silent GPUs"},
      {l.hung, "hung"},
      {l.job_idle, "job idle"},
      {l.warmup, "warm-up"},
      {l.regression, "regressions"},
      {l.transient, transient},
      {l.below_workload_baseline, "below the workload's earlier jobs"},
      {l.no_telemetry, "no telemetry"},
  };
  std::vector<std::string> words;
  for (const auto& [hours, what] : parts) {
    if (hours < 0.005) continue;
    words.push_back(l.allocated_gpu_hours > 0
                        ? absl::StrFormat("%.2f %s (%.1f%%)", hours, what,
                                          100.0 * hours / l.allocated_gpu_hours)
                        : absl::StrFormat("%.2f %s", hours, what));
  }
  if (words.empty()) return "nothing allocated";
  return absl::StrJoin(words, ", ");
}

}  // namespace goodput::core
