#include "services/alerting/platform_lag.h"

#include <algorithm>

namespace goodput::alerting {

ProducerProgress AdvanceProgress(ProducerProgress p, int64_t newest_end_ms, int64_t now_ms,
                                 const PlatformLagOptions& options) {
  // Only a newer window moves the frontier: a revision of an old one says nothing of the lag.
  if (p.frontier_ms && newest_end_ms <= *p.frontier_ms) return p;
  p.frontier_ms = newest_end_ms;
  p.advanced_at_ms = now_ms;
  // A window from a host clock ahead of ours is not a backlog.
  p.backlog_ms = std::max<int64_t>(0, now_ms - newest_end_ms - options.expected_window_delay_s * 1000);
  const int64_t alert_ms = options.alert_after_s * 1000;
  if (p.backlog_ms >= alert_ms) {
    if (!p.lagging_since_ms) p.lagging_since_ms = now_ms;
  } else if (p.backlog_ms < alert_ms / 2) {
    p.lagging_since_ms.reset();
  }
  return p;
}

PlatformLag AssessPlatformLag(const std::vector<ProducerProgress>& producers, int64_t now_ms,
                              const PlatformLagOptions& options) {
  PlatformLag out;
  const ProducerProgress* worst = nullptr;
  for (const ProducerProgress& p : producers) {
    if (!p.frontier_ms || now_ms - p.advanced_at_ms > options.inactive_after_s * 1000) continue;
    ++out.producers_active;
    if (p.backlog_ms >= options.alert_after_s * 1000) ++out.producers_behind;
    if (worst == nullptr || p.backlog_ms > worst->backlog_ms) worst = &p;
    if (p.lagging_since_ms && p.advanced_at_ms - *p.lagging_since_ms >= kPlatformLagForS * 1000) {
      out.alert = true;
      out.lagging_since_ms = std::min(out.lagging_since_ms.value_or(*p.lagging_since_ms),
                                      *p.lagging_since_ms);
    }
  }
  if (worst == nullptr) return out;
  out.backlog_ms = worst->backlog_ms;
  out.producer = worst->producer;
  out.frontier_ms = *worst->frontier_ms;
  out.window_age_ms = worst->advanced_at_ms - *worst->frontier_ms;
  return out;
}

}  // namespace goodput::alerting
