// The pure rules of the alert engine: alert kinds and severities by name, the stable
// fingerprint that deduplicates an alert, label matchers (silences, list filters), routing of
// an alert's labels to delivery targets, and severity rules. No I/O, no clock, no protobuf.
//
//   RoutingConfig routing = ...;                  // from alerting.routes / default_targets
//   Labels labels = {{"cluster", "eos"}, {"kind", "regression_in_job"}, ...};
//   std::vector<std::string> targets = RouteTargets(routing, labels);
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace re2 {
class RE2;
}

namespace goodput::alerting {

// What an alert is about (the API's AlertKind, by the names used in labels and the outbox).
enum class Kind {
  kRegressionInJob,
  kRegressionVsWorkload,
  kDivergence,
  kIdleGpus,
  kStraggler,
  kTelemetryStopped,
  kDataQuality,
  kGpuFault,
  kSilentGpu,
  kHung,
  kJobIdle,
  kPlatformLagging,  // the platform's own backlog (platform_lag.h), not a job's
};
inline constexpr Kind kAllKinds[] = {Kind::kRegressionInJob, Kind::kRegressionVsWorkload,
                                     Kind::kDivergence,      Kind::kIdleGpus,
                                     Kind::kStraggler,       Kind::kTelemetryStopped,
                                     Kind::kDataQuality,     Kind::kGpuFault,
                                     Kind::kSilentGpu,       Kind::kHung,
                                     Kind::kJobIdle,         Kind::kPlatformLagging};
absl::string_view KindName(Kind kind);  // "regression_in_job", ...
std::optional<Kind> KindFromName(absl::string_view name);

enum class Severity { kInfo = 1, kWarning = 2, kCritical = 3 };
absl::string_view SeverityName(Severity s);  // "info", "warning", "critical"
std::optional<Severity> SeverityFromName(absl::string_view name);

// Alert labels: cluster, job_id, scheduler, team, user, kind, severity, gpu_model,
// workload_fingerprint and the job's own labels (which never override these).
using Labels = std::map<std::string, std::string>;

// Stable dedup key of a condition: the kind, then a hash of (cluster, job, detail), e.g.
// "regression_in_job-9f86d081884c7d65". `detail` distinguishes conditions of one kind in one
// job (the GPU of a straggler); empty for job-wide conditions. The same inputs give the same
// fingerprint in every process and release.
std::string Fingerprint(Kind kind, absl::string_view cluster, absl::string_view job_id,
                        absl::string_view detail = "");

// A condition on one label, as silences and list filters use them.
class Matcher {
 public:
  enum class Op { kEqual, kNotEqual, kRegex, kNotRegex };
  // INVALID_ARGUMENT naming `field` (e.g. "silence.matchers[1]") for an empty name or a
  // regular expression that does not compile.
  static absl::StatusOr<Matcher> Create(std::string name, std::string value, Op op,
                                        absl::string_view field = "matcher");
  // An absent label matches as the empty string (so NOT_EQUAL "x" matches it).
  bool Matches(const Labels& labels) const;
  const std::string& name() const { return name_; }
  const std::string& value() const { return value_; }
  Op op() const { return op_; }

 private:
  Matcher(std::string name, std::string value, Op op, std::shared_ptr<const re2::RE2> re);
  std::string name_;
  std::string value_;
  Op op_ = Op::kEqual;
  std::shared_ptr<const re2::RE2> re_;  // for the regex operators
};
bool MatchesAll(const std::vector<Matcher>& matchers, const Labels& labels);

// One routing rule: when every `match` label equals the alert's, send to `targets`; stop at
// the first matching route unless `continue_matching`.
struct Route {
  std::map<std::string, std::string> match = {};  // keys: cluster, scheduler, team, kind, severity
  std::vector<std::string> targets = {};
  bool continue_matching = false;
};
struct RoutingConfig {
  std::vector<Route> routes = {};
  std::vector<std::string> default_targets = {};  // when no route matches
};
// The labels a route may match on.
inline constexpr absl::string_view kRouteLabels[] = {"cluster", "scheduler", "team", "kind",
                                                     "severity"};
// INVALID_ARGUMENT naming the route ("alerting.routes[2].match.colour") for a match key not
// in kRouteLabels, an unknown kind or severity value, a route without targets, or an empty
// target name.
absl::Status ValidateRouting(const RoutingConfig& routing);
// Target names for an alert, each once, in route order; the default targets when no route
// matched.
std::vector<std::string> RouteTargets(const RoutingConfig& routing, const Labels& labels);

// Severity from rules: the first rule whose labels all match and whose `min_factor` (when
// set) the alert's factor reaches gives the severity.
struct SeverityRule {
  std::map<std::string, std::string> match = {};  // label -> value, like routes (any label)
  std::optional<double> min_factor = {};
  Severity severity = Severity::kWarning;
};
// Built-in rules, used after the configured ones: drops of 2x or more are critical, other
// regressions, divergence, idle GPUs, stragglers and stopped telemetry warnings, data quality
// info; GPU faults critical when their label catalog_severity says so (hardware and driver
// faults that need a reset or drain), else warnings.
std::vector<SeverityRule> DefaultSeverityRules();
// INVALID_ARGUMENT naming the rule for a bad kind value or a non-positive factor.
absl::Status ValidateSeverityRules(const std::vector<SeverityRule>& rules);
Severity DecideSeverity(const std::vector<SeverityRule>& rules, const Labels& labels,
                        std::optional<double> factor);

}  // namespace goodput::alerting
