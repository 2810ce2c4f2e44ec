// Who wants which alerts: the filter ListAlerts and SubscribeAlerts take, and the hub that
// fans alert changes out to subscribers in process (every replica publishes its own
// decisions, after they committed).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "goodput/v1/alert.pb.h"
#include "services/alerting/alert_rules.h"

namespace goodput::alerting {

namespace v1 = ::goodput::v1;

// Which alerts a caller wants (ListAlerts, SubscribeAlerts). Empty sets match everything.
struct AlertFilter {
  std::set<v1::AlertState> states;
  std::set<v1::AlertKind> kinds;
  v1::Severity min_severity = v1::SEVERITY_UNSPECIFIED;
  std::string cluster;
  std::string job_cluster, job_id;
  std::optional<int64_t> active_from_ms, active_to_ms;
  std::vector<Matcher> matchers;
  bool Matches(const v1::Alert& alert) const;
};
absl::StatusOr<AlertFilter> FilterFromRequest(const v1::ListAlertsRequest& request);
absl::StatusOr<AlertFilter> FilterFromRequest(const v1::SubscribeAlertsRequest& request);

// Fans alert changes out to subscribers (in process; every replica publishes its own
// decisions).
class AlertHub {
 public:
  using Sink = std::function<void(const v1::SubscribeAlertsResponse&)>;
  // `sink` is called under the hub's lock for each matching change: it must not block.
  int64_t Subscribe(AlertFilter filter, Sink sink);
  void Unsubscribe(int64_t id);
  void Publish(const v1::SubscribeAlertsResponse& change);

 private:
  struct Subscriber {
    AlertFilter filter;
    Sink sink;
  };
  absl::Mutex mu_;
  int64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<int64_t, Subscriber> subscribers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace goodput::alerting
