// The pure rules of the policy stage (policy_stage.h): which findings an operator's rule acts
// on, what it does, when, and what keeps it from acting. No I/O, no clock, no protobuf.
//
// A rule matches an open alert of one of its kinds whose job matches every selector it names
// (cluster, partition, account, user, QOS, job labels); each matching (alert, rule) runs the
// rule's ladder: warn the owner (outbox), wait `grace`, then act — unless the finding cleared
// meanwhile, the job is exempt, the job is younger than `min_job_age`, or the cluster's
// rate limits hold the action back.
//
//   PolicyConfig config = ...;                           // alerting.policies (policy_config.h)
//   PolicySubject subject = SubjectOf(alert_labels, ...);
//   for (const PolicyRule* rule : MatchingRules(config, Kind::kJobIdle, subject)) ...
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "services/alerting/alert_rules.h"

namespace goodput::alerting {

// What a rule may do. Each is idempotent at the peer (see policy_actuator.h).
enum class PolicyAction {
  kCancel,   // Slurm: scancel the job; Osmo: cancel the workflow (REST)
  kRequeue,  // Slurm: scontrol requeue the job
  kDrain,    // Slurm: scontrol update NodeName=<node> State=DRAIN for each node the alert names
};
absl::string_view PolicyActionName(PolicyAction action);  // "cancel", "requeue", "drain"
std::optional<PolicyAction> PolicyActionFromName(absl::string_view name);

// The finding kinds a rule may act on: the resilience findings and persistent stragglers.
// (Regressions, divergence and data quality say something about efficiency, not about a job
// that must be stopped.)
inline constexpr Kind kPolicyKinds[] = {Kind::kGpuFault,  Kind::kHung,      Kind::kJobIdle,
                                        Kind::kSilentGpu, Kind::kStraggler, Kind::kIdleGpus};
// Kinds whose alerts name the GPUs (and so the nodes) concerned: the only ones `drain` fits.
inline constexpr Kind kNodeKinds[] = {Kind::kGpuFault, Kind::kSilentGpu, Kind::kStraggler};

// Who and where a job is, as rules select it. Partition and QOS come from the job's labels
// (`partition`, `qos`: the Slurm prolog sets them) when the job record has none.
struct PolicySubject {
  std::string cluster = {};
  std::string partition = {};
  std::string account = {};  // the job's team (Slurm account)
  std::string user = {};
  std::string qos = {};
  std::string scheduler = {};  // "slurm", "osmo", "kubernetes", "other"
  std::map<std::string, std::string> labels = {};
};
// The subject of an alert from its labels (alert_rules.h Labels: cluster, team, user,
// scheduler and the job's own labels, among them partition and qos).
PolicySubject SubjectFromLabels(const Labels& labels);

// A selector: the value must be one of `values` (empty: anything).
using OneOf = std::vector<std::string>;

// Jobs no rule acts on; they are still warned (a person decides).
struct PolicyExemptions {
  std::set<std::string> accounts = {};
  std::set<std::string> users = {};
  std::set<std::string> partitions = {};
  std::set<std::string> qos = {};
  std::map<std::string, std::string> labels = {};  // any one equal label exempts
};
// Why `subject` is exempt ("account prod-inference is exempt"), or empty.
std::string ExemptionOf(const PolicyExemptions& exempt, const PolicySubject& subject);

struct PolicyRule {
  std::string name = {};
  std::vector<Kind> kinds = {};
  OneOf clusters = {}, partitions = {}, accounts = {}, users = {}, qos = {};
  std::map<std::string, std::string> labels = {};  // every one must be equal
  std::vector<PolicyAction> actions = {};          // in order (drain before requeue)
  std::vector<std::string> notify = {};            // outbox targets that warn the owner
  absl::Duration grace = absl::Minutes(30);        // warned -> act
  absl::Duration min_job_age = absl::Hours(1);     // no action on a younger job (it waits)
  std::optional<bool> dry_run = {};                // unset: the stage's
  PolicyExemptions exempt = {};                    // in addition to the stage's
};

// Per-cluster safety limits and how to reach the cluster's scheduler.
struct PolicyClusterLimits {
  int max_drains_per_hour = 2;
  double max_drained_share = 0.05;  // unavailable nodes (drained or down) after a drain
};

struct PolicyConfig {
  bool enabled = false;
  bool dry_run = true;  // the default: record what would be done, change nothing
  absl::Duration interval = absl::Seconds(30);
  absl::Duration lease = absl::Minutes(2);  // an action claimed but not finished is retried after
  std::vector<std::string> audit_targets = {};  // operators hear of every outcome (outbox)
  PolicyExemptions exempt = {};
  std::vector<PolicyRule> rules = {};
  PolicyClusterLimits default_limits = {};
  std::map<std::string, PolicyClusterLimits> limits = {};  // by cluster
};

bool RuleMatches(const PolicyRule& rule, Kind kind, const PolicySubject& subject);
// The rules of `config` that act on an alert of `kind` about `subject`, in configured order.
std::vector<const PolicyRule*> MatchingRules(const PolicyConfig& config, Kind kind,
                                             const PolicySubject& subject);
const PolicyClusterLimits& LimitsFor(const PolicyConfig& config, const std::string& cluster);

// INVALID_ARGUMENT naming the field and value (`alerting.policies.rules[1].kinds[0]:
// "regression_in_job" is not a kind a policy may act on (...)`): no rules, a duplicate or empty
// rule name, a kind outside kPolicyKinds, no actions, `drain` with a kind that names no GPUs,
// a negative grace or age, limits out of range.
absl::Status ValidatePolicyConfig(const PolicyConfig& config);

// When the action of a rule warned at `warned` may run: after the grace, and not before the
// job is `min_job_age` old (a job without a start time waits only for the grace).
absl::Time ActAfter(const PolicyRule& rule, absl::Time warned, std::optional<absl::Time> job_start);

// Why a drain must wait, or empty: `drains_last_hour` drains on the cluster already, and
// `unavailable` of `total` nodes drained or down (not counting the node itself).
std::string DrainHeldBack(const PolicyClusterLimits& limits, int drains_last_hour, int unavailable,
                          int total);

// True for Slurm node names goodput may pass to scontrol: letters, digits, '-', '_', '.',
// starting with a letter or digit (so never an option).
bool IsSlurmNodeName(absl::string_view node);

}  // namespace goodput::alerting
