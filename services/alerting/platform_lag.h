// How far goodput itself is behind its telemetry, from the windows ofu delivers: per ofu
// producer (shard), the newest window end it has delivered (its data frontier) and how old
// that window was when it arrived. A window normally arrives a window plus ofu's lateness
// after it ends (alerting.expected_window_delay_s, 180 s = ofu.window_s 60 + ofu.allowed_
// lateness_s 120); what comes on top is the platform's backlog: ingest acknowledging more
// slowly than the fleet sends, or ofu reading more slowly than ingest writes.
//
// While the platform is behind, stopped telemetry is judged against the data it has reached
// (the clock minus the backlog), so no job is blamed for the platform's own lag; a backlog of
// alerting.platform_lag_alert_s (300 s) held over receipts for kPlatformLagForS is one
// platform_lagging alert for the operator. Revisions of old windows never move a frontier
// (it only grows), and a producer that delivered nothing for telemetry_stopped_after_s (its
// shard has no running jobs, or was retired) no longer counts. Pure: times are unix ms in.
//
//   ProducerProgress p = AdvanceProgress(stored, newest_window_end_ms, now_ms, options);
//   PlatformLag lag = AssessPlatformLag(all_producers, now_ms, options);
//   const int64_t reference_ms = now_ms - lag.backlog_ms;  // telemetry_stopped judged here
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace goodput::alerting {

// The backlog must have held over receipts this long before the alert opens: one slow
// commit is not an overload.
inline constexpr int64_t kPlatformLagForS = 60;

struct PlatformLagOptions {
  int64_t expected_window_delay_s = 180;  // a window plus ofu's lateness
  int64_t alert_after_s = 300;            // backlog that opens the platform_lagging alert
  int64_t inactive_after_s = 600;         // telemetry_stopped_after_s
};

// One producer's delivery, as stored with its receiver watermark (alert_receiver_state).
struct ProducerProgress {
  std::string producer = {};
  std::optional<int64_t> frontier_ms = {};  // newest window end delivered
  int64_t advanced_at_ms = 0;               // when the frontier last moved
  int64_t backlog_ms = 0;  // then: the window's age beyond expected_window_delay_s (>= 0)
  // The first receipt of the current spell with a backlog of at least alert_after_s; cleared
  // by one under half of it.
  std::optional<int64_t> lagging_since_ms = {};
};

// `p` after a delivery whose newest window ends at `newest_end_ms`, received at `now_ms`.
ProducerProgress AdvanceProgress(ProducerProgress p, int64_t newest_end_ms, int64_t now_ms,
                                 const PlatformLagOptions& options);

struct PlatformLag {
  int64_t backlog_ms = 0;  // the largest backlog of the active producers (0: none behind)
  std::string producer = {};       // the producer behind the most
  int64_t frontier_ms = 0;         // its data frontier
  int64_t window_age_ms = 0;       // how old its newest window was on arrival
  std::optional<int64_t> lagging_since_ms = {};  // of the alert: its earliest spell
  int producers_behind = 0;  // active producers with a backlog of at least alert_after_s
  int producers_active = 0;
  // The platform_lagging alert holds: an active producer's backlog of alert_after_s held over
  // its receipts for kPlatformLagForS.
  bool alert = false;
};

PlatformLag AssessPlatformLag(const std::vector<ProducerProgress>& producers, int64_t now_ms,
                              const PlatformLagOptions& options);

}  // namespace goodput::alerting
