// The alert engine's configuration keys (see services/alerting/README.md):
//   alerting.routes: [{match: {cluster|scheduler|team|kind|severity: value}, targets: [name],
//                      continue: bool}]
//   alerting.default_targets: [name]
//   alerting.severity_rules: [{match: {label: value}, min_factor: x, severity: s}]
//   alerting.dashboard_url, alerting.sweep_interval_s, alerting.telemetry_stopped_after_s,
//   alerting.regression_min_factor, alerting.baseline_min_factor, alerting.baseline_min_jobs,
//   alerting.settle_s, alerting.checkpoint_every_s, alerting.max_cached_jobs,
//   alerting.silent_gpu_after_s, alerting.hung_after_s, alerting.job_idle_after_s,
//   alerting.expected_window_delay_s, alerting.platform_lag_alert_s (platform_lag.h)
//   alerting.policies.* (policy_config.h)
// Target names are delivery's (alerting.targets); only their form is checked here.
#pragma once

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "services/alerting/alert_engine.h"
#include "services/alerting/policy_config.h"
#include "services/platform/config.h"

namespace goodput::alerting {

struct AlertingConfig {
  EngineConfig engine;
  absl::Duration sweep_interval = absl::Seconds(30);
  // alerting.policies (policy_config.h): the policy stage, off by default.
  PolicySettings policies;
};

// INVALID_ARGUMENT naming the key and value for anything malformed.
absl::StatusOr<AlertingConfig> LoadAlertingConfig(const platform::ConfigTree& tree);

}  // namespace goodput::alerting
