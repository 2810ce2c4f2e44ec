// The policy stage: the operator's rules (policy_rules.h, `alerting.policies`) acting on
// findings, at the end of the pipeline next to the outbox. Opt-in, and dry-run unless told
// otherwise.
//
// Each pass (every `interval`, and when an alert changes):
//  1. Findings: every firing alert of a kind some rule acts on, not seen before, is matched
//     against the rules; each matching (alert, rule, action[, node]) becomes a row of the audit
//     log `policy_actions` (unique: a replica or a restart that sees it again adds nothing),
//     and the owner is warned through the outbox (the rule's `notify` targets; not in a dry
//     run), in one transaction. The action is due after the rule's grace, and not before the
//     job is `min_job_age` old.
//  2. Due actions: claimed FOR UPDATE SKIP LOCKED with a lease (`claimed_until`), so one
//     replica runs each; a replica that dies mid-command leaves the row to another once the
//     lease ends, and the actuator looks at the job or node before acting again
//     (policy_actuator.h): every action happens at most once at the peer. Before acting: a finding
//     that resolved, was acknowledged or silenced clears the action; an exempt job is only warned;
//     a dry run records the command it would run. Drains are serialized per cluster (an advisory
//     lock) and held back while the cluster's limits say so (drains in the last hour, share of
//     nodes drained or down). Every outcome is recorded and sent to `audit_targets`.
//
// The audit log is read and undone through AlertService (List/Get/UndoPolicyAction).
//
//   PolicyStage stage(pg, &actuator, {.config = settings.config, .replica = "alerting-0"}, log);
//   stage.Start();   // or Step() from a test
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "goodput/v1/alert.pb.h"
#include "services/alerting/policy_actuator.h"
#include "services/alerting/policy_rules.h"
#include "services/platform/logging.h"
#include "services/platform/metrics.h"
#include "services/platform/pg_pool.h"

namespace goodput::alerting {

namespace v1 = ::goodput::v1;

struct PolicyStageOptions {
  PolicyConfig config = {};
  std::string replica = {};                       // recorded as acted_by
  std::function<absl::Time()> clock = nullptr;    // default absl::Now
  std::function<void()> wake_delivery = nullptr;  // after notices were enqueued
  // goodput_alerting_policy_actions_total{rule, action, status}: final outcomes; may be null.
  platform::CounterFamily* outcomes = nullptr;
};

// What one pass did.
struct PolicyStepResult {
  int recorded = 0;  // new action rows
  int acted = 0;     // rows that reached a final status
  int held = 0;      // rows put back to wait (rate limit, transient error)
};

class PolicyStage {
 public:
  PolicyStage(platform::PgPool* pg, PolicyActuator* actuator, PolicyStageOptions options,
              platform::Logger logger);
  ~PolicyStage();

  // One pass (see the file comment). Safe to run on several replicas at once.
  absl::StatusOr<PolicyStepResult> Step();
  // Runs Step every `config.interval` (sooner after Wake) on a thread until Stop.
  void Start();
  void Stop();
  void Wake();

  // The audit log (AlertService). INVALID_ARGUMENT for a bad id or page token.
  absl::StatusOr<v1::ListPolicyActionsResponse> List(const v1::ListPolicyActionsRequest& request);
  absl::StatusOr<v1::PolicyAction> Get(const std::string& action_id);
  absl::StatusOr<v1::PolicyAction> Undo(const v1::UndoPolicyActionRequest& request);

  const PolicyConfig& config() const { return options_.config; }

 private:
  struct Claimed;
  absl::Time Now() const { return options_.clock ? options_.clock() : absl::Now(); }
  absl::StatusOr<int> RecordFindings();
  absl::StatusOr<std::vector<Claimed>> ClaimDue();
  // Runs one claimed action; true when it reached a final status.
  absl::StatusOr<bool> Act(const Claimed& row);
  absl::Status Finish(const Claimed& row, const std::string& status, const std::string& outcome,
                      const std::string& command);
  absl::Status Hold(const Claimed& row, absl::Time until, const std::string& note, bool attempted);
  absl::StatusOr<std::string> DrainWithLimits(const Claimed& row, const std::string& reason,
                                              bool* held, std::string* note);

  platform::PgPool* pg_;
  PolicyActuator* actuator_;
  PolicyStageOptions options_;
  platform::Logger logger_;

  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool woken_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace goodput::alerting
