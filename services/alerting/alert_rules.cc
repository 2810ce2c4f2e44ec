#include "services/alerting/alert_rules.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "re2/re2.h"

namespace goodput::alerting {
namespace {

struct KindEntry {
  Kind kind;
  absl::string_view name;
};
constexpr KindEntry kKindNames[] = {
    {Kind::kRegressionInJob, "regression_in_job"},
    {Kind::kRegressionVsWorkload, "regression_vs_workload"},
    {Kind::kDivergence, "divergence"},
    {Kind::kIdleGpus, "idle_gpus"},
    {Kind::kStraggler, "straggler"},
    {Kind::kTelemetryStopped, "telemetry_stopped"},
    {Kind::kDataQuality, "data_quality"},
    {Kind::kGpuFault, "gpu_fault"},
    {Kind::kSilentGpu, "silent_gpu"},
    {Kind::kHung, "hung"},
    {Kind::kJobIdle, "job_idle"},
    {Kind::kPlatformLagging, "platform_lagging"},
};

// FNV-1a, 64 bit: tiny, stable across platforms and releases (std::hash is neither).
uint64_t Fnv1a(absl::string_view s, uint64_t h) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

bool LabelsMatch(const std::map<std::string, std::string>& match, const Labels& labels) {
  for (const auto& [name, value] : match) {
    auto it = labels.find(name);
    if (it == labels.end() || it->second != value) return false;
  }
  return true;
}

}  // namespace

absl::string_view KindName(Kind kind) {
  for (const KindEntry& e : kKindNames) {
    if (e.kind == kind) return e.name;
  }
  return "unknown";
}

std::optional<Kind> KindFromName(absl::string_view name) {
  for (const KindEntry& e : kKindNames) {
    if (e.name == name) return e.kind;
  }
  return std::nullopt;
}

absl::string_view SeverityName(Severity s) {
  switch (s) {
    case Severity::kInfo:
      return "info";
    case Severity::kWarning:
      return "warning";
    case Severity::kCritical:
      return "critical";
  }
  return "warning";
}

std::optional<Severity> SeverityFromName(absl::string_view name) {
  if (name == "info") return Severity::kInfo;
  if (name == "warning") return Severity::kWarning;
  if (name == "critical") return Severity::kCritical;
  return std::nullopt;
}

std::string Fingerprint(Kind kind, absl::string_view cluster, absl::string_view job_id,
                        absl::string_view detail) {
  // Length-prefixed parts, so ("a/b", "c") and ("a", "b/c") differ.
  uint64_t h = 14695981039346656037ull;
  for (absl::string_view part : {KindName(kind), cluster, job_id, detail}) {
    h = Fnv1a(absl::StrCat(part.size(), ":"), h);
    h = Fnv1a(part, h);
  }
  return absl::StrFormat("%s-%016x", KindName(kind), h);
}

Matcher::Matcher(std::string name, std::string value, Op op, std::shared_ptr<const re2::RE2> re)
    : name_(std::move(name)), value_(std::move(value)), op_(op), re_(std::move(re)) {}

absl::StatusOr<Matcher> Matcher::Create(std::string name, std::string value, Op op,
                                        absl::string_view field) {
  if (name.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".name: must not be empty"));
  }
  std::shared_ptr<const re2::RE2> re;
  if (op == Op::kRegex || op == Op::kNotRegex) {
    re2::RE2::Options options;
    options.set_log_errors(false);
    auto compiled = std::make_shared<const re2::RE2>(value, options);
    if (!compiled->ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ".value: \"", value, "\" is not a valid regular expression: ", compiled->error()));
    }
    re = std::move(compiled);
  }
  return Matcher(std::move(name), std::move(value), op, std::move(re));
}

bool Matcher::Matches(const Labels& labels) const {
  auto it = labels.find(name_);
  const std::string empty;
  const std::string& v = it == labels.end() ? empty : it->second;
  switch (op_) {
    case Op::kEqual:
      return v == value_;
    case Op::kNotEqual:
      return v != value_;
    case Op::kRegex:
      return re2::RE2::FullMatch(v, *re_);
    case Op::kNotRegex:
      return !re2::RE2::FullMatch(v, *re_);
  }
  return false;
}

bool MatchesAll(const std::vector<Matcher>& matchers, const Labels& labels) {
  return std::all_of(matchers.begin(), matchers.end(),
                     [&](const Matcher& m) { return m.Matches(labels); });
}

