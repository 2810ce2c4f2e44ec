#include "services/alerting/alert_config.h"

#include <exception>
#include <string>
#include <tuple>

#include "absl/strings/str_cat.h"

namespace goodput::alerting {
namespace {

absl::StatusOr<std::map<std::string, std::string>> MatchMap(const YAML::Node& node,
                                                            const std::string& where) {
  std::map<std::string, std::string> out;
  if (!node.IsDefined() || node.IsNull()) return out;
  if (!node.IsMap()) return absl::InvalidArgumentError(absl::StrCat(where, ": expected a mapping"));
  for (const auto& kv : node) {
    if (!kv.second.IsScalar()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".", kv.first.as<std::string>(), ": expected a single value"));
    }
    out[kv.first.as<std::string>()] = kv.second.as<std::string>();
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> Names(const YAML::Node& node, const std::string& where) {
  std::vector<std::string> out;
  if (!node.IsDefined() || node.IsNull()) return out;
  if (node.IsScalar()) return std::vector<std::string>{node.as<std::string>()};
  if (!node.IsSequence())
    return absl::InvalidArgumentError(absl::StrCat(where, ": expected a list"));
  for (const auto& n : node) {
    if (!n.IsScalar()) return absl::InvalidArgumentError(absl::StrCat(where, ": expected names"));
    out.push_back(n.as<std::string>());
  }
  return out;
}

YAML::Node Child(const YAML::Node& root, const char* a, const char* b) {
  if (!root.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
  YAML::Node first = root[a];
  if (!first.IsDefined() || !first.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
  return first[b];
}

}  // namespace

absl::StatusOr<AlertingConfig> LoadAlertingConfig(const platform::ConfigTree& tree) {
  AlertingConfig c;
  EngineConfig& e = c.engine;
  try {
    absl::StatusOr<std::string> url = tree.GetString("alerting.dashboard_url", "");
    if (!url.ok()) return url.status();
    e.dashboard_url = *url;
    absl::StatusOr<absl::Duration> sweep = tree.GetSeconds("alerting.sweep_interval_s", 30);
    if (!sweep.ok()) return sweep.status();
    if (*sweep <= absl::ZeroDuration()) {
      return absl::InvalidArgumentError("config key alerting.sweep_interval_s: must be positive");
    }
    c.sweep_interval = *sweep;
    absl::StatusOr<int64_t> stopped =
        tree.GetIntInRange("alerting.telemetry_stopped_after_s", 600, 60, 7 * 86400);
    if (!stopped.ok()) return stopped.status();
    e.detectors.telemetry_stopped_after_s = *stopped;
    // The platform's own backlog (README "When goodput itself is behind").
    absl::StatusOr<int64_t> expected_delay = tree.GetIntInRange(
        "alerting.expected_window_delay_s", e.platform_lag.expected_window_delay_s, 0, 86400);
    if (!expected_delay.ok()) return expected_delay.status();
    e.platform_lag.expected_window_delay_s = *expected_delay;
    absl::StatusOr<int64_t> lag_alert = tree.GetIntInRange(
        "alerting.platform_lag_alert_s", e.platform_lag.alert_after_s, 30, 7 * 86400);
    if (!lag_alert.ok()) return lag_alert.status();
    e.platform_lag.alert_after_s = *lag_alert;
    // Silent GPUs, hung and idle jobs (README "Silent GPUs", "Hung and idle jobs").
    for (const auto& [key, fallback, min, target] :
         {std::tuple{"alerting.silent_gpu_after_s", e.detectors.silent_gpu_after_s, int64_t{60},
                     &e.detectors.silent_gpu_after_s},
          std::tuple{"alerting.hung_after_s", e.detectors.hung_after_s, int64_t{120},
                     &e.detectors.hung_after_s},
          std::tuple{"alerting.job_idle_after_s", e.detectors.job_idle_after_s, int64_t{120},
                     &e.detectors.job_idle_after_s}}) {
      absl::StatusOr<int64_t> v = tree.GetIntInRange(key, fallback, min, 7 * 86400);
      if (!v.ok()) return v.status();
      *target = *v;
    }
    absl::StatusOr<double> min_factor =
        tree.GetDouble("alerting.regression_min_factor", e.detectors.regression.min_factor);
    if (!min_factor.ok()) return min_factor.status();
    if (*min_factor <= 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "config key alerting.regression_min_factor: ", *min_factor, " must be above 1"));
    }
    e.detectors.regression.min_factor = *min_factor;
    absl::StatusOr<double> baseline_factor =
        tree.GetDouble("alerting.baseline_min_factor", e.detectors.baseline.min_factor);
    if (!baseline_factor.ok()) return baseline_factor.status();
    if (*baseline_factor <= 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "config key alerting.baseline_min_factor: ", *baseline_factor, " must be above 1"));
    }
    e.detectors.baseline.min_factor = *baseline_factor;
    absl::StatusOr<int64_t> min_jobs = tree.GetIntInRange("alerting.baseline_min_jobs", 2, 1, 20);
    if (!min_jobs.ok()) return min_jobs.status();
    e.detectors.baseline.min_jobs = static_cast<int>(*min_jobs);
    absl::StatusOr<int64_t> settle = tree.GetIntInRange("alerting.settle_s", 120, 0, 3600);
    if (!settle.ok()) return settle.status();
    e.settle_s = *settle;
    absl::StatusOr<int64_t> checkpoint_every =
        tree.GetIntInRange("alerting.checkpoint_every_s", 3600, 60, 7 * 86400);
    if (!checkpoint_every.ok()) return checkpoint_every.status();
    e.checkpoint_every_s = *checkpoint_every;
    absl::StatusOr<int64_t> cached =
        tree.GetIntInRange("alerting.max_cached_jobs", 4096, 1, 1'000'000);
    if (!cached.ok()) return cached.status();
    e.max_cached_jobs = static_cast<size_t>(*cached);
    absl::StatusOr<int64_t> fault_window =
        tree.GetIntInRange("alerting.fault_correlation_window_s", 1800, 0, 86400);
    if (!fault_window.ok()) return fault_window.status();
    e.fault_correlation_window_s = *fault_window;

