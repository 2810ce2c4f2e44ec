// `alerting.policies`: the operator's policies that act on findings (services/alerting/README.md,
// "Policies"). Off unless `enabled: true`; dry-run unless `dry_run: false` (globally or per rule).
//
//   alerting:
//     policies:
//       enabled: true
//       dry_run: true
//       interval_s: 30
//       audit_targets: [am-prod]
//       exempt: {accounts: [prod], users: [], partitions: [], qos: [], labels: {k: v}}
//       limits: {max_drains_per_hour: 2, max_drained_share: 0.05}
//       clusters:
//         eos: {slurm_conf: /etc/slurm/slurm.conf, scontrol_path: scontrol, scancel_path: scancel,
//               squeue_path: squeue, sinfo_path: sinfo, timeout_s: 15, osmo_target: osmo,
//               max_drains_per_hour: 1, max_drained_share: 0.02}
//       rules:
//         - {name: idle-cancel, kinds: [job_idle, hung], match: {cluster: eos, partition: gpu,
//            account: ml, user: [a, b], qos: normal, labels: {k: v}}, actions: [cancel],
//            notify: [slurm-eos], grace_s: 1800, min_job_age_s: 3600, dry_run: false,
//            exempt: {...}}
//
// Every key is checked: an unknown key or a bad value is an INVALID_ARGUMENT naming the key and
// the value (`alerting.policies.rules[0].actions[1]: "reboot" is not an action (cancel, requeue,
// drain)`). Target names (audit_targets, notify, osmo_target) are checked against delivery's
// targets by main.cc.
#pragma once

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "services/alerting/policy_actuator.h"
#include "services/alerting/policy_rules.h"
#include "services/platform/config.h"

namespace goodput::alerting {

struct PolicySettings {
  PolicyConfig config = {};
  std::map<std::string, SlurmAccess> slurm = {};         // by cluster
  std::map<std::string, std::string> osmo_targets = {};  // cluster -> osmo target name
};

absl::StatusOr<PolicySettings> LoadPolicySettings(const platform::ConfigTree& tree);

}  // namespace goodput::alerting
