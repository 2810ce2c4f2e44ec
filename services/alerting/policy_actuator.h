// What the policy stage does at the peers: Slurm commands (scancel, scontrol requeue, scontrol
// update NodeName=... State=DRAIN|RESUME, squeue and sinfo to look first) and Osmo's workflow
// cancel through its REST API. Every action is idempotent: it reads the peer's state first and
// does nothing when the job or node is already where the action would put it.
//
// Commands run as the Slurm target's do (targets/slurm_target.h): no shell, `--` before the
// arguments of scontrol and scancel, job ids that must be Slurm job ids and node names that
// must be plain host names (never an option), values attached to squeue's and sinfo's
// options, and fields read between delimiters made of a random token drawn for each call.
//
//   PolicyActuator actuator({{"eos", SlurmAccess{.slurm_conf = "/etc/slurm/slurm.conf"}}}, {});
//   absl::StatusOr<std::string> done = actuator.Drain("eos", "n17", "goodput: XID 79 on GPU 3");
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "services/alerting/targets/osmo_target.h"

namespace goodput::alerting {

// How the stage reaches one cluster's Slurm.
struct SlurmAccess {
  std::string scontrol_path = "scontrol";
  std::string scancel_path = "scancel";
  std::string squeue_path = "squeue";
  std::string sinfo_path = "sinfo";
  std::string slurm_conf = {};  // SLURM_CONF; empty: Slurm's default
  absl::Duration timeout = absl::Seconds(15);
};

// A job as squeue shows it.
struct PolicyJobView {
  std::string state = {};       // RUNNING, PENDING, COMPLETED, ...
  std::string start_time = {};  // squeue %S, as printed (changes when a requeued job restarts)
};

// A node as sinfo shows it.
struct PolicyNodeView {
  std::string state = {};   // sinfo %t: idle, alloc, mix, drain, drng, down, ...
  std::string reason = {};  // sinfo %E ("none" when there is none)
};
// True for states in which the node takes no new jobs (drain, drng, down, fail).
bool NodeUnavailable(const std::string& state);
// True for a node being drained or drained.
bool NodeDrained(const std::string& state);
// Reasons goodput writes start with this.
inline constexpr char kDrainReasonPrefix[] = "goodput:";

class PolicyActuator {
 public:
  PolicyActuator(std::map<std::string, SlurmAccess> slurm,
                 std::map<std::string, OsmoTargetConfig> osmo)
      : slurm_(std::move(slurm)), osmo_(std::move(osmo)) {}

  bool HasSlurm(const std::string& cluster) const { return slurm_.contains(cluster); }
  bool HasOsmo(const std::string& cluster) const { return osmo_.contains(cluster); }

  // The commands as they would run, for the audit log and dry runs.
  std::string CancelCommand(const std::string& cluster, const std::string& job_id) const;
  std::string RequeueCommand(const std::string& cluster, const std::string& job_id) const;
  std::string DrainCommand(const std::string& cluster, const std::string& node,
                           const std::string& reason) const;
  std::string ResumeCommand(const std::string& cluster, const std::string& node) const;
  std::string CancelWorkflowCommand(const std::string& cluster, const std::string& workflow) const;

  // NOT_FOUND when squeue does not list the job (it ended long ago).
  absl::StatusOr<PolicyJobView> Job(const std::string& cluster, const std::string& job_id);
  absl::StatusOr<PolicyNodeView> Node(const std::string& cluster, const std::string& node);
  // Nodes of the cluster: {unavailable (drained or down), total}.
  absl::StatusOr<std::pair<int, int>> NodeCounts(const std::string& cluster);

  // Each returns what happened in words ("cancelled", "job already COMPLETED") or an error
  // naming the command and Slurm's answer.
  absl::StatusOr<std::string> Cancel(const std::string& cluster, const std::string& job_id);
  // `start_time_before`: the job's start time when the action was first claimed; a job that
  // is pending again or started since was requeued by an earlier attempt.
  absl::StatusOr<std::string> Requeue(const std::string& cluster, const std::string& job_id,
                                      const std::string& start_time_before);
  absl::StatusOr<std::string> Drain(const std::string& cluster, const std::string& node,
                                    const std::string& reason);
  // Resumes a node goodput drained; FAILED_PRECONDITION when the node is drained for a reason
  // that is not goodput's (someone drained it again: it stays as it is).
  absl::StatusOr<std::string> Resume(const std::string& cluster, const std::string& node);
  // The workflow is the first of the Osmo target's workflow_label_keys in `labels`.
  absl::StatusOr<std::string> WorkflowOf(const std::string& cluster,
                                         const std::map<std::string, std::string>& labels) const;
  absl::StatusOr<std::string> CancelWorkflow(const std::string& cluster,
                                             const std::string& workflow);

 private:
  absl::StatusOr<const SlurmAccess*> AccessFor(const std::string& cluster) const;
  absl::StatusOr<std::string> Run(const SlurmAccess& access, const std::string& path,
                                  const std::string& what, const std::vector<std::string>& args);

  std::map<std::string, SlurmAccess> slurm_;
  std::map<std::string, OsmoTargetConfig> osmo_;
};

}  // namespace goodput::alerting