absl::Status ValidateRouting(const RoutingConfig& routing) {
  for (size_t i = 0; i < routing.routes.size(); ++i) {
    const Route& r = routing.routes[i];
    const std::string where = absl::StrCat("alerting.routes[", i, "]");
    for (const auto& [name, value] : r.match) {
      if (std::find(std::begin(kRouteLabels), std::end(kRouteLabels), name) ==
          std::end(kRouteLabels)) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ".match.", name,
                         ": unknown label (routes match on cluster, scheduler, team, kind, "
                         "severity)"));
      }
      if (name == "kind" && !KindFromName(value)) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ".match.kind: \"", value, "\" is not an alert kind"));
      }
      if (name == "severity" && !SeverityFromName(value)) {
        return absl::InvalidArgumentError(absl::StrCat(where, ".match.severity: \"", value,
                                                       "\" is not info, warning or critical"));
      }
    }
    if (r.targets.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".targets: must name a target"));
    }
    for (size_t t = 0; t < r.targets.size(); ++t) {
      if (r.targets[t].empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ".targets[", t, "]: must not be empty"));
      }
    }
  }
  for (size_t t = 0; t < routing.default_targets.size(); ++t) {
    if (routing.default_targets[t].empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("alerting.default_targets[", t, "]: must not be empty"));
    }
  }
  return absl::OkStatus();
}

std::vector<std::string> RouteTargets(const RoutingConfig& routing, const Labels& labels) {
  std::vector<std::string> out;
  auto add = [&out](const std::vector<std::string>& targets) {
    for (const std::string& t : targets) {
      if (std::find(out.begin(), out.end(), t) == out.end()) out.push_back(t);
    }
  };
  bool matched = false;
  for (const Route& r : routing.routes) {
    if (!LabelsMatch(r.match, labels)) continue;
    matched = true;
    add(r.targets);
    if (!r.continue_matching) break;
  }
  if (!matched) add(routing.default_targets);
  return out;
}

std::vector<SeverityRule> DefaultSeverityRules() {
  auto kind = [](Kind k) {
    return std::map<std::string, std::string>{{"kind", std::string(KindName(k))}};
  };
  return {
      {.match = kind(Kind::kRegressionInJob), .min_factor = 2.0, .severity = Severity::kCritical},
      {.match = kind(Kind::kRegressionVsWorkload),
       .min_factor = 2.0,
       .severity = Severity::kCritical},
      {.match = kind(Kind::kDataQuality), .min_factor = std::nullopt, .severity = Severity::kInfo},
      // GPU faults: the XID catalog's judgement (gpu_fault_findings.h), in the label
      // catalog_severity: hardware and driver faults that need a reset or a drain are
      // critical, the application's XIDs and unknown codes warnings.
      {.match = {{"kind", "gpu_fault"}, {"catalog_severity", "critical"}},
       .min_factor = std::nullopt,
       .severity = Severity::kCritical},
      {.match = {}, .min_factor = std::nullopt, .severity = Severity::kWarning},
  };
}

absl::Status ValidateSeverityRules(const std::vector<SeverityRule>& rules) {
  for (size_t i = 0; i < rules.size(); ++i) {
    const std::string where = absl::StrCat("alerting.severity_rules[", i, "]");
    auto it = rules[i].match.find("kind");
    if (it != rules[i].match.end() && !KindFromName(it->second)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".match.kind: \"", it->second, "\" is not an alert kind"));
    }
    if (rules[i].match.count("severity") > 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".match.severity: severity rules cannot match on severity"));
    }
    if (rules[i].min_factor && !(*rules[i].min_factor > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".min_factor: ", *rules[i].min_factor, " must be positive"));
    }
  }
  return absl::OkStatus();
}

Severity DecideSeverity(const std::vector<SeverityRule>& rules, const Labels& labels,
                        std::optional<double> factor) {
  for (const SeverityRule& r : rules) {
    if (!LabelsMatch(r.match, labels)) continue;
    if (r.min_factor && !(factor && *factor >= *r.min_factor)) continue;
    return r.severity;
  }
  for (const SeverityRule& r : DefaultSeverityRules()) {
    if (!LabelsMatch(r.match, labels)) continue;
    if (r.min_factor && !(factor && *factor >= *r.min_factor)) continue;
    return r.severity;
  }
  return Severity::kWarning;
}

}  // namespace goodput::alerting
