// The alert lifecycle as a function: from what one evaluation of a job found (the conditions
// that hold now, the conditions that ended among the windows it evaluated) and the job's open
// alerts, decide what happens to each alert. No I/O; the engine applies the decisions in the
// transaction that evaluated the job.
//
// - A condition that holds in a running job opens an alert (or updates its open alert).
// - A condition that ended resolves its open alert; one that had none (it started and ended
//   inside one burst of windows, or in a backlog) is recorded as an alert already resolved.
// - Once the job has ended, nothing opens: conditions that hold are recorded as resolved, and
//   marked found after the job's end when they had no alert while it ran.
// - An open alert whose condition neither holds nor ended is resolved (the job ended, or a
//   replay with new evidence, such as a precision switch, retracted it).
//
//   std::vector<Decision> d = DecideLifecycle(cluster, job_id, input, open_alerts);
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "services/alerting/alert_rules.h"
#include "services/alerting/job_detectors.h"

namespace goodput::alerting {

// An alert that is not resolved, as the lifecycle sees it.
struct OpenAlertRef {
  int64_t id = 0;
  std::string fingerprint = {};
  std::optional<Kind> kind = {};
};

struct LifecycleInput {
  bool job_active = true;             // the job has not ended
  std::set<Kind> kinds = {};          // kinds this evaluation decides; others are untouched
  std::vector<Finding> holding = {};  // conditions that hold now
  std::vector<Finding> ended = {};    // conditions that ended, in the order they ended
};

struct Decision {
  enum class Action {
    kOpen,            // a new alert for `finding`
    kUpdate,          // alert `alert_id` with the latest `finding`
    kResolve,         // alert `alert_id`; `finding` is the condition as it ended, when known
    kRecordResolved,  // a new alert for `finding`, already resolved
  };
  Action action = Action::kOpen;
  std::string fingerprint = {};
  int64_t alert_id = 0;
  std::optional<Finding> finding = {};
  bool found_after_job_end = false;  // kRecordResolved: confirmed after the job had ended
};

std::vector<Decision> DecideLifecycle(const std::string& cluster, const std::string& job_id,
                                      const LifecycleInput& input,
                                      const std::vector<OpenAlertRef>& open);

}  // namespace goodput::alerting