    const YAML::Node& root = tree.root();
    absl::StatusOr<std::vector<std::string>> defaults =
        Names(Child(root, "alerting", "default_targets"), "alerting.default_targets");
    if (!defaults.ok()) return defaults.status();
    e.routing.default_targets = *defaults;

    YAML::Node routes = Child(root, "alerting", "routes");
    if (routes.IsDefined() && !routes.IsNull()) {
      if (!routes.IsSequence())
        return absl::InvalidArgumentError("alerting.routes: expected a list");
      for (size_t i = 0; i < routes.size(); ++i) {
        const std::string where = absl::StrCat("alerting.routes[", i, "]");
        const YAML::Node r = routes[i];
        if (!r.IsMap())
          return absl::InvalidArgumentError(absl::StrCat(where, ": expected a mapping"));
        for (const auto& kv : r) {
          const std::string k = kv.first.as<std::string>();
          if (k != "match" && k != "targets" && k != "continue") {
            return absl::InvalidArgumentError(
                absl::StrCat(where, ".", k, ": unknown key (match, targets, continue)"));
          }
        }
        Route route;
        absl::StatusOr<std::map<std::string, std::string>> match =
            MatchMap(r["match"], where + ".match");
        if (!match.ok()) return match.status();
        route.match = *match;
        absl::StatusOr<std::vector<std::string>> targets = Names(r["targets"], where + ".targets");
        if (!targets.ok()) return targets.status();
        route.targets = *targets;
        if (r["continue"].IsDefined()) route.continue_matching = r["continue"].as<bool>();
        e.routing.routes.push_back(std::move(route));
      }
    }
    if (absl::Status s = ValidateRouting(e.routing); !s.ok()) return s;

    // Delivery validates its targets; the engine only learns each one's kind.
    YAML::Node targets = Child(root, "alerting", "targets");
    if (targets.IsDefined() && targets.IsSequence()) {
      for (const YAML::Node& t : targets) {
        if (t.IsMap() && t["name"].IsScalar() && t["kind"].IsScalar()) {
          e.target_kinds[t["name"].as<std::string>()] = t["kind"].as<std::string>();
        }
      }
    }

    YAML::Node rules = Child(root, "alerting", "severity_rules");
    if (rules.IsDefined() && !rules.IsNull()) {
      if (!rules.IsSequence()) {
        return absl::InvalidArgumentError("alerting.severity_rules: expected a list");
      }
      for (size_t i = 0; i < rules.size(); ++i) {
        const std::string where = absl::StrCat("alerting.severity_rules[", i, "]");
        const YAML::Node r = rules[i];
        if (!r.IsMap())
          return absl::InvalidArgumentError(absl::StrCat(where, ": expected a mapping"));
        SeverityRule rule;
        absl::StatusOr<std::map<std::string, std::string>> match =
            MatchMap(r["match"], where + ".match");
        if (!match.ok()) return match.status();
        rule.match = *match;
        if (r["min_factor"].IsDefined()) rule.min_factor = r["min_factor"].as<double>();
        const std::string sev = r["severity"].IsDefined() ? r["severity"].as<std::string>() : "";
        std::optional<Severity> s = SeverityFromName(sev);
        if (!s) {
          return absl::InvalidArgumentError(
              absl::StrCat(where, ".severity: \"", sev, "\" is not info, warning or critical"));
        }
        rule.severity = *s;
        e.severity_rules.push_back(std::move(rule));
      }
    }
    if (absl::Status s = ValidateSeverityRules(e.severity_rules); !s.ok()) return s;
    absl::StatusOr<PolicySettings> policies = LoadPolicySettings(tree);
    if (!policies.ok()) return policies.status();
    c.policies = *std::move(policies);
  } catch (const std::exception& ex) {
    return absl::InvalidArgumentError(absl::StrCat("alerting configuration: ", ex.what()));
  }
  return c;
}

}  // namespace goodput::alerting
