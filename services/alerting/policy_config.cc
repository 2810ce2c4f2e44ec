#include "services/alerting/policy_config.h"

#include <exception>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace goodput::alerting {
namespace {

constexpr char kBase[] = "alerting.policies";

absl::Status Invalid(const std::string& where, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", what));
}

absl::Status CheckKeys(const YAML::Node& node, const std::string& where,
                       const std::vector<std::string>& known) {
  if (!node.IsMap()) return Invalid(where, "expected a mapping");
  for (const auto& kv : node) {
    const std::string key = kv.first.as<std::string>();
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      return Invalid(absl::StrCat(where, ".", key),
                     absl::StrCat("unknown key (", absl::StrJoin(known, ", "), ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Scalar(const YAML::Node& node, const std::string& where) {
  if (!node.IsScalar()) return Invalid(where, "expected a single value");
  return node.as<std::string>();
}

absl::StatusOr<std::vector<std::string>> List(const YAML::Node& node, const std::string& where) {
  std::vector<std::string> out;
  if (!node.IsDefined() || node.IsNull()) return out;
  if (node.IsScalar()) return std::vector<std::string>{node.as<std::string>()};
  if (!node.IsSequence()) return Invalid(where, "expected a value or a list");
  for (size_t i = 0; i < node.size(); ++i) {
    absl::StatusOr<std::string> v = Scalar(node[i], absl::StrCat(where, "[", i, "]"));
    if (!v.ok()) return v.status();
    out.push_back(*v);
  }
  return out;
}

absl::StatusOr<std::map<std::string, std::string>> StringMap(const YAML::Node& node,
                                                             const std::string& where) {
  std::map<std::string, std::string> out;
  if (!node.IsDefined() || node.IsNull()) return out;
  if (!node.IsMap()) return Invalid(where, "expected a mapping");
  for (const auto& kv : node) {
    const std::string key = kv.first.as<std::string>();
    absl::StatusOr<std::string> v = Scalar(kv.second, absl::StrCat(where, ".", key));
    if (!v.ok()) return v.status();
    out[key] = *v;
  }
  return out;
}

absl::StatusOr<double> Number(const YAML::Node& node, const std::string& where, double min,
                              double max) {
  absl::StatusOr<std::string> s = Scalar(node, where);
  if (!s.ok()) return s.status();
  double v = 0;
  if (!absl::SimpleAtod(*s, &v))
    return Invalid(where, absl::StrCat("\"", *s, "\" is not a number"));
  if (!(v >= min && v <= max)) {
    return Invalid(where, absl::StrFormat("%s is outside [%.15g, %.15g]", *s, min, max));
  }
  return v;
}

absl::StatusOr<bool> Bool(const YAML::Node& node, const std::string& where) {
  absl::StatusOr<std::string> s = Scalar(node, where);
  if (!s.ok()) return s.status();
  const std::string v = absl::AsciiStrToLower(*s);
  if (v == "true" || v == "yes" || v == "on" || v == "1") return true;
  if (v == "false" || v == "no" || v == "off" || v == "0") return false;
  return Invalid(where, absl::StrCat("\"", *s, "\" is not true or false"));
}

absl::StatusOr<std::set<std::string>> NameSet(const YAML::Node& node, const std::string& where) {
  absl::StatusOr<std::vector<std::string>> l = List(node, where);
  if (!l.ok()) return l.status();
  return std::set<std::string>(l->begin(), l->end());
}

absl::StatusOr<PolicyExemptions> Exemptions(const YAML::Node& node, const std::string& where) {
  PolicyExemptions e;
  if (!node.IsDefined() || node.IsNull()) return e;
  if (absl::Status s = CheckKeys(node, where, {"accounts", "users", "partitions", "qos", "labels"});
      !s.ok()) {
    return s;
  }
  absl::StatusOr<std::set<std::string>> accounts = NameSet(node["accounts"], where + ".accounts");
  if (!accounts.ok()) return accounts.status();
  absl::StatusOr<std::set<std::string>> users = NameSet(node["users"], where + ".users");
  if (!users.ok()) return users.status();
  absl::StatusOr<std::set<std::string>> partitions =
      NameSet(node["partitions"], where + ".partitions");
  if (!partitions.ok()) return partitions.status();
  absl::StatusOr<std::set<std::string>> qos = NameSet(node["qos"], where + ".qos");
  if (!qos.ok()) return qos.status();
  absl::StatusOr<std::map<std::string, std::string>> labels =
      StringMap(node["labels"], where + ".labels");
  if (!labels.ok()) return labels.status();
  e.accounts = *accounts;
  e.users = *users;
  e.partitions = *partitions;
  e.qos = *qos;
  e.labels = *labels;
  return e;
}

absl::Status Limits(const YAML::Node& node, const std::string& where, PolicyClusterLimits& l) {
  if (node["max_drains_per_hour"].IsDefined()) {
    absl::StatusOr<double> v =
        Number(node["max_drains_per_hour"], where + ".max_drains_per_hour", 0, 10000);
    if (!v.ok()) return v.status();
    if (*v != static_cast<int>(*v)) {
      return Invalid(where + ".max_drains_per_hour", absl::StrCat(*v, " is not a whole number"));
    }
    l.max_drains_per_hour = static_cast<int>(*v);
  }
  if (node["max_drained_share"].IsDefined()) {
    absl::StatusOr<double> v =
        Number(node["max_drained_share"], where + ".max_drained_share", 0, 1);
    if (!v.ok()) return v.status();
    l.max_drained_share = *v;
  }
  return absl::OkStatus();
}

absl::StatusOr<PolicyRule> Rule(const YAML::Node& node, const std::string& where) {
  if (absl::Status s = CheckKeys(node, where,
                                 {"name", "kinds", "match", "actions", "notify", "grace_s",
                                  "min_job_age_s", "dry_run", "exempt"});
      !s.ok()) {
    return s;
  }
  PolicyRule r;
  if (node["name"].IsDefined()) {
    absl::StatusOr<std::string> name = Scalar(node["name"], where + ".name");
    if (!name.ok()) return name.status();
    r.name = *name;
  }
  absl::StatusOr<std::vector<std::string>> kinds = List(node["kinds"], where + ".kinds");
  if (!kinds.ok()) return kinds.status();
  for (size_t i = 0; i < kinds->size(); ++i) {
    std::optional<Kind> k = KindFromName((*kinds)[i]);
    if (!k) {
      return Invalid(absl::StrCat(where, ".kinds[", i, "]"),
                     absl::StrCat("\"", (*kinds)[i], "\" is not an alert kind"));
    }
    if (*k == Kind::kPlatformLagging) {
      return Invalid(absl::StrCat(where, ".kinds[", i, "]"),
                     "\"platform_lagging\" is goodput's own backlog: there is no job to act on");
    }
    r.kinds.push_back(*k);
  }
  const YAML::Node match = node["match"];
  if (match.IsDefined() && !match.IsNull()) {
    const std::string m = where + ".match";
    if (absl::Status s =
            CheckKeys(match, m, {"cluster", "partition", "account", "user", "qos", "labels"});
        !s.ok()) {
      return s;
    }
    for (auto [key, field] :
         std::vector<std::pair<const char*, OneOf*>>{{"cluster", &r.clusters},
                                                     {"partition", &r.partitions},
                                                     {"account", &r.accounts},
                                                     {"user", &r.users},
                                                     {"qos", &r.qos}}) {
      absl::StatusOr<std::vector<std::string>> v = List(match[key], absl::StrCat(m, ".", key));
      if (!v.ok()) return v.status();
      *field = *v;
    }
    absl::StatusOr<std::map<std::string, std::string>> labels =
        StringMap(match["labels"], m + ".labels");
    if (!labels.ok()) return labels.status();
    r.labels = *labels;
  }
  absl::StatusOr<std::vector<std::string>> actions = List(node["actions"], where + ".actions");
  if (!actions.ok()) return actions.status();
  for (size_t i = 0; i < actions->size(); ++i) {
    std::optional<PolicyAction> a = PolicyActionFromName((*actions)[i]);
    if (!a) {
      return Invalid(
          absl::StrCat(where, ".actions[", i, "]"),
          absl::StrCat("\"", (*actions)[i], "\" is not an action (cancel, requeue, drain)"));
    }
    if (std::find(r.actions.begin(), r.actions.end(), *a) != r.actions.end()) continue;
    r.actions.push_back(*a);
  }
  // A node is drained before its job is requeued, so the job does not restart on it.
  std::stable_sort(r.actions.begin(), r.actions.end(), [](PolicyAction a, PolicyAction b) {
    return a == PolicyAction::kDrain && b != PolicyAction::kDrain;
  });
  absl::StatusOr<std::vector<std::string>> notify = List(node["notify"], where + ".notify");
  if (!notify.ok()) return notify.status();
  r.notify = *notify;
  if (node["grace_s"].IsDefined()) {
    absl::StatusOr<double> v = Number(node["grace_s"], where + ".grace_s", 0, 30 * 86400);
    if (!v.ok()) return v.status();
    r.grace = absl::Seconds(*v);
  }
  if (node["min_job_age_s"].IsDefined()) {
    absl::StatusOr<double> v =
        Number(node["min_job_age_s"], where + ".min_job_age_s", 0, 365 * 86400);
    if (!v.ok()) return v.status();
    r.min_job_age = absl::Seconds(*v);
  }
  if (node["dry_run"].IsDefined()) {
    absl::StatusOr<bool> v = Bool(node["dry_run"], where + ".dry_run");
    if (!v.ok()) return v.status();
    r.dry_run = *v;
  }
  absl::StatusOr<PolicyExemptions> exempt = Exemptions(node["exempt"], where + ".exempt");
  if (!exempt.ok()) return exempt.status();
  r.exempt = *exempt;
  return r;
}

}  // namespace

absl::StatusOr<PolicySettings> LoadPolicySettings(const platform::ConfigTree& tree) {
  PolicySettings out;
  PolicyConfig& c = out.config;
  try {
    const YAML::Node root = tree.root();
    const YAML::Node alerting = root.IsMap() ? root["alerting"] : YAML::Node();
    const YAML::Node node =
        alerting.IsDefined() && alerting.IsMap() ? alerting["policies"] : YAML::Node();
    if (!node.IsDefined() || node.IsNull()) {
      if (absl::Status s = ValidatePolicyConfig(c); !s.ok()) return s;
      return out;
    }
    if (absl::Status s = CheckKeys(node, kBase,
                                   {"enabled", "dry_run", "interval_s", "lease_s", "audit_targets",
                                    "exempt", "limits", "clusters", "rules"});
        !s.ok()) {
      return s;
    }
    absl::StatusOr<bool> enabled = tree.GetBool("alerting.policies.enabled", false);
    if (!enabled.ok()) return enabled.status();
    c.enabled = *enabled;
    absl::StatusOr<bool> dry_run = tree.GetBool("alerting.policies.dry_run", true);
    if (!dry_run.ok()) return dry_run.status();
    c.dry_run = *dry_run;
    absl::StatusOr<absl::Duration> interval = tree.GetSeconds("alerting.policies.interval_s", 30);
    if (!interval.ok()) return interval.status();
    c.interval = *interval;
    absl::StatusOr<absl::Duration> lease = tree.GetSeconds("alerting.policies.lease_s", 120);
    if (!lease.ok()) return lease.status();
    if (*lease < absl::Seconds(10)) {
      return Invalid("alerting.policies.lease_s",
                     absl::StrCat(absl::ToDoubleSeconds(*lease),
                                  " is too short (at least 10 s, longer than a Slurm command)"));
    }
    c.lease = *lease;
    absl::StatusOr<std::vector<std::string>> audit =
        List(node["audit_targets"], "alerting.policies.audit_targets");
    if (!audit.ok()) return audit.status();
    c.audit_targets = *audit;
    absl::StatusOr<PolicyExemptions> exempt =
        Exemptions(node["exempt"], "alerting.policies.exempt");
    if (!exempt.ok()) return exempt.status();
    c.exempt = *exempt;
    const YAML::Node limits = node["limits"];
    if (limits.IsDefined() && !limits.IsNull()) {
      if (absl::Status s = CheckKeys(limits, "alerting.policies.limits",
                                     {"max_drains_per_hour", "max_drained_share"});
          !s.ok()) {
        return s;
      }
      if (absl::Status s = Limits(limits, "alerting.policies.limits", c.default_limits); !s.ok()) {
        return s;
      }
    }
    const YAML::Node clusters = node["clusters"];
    if (clusters.IsDefined() && !clusters.IsNull()) {
      if (!clusters.IsMap()) return Invalid("alerting.policies.clusters", "expected a mapping");
      for (const auto& kv : clusters) {
        const std::string name = kv.first.as<std::string>();
        const std::string where = absl::StrCat("alerting.policies.clusters.", name);
        const YAML::Node cl = kv.second;
        if (absl::Status s = CheckKeys(cl, where,
                                       {"slurm", "slurm_conf", "scontrol_path", "scancel_path",
                                        "squeue_path", "sinfo_path", "timeout_s", "osmo_target",
                                        "max_drains_per_hour", "max_drained_share"});
            !s.ok()) {
          return s;
        }
        PolicyClusterLimits l = c.default_limits;
        if (absl::Status s = Limits(cl, where, l); !s.ok()) return s;
        c.limits[name] = l;
        bool slurm = true;
        if (cl["slurm"].IsDefined()) {
          absl::StatusOr<bool> v = Bool(cl["slurm"], where + ".slurm");
          if (!v.ok()) return v.status();
          slurm = *v;
        }
        if (slurm) {
          SlurmAccess a;
          for (auto [key, field] : std::vector<std::pair<const char*, std::string*>>{
                   {"slurm_conf", &a.slurm_conf},
                   {"scontrol_path", &a.scontrol_path},
                   {"scancel_path", &a.scancel_path},
                   {"squeue_path", &a.squeue_path},
                   {"sinfo_path", &a.sinfo_path}}) {
            if (!cl[key].IsDefined()) continue;
            absl::StatusOr<std::string> v = Scalar(cl[key], absl::StrCat(where, ".", key));
            if (!v.ok()) return v.status();
            if (v->empty() && std::string(key) != "slurm_conf") {
              return Invalid(absl::StrCat(where, ".", key), "must not be empty");
            }
            *field = *v;
          }
          if (cl["timeout_s"].IsDefined()) {
            absl::StatusOr<double> v = Number(cl["timeout_s"], where + ".timeout_s", 1, 300);
            if (!v.ok()) return v.status();
            a.timeout = absl::Seconds(*v);
          }
          out.slurm[name] = a;
        }
        if (cl["osmo_target"].IsDefined()) {
          absl::StatusOr<std::string> v = Scalar(cl["osmo_target"], where + ".osmo_target");
          if (!v.ok()) return v.status();
          out.osmo_targets[name] = *v;
        }
      }
    }
    const YAML::Node rules = node["rules"];
    if (rules.IsDefined() && !rules.IsNull()) {
      if (!rules.IsSequence()) return Invalid("alerting.policies.rules", "expected a list");
      for (size_t i = 0; i < rules.size(); ++i) {
        absl::StatusOr<PolicyRule> r =
            Rule(rules[i], absl::StrCat("alerting.policies.rules[", i, "]"));
        if (!r.ok()) return r.status();
        c.rules.push_back(*std::move(r));
      }
    }
  } catch (const std::exception& ex) {
    return absl::InvalidArgumentError(absl::StrCat("alerting.policies: ", ex.what()));
  }
  if (absl::Status s = ValidatePolicyConfig(c); !s.ok()) return s;
  return out;
}

}  // namespace goodput::alerting
