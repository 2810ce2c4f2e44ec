// Alertmanager target (API v2): POST /api/v2/alerts with one alert.
//
// Labels identify the alert in Alertmanager and never change during its life: alertname
// (Goodput + kind in CamelCase), cluster, job_id, severity, kind, fingerprint, and team and
// scheduler when known. Annotations carry what a person reads: summary, description, factor,
// verdict, dashboard_url. A firing alert is sent with startsAt and an endsAt of
// now + 4 x resend_interval and is re-sent every resend_interval while it fires (as
// Prometheus does), so Alertmanager keeps it active and lets it expire by itself if goodput
// goes away; the resolution is sent with the alert's real endsAt. Alertmanager deduplicates
// by labels, so a retried or re-sent POST never opens a second alert.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "services/alerting/targets/target.h"

namespace goodput::alerting {

struct AlertmanagerTargetConfig {
  std::string name = {};
  std::string url = {};  // base, e.g. http://alertmanager:9093
  std::vector<std::pair<std::string, std::string>> headers = {};
  absl::Duration timeout = absl::Seconds(10);
  absl::Duration resend_interval = absl::Minutes(5);
};

// The JSON array POSTed for `n` at `now`.
std::string AlertmanagerBody(const Notification& n, absl::Time now, absl::Duration resend_interval);

class AlertmanagerTarget final : public Target {
 public:
  explicit AlertmanagerTarget(AlertmanagerTargetConfig config) : config_(std::move(config)) {}

  // Target:
  const std::string& name() const override { return config_.name; }
  const char* kind() const override { return "alertmanager"; }
  absl::Status Send(const SendRequest& request) override;
  std::optional<absl::Duration> resend_interval() const override { return config_.resend_interval; }

 private:
  AlertmanagerTargetConfig config_;
};

}  // namespace goodput::alerting
