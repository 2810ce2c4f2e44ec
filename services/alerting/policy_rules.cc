#include "services/alerting/policy_rules.h"

#include <algorithm>
#include <cctype>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace goodput::alerting {
namespace {

bool OneOfMatches(const OneOf& allowed, const std::string& value) {
  return allowed.empty() || std::find(allowed.begin(), allowed.end(), value) != allowed.end();
}

std::string KindList(absl::Span<const Kind> kinds) {
  std::vector<std::string> names;
  for (Kind k : kinds) names.emplace_back(KindName(k));
  return absl::StrJoin(names, ", ");
}

absl::Status CheckExemptions(const PolicyExemptions& e, const std::string& where) {
  for (const auto& [k, v] : e.labels) {
    if (k.empty()) return absl::InvalidArgumentError(absl::StrCat(where, ".labels: empty name"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::string_view PolicyActionName(PolicyAction action) {
  switch (action) {
    case PolicyAction::kCancel:
      return "cancel";
    case PolicyAction::kRequeue:
      return "requeue";
    case PolicyAction::kDrain:
      return "drain";
  }
  return "";
}

std::optional<PolicyAction> PolicyActionFromName(absl::string_view name) {
  for (PolicyAction a : {PolicyAction::kCancel, PolicyAction::kRequeue, PolicyAction::kDrain}) {
    if (PolicyActionName(a) == name) return a;
  }
  return std::nullopt;
}

PolicySubject SubjectFromLabels(const Labels& labels) {
  auto get = [&](const char* key) {
    auto it = labels.find(key);
    return it == labels.end() ? std::string() : it->second;
  };
  PolicySubject s{.cluster = get("cluster"),
                  .partition = get("partition"),
                  .account = get("team"),
                  .user = get("user"),
                  .qos = get("qos"),
                  .scheduler = get("scheduler"),
                  .labels = labels};
  return s;
}

std::string ExemptionOf(const PolicyExemptions& exempt, const PolicySubject& subject) {
  if (!subject.account.empty() && exempt.accounts.contains(subject.account)) {
    return absl::StrCat("account ", subject.account, " is exempt");
  }
  if (!subject.user.empty() && exempt.users.contains(subject.user)) {
    return absl::StrCat("user ", subject.user, " is exempt");
  }
  if (!subject.partition.empty() && exempt.partitions.contains(subject.partition)) {
    return absl::StrCat("partition ", subject.partition, " is exempt");
  }
  if (!subject.qos.empty() && exempt.qos.contains(subject.qos)) {
    return absl::StrCat("QOS ", subject.qos, " is exempt");
  }
  for (const auto& [k, v] : exempt.labels) {
    auto it = subject.labels.find(k);
    if (it != subject.labels.end() && it->second == v) {
      return absl::StrCat("label ", k, "=", v, " is exempt");
    }
  }
  return "";
}

bool RuleMatches(const PolicyRule& rule, Kind kind, const PolicySubject& subject) {
  if (std::find(rule.kinds.begin(), rule.kinds.end(), kind) == rule.kinds.end()) return false;
  if (!OneOfMatches(rule.clusters, subject.cluster) ||
      !OneOfMatches(rule.partitions, subject.partition) ||
      !OneOfMatches(rule.accounts, subject.account) || !OneOfMatches(rule.users, subject.user) ||
      !OneOfMatches(rule.qos, subject.qos)) {
    return false;
  }
  for (const auto& [k, v] : rule.labels) {
    auto it = subject.labels.find(k);
    if (it == subject.labels.end() || it->second != v) return false;
  }
  return true;
}

std::vector<const PolicyRule*> MatchingRules(const PolicyConfig& config, Kind kind,
                                             const PolicySubject& subject) {
  std::vector<const PolicyRule*> out;
  for (const PolicyRule& r : config.rules) {
    if (RuleMatches(r, kind, subject)) out.push_back(&r);
  }
  return out;
}

const PolicyClusterLimits& LimitsFor(const PolicyConfig& config, const std::string& cluster) {
  auto it = config.limits.find(cluster);
  return it == config.limits.end() ? config.default_limits : it->second;
}

absl::Status ValidatePolicyConfig(const PolicyConfig& config) {
  const std::string base = "alerting.policies";
  if (config.interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        base, ".interval_s: ", absl::ToDoubleSeconds(config.interval), " must be positive"));
  }
  if (absl::Status s = CheckExemptions(config.exempt, base + ".exempt"); !s.ok()) return s;
  auto check_limits = [](const PolicyClusterLimits& l, const std::string& where) -> absl::Status {
    if (l.max_drains_per_hour < 0 || l.max_drains_per_hour > 10000) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ".max_drains_per_hour: ", l.max_drains_per_hour, " is outside [0, 10000]"));
    }
    if (!(l.max_drained_share >= 0 && l.max_drained_share <= 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".max_drained_share: ", l.max_drained_share, " is outside [0, 1]"));
    }
    return absl::OkStatus();
  };
  if (absl::Status s = check_limits(config.default_limits, base + ".limits"); !s.ok()) return s;
  for (const auto& [cluster, l] : config.limits) {
    if (absl::Status s = check_limits(l, absl::StrCat(base, ".clusters.", cluster)); !s.ok()) {
      return s;
    }
  }
  if (config.enabled && config.rules.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(base, ".rules: at least one rule is needed when policies are enabled"));
  }
  std::set<std::string> names;
  for (size_t i = 0; i < config.rules.size(); ++i) {
    const PolicyRule& r = config.rules[i];
    const std::string where = absl::StrCat(base, ".rules[", i, "]");
    if (r.name.empty())
      return absl::InvalidArgumentError(absl::StrCat(where, ".name: is required"));
    for (char c : r.name) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ".name: \"", r.name, "\" may hold only letters, digits, '-', '_' and '.'"));
      }
    }
    if (!names.insert(r.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".name: \"", r.name, "\" is the name of an earlier rule"));
    }
    if (r.kinds.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".kinds: is required (", KindList(kPolicyKinds), ")"));
    }
    for (size_t k = 0; k < r.kinds.size(); ++k) {
      if (std::find(std::begin(kPolicyKinds), std::end(kPolicyKinds), r.kinds[k]) ==
          std::end(kPolicyKinds)) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ".kinds[", k, "]: \"", KindName(r.kinds[k]),
                         "\" is not a kind a policy may act on (", KindList(kPolicyKinds), ")"));
      }
    }
    if (r.actions.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".actions: is required (cancel, requeue, drain)"));
    }
    for (size_t a = 0; a < r.actions.size(); ++a) {
      if (r.actions[a] != PolicyAction::kDrain) continue;
      for (Kind k : r.kinds) {
        if (std::find(std::begin(kNodeKinds), std::end(kNodeKinds), k) == std::end(kNodeKinds)) {
          return absl::InvalidArgumentError(
              absl::StrCat(where, ".actions[", a, "]: drain needs findings that name their GPUs (",
                           KindList(kNodeKinds), "); \"", KindName(k), "\" names none"));
        }
      }
    }
    if (std::find(r.actions.begin(), r.actions.end(), PolicyAction::kCancel) != r.actions.end() &&
        std::find(r.actions.begin(), r.actions.end(), PolicyAction::kRequeue) != r.actions.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".actions: cancel and requeue exclude each other"));
    }
    if (r.grace < absl::ZeroDuration()) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ".grace_s: ", absl::ToDoubleSeconds(r.grace), " must not be negative"));
    }
    if (r.min_job_age < absl::ZeroDuration()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".min_job_age_s: ", absl::ToDoubleSeconds(r.min_job_age),
                       " must not be negative"));
    }
    for (size_t t = 0; t < r.notify.size(); ++t) {
      if (r.notify[t].empty()) {
        return absl::InvalidArgumentError(absl::StrCat(where, ".notify[", t, "]: empty name"));
      }
    }
    if (absl::Status s = CheckExemptions(r.exempt, where + ".exempt"); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Time ActAfter(const PolicyRule& rule, absl::Time warned,
                    std::optional<absl::Time> job_start) {
  absl::Time t = warned + rule.grace;
  if (job_start.has_value()) t = std::max(t, *job_start + rule.min_job_age);
  return t;
}

std::string DrainHeldBack(const PolicyClusterLimits& limits, int drains_last_hour, int unavailable,
                          int total) {
  if (drains_last_hour >= limits.max_drains_per_hour) {
    return absl::StrCat(
        "rate limit: ", drains_last_hour, " drain", drains_last_hour == 1 ? "" : "s",
        " in the last hour on this cluster (max_drains_per_hour ", limits.max_drains_per_hour, ")");
  }
  if (total <= 0) return "rate limit: the cluster's node count is unknown";
  const double share = static_cast<double>(unavailable + 1) / total;
  if (share > limits.max_drained_share + 1e-9) {
    return absl::StrCat("rate limit: draining would leave ", unavailable + 1, " of ", total,
                        " nodes drained or down (max_drained_share ", limits.max_drained_share,
                        ")");
  }
  return "";
}

bool IsSlurmNodeName(absl::string_view node) {
  if (node.empty() || node.size() > 128) return false;
  if (!std::isalnum(static_cast<unsigned char>(node[0]))) return false;
  for (char c : node) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') {
      return false;
    }
  }
  return true;
}

}  // namespace goodput::alerting
