#include "services/alerting/alert_lifecycle.h"

#include <map>
#include <utility>

namespace goodput::alerting {

std::vector<Decision> DecideLifecycle(const std::string& cluster, const std::string& job_id,
                                      const LifecycleInput& input,
                                      const std::vector<OpenAlertRef>& open) {
  // Open alerts not yet decided on, by fingerprint.
  std::map<std::string, const OpenAlertRef*> open_by_fp;
  for (const OpenAlertRef& a : open) open_by_fp.emplace(a.fingerprint, &a);
  std::vector<Decision> out;
  // A decision for `f`, taking its open alert (alert_id 0 when it has none).
  auto decide = [&](const Finding& f) {
    Decision d;
    d.fingerprint = Fingerprint(f.kind, cluster, job_id, f.detail);
    d.finding = f;
    if (auto it = open_by_fp.find(d.fingerprint); it != open_by_fp.end()) {
      d.alert_id = it->second->id;
      open_by_fp.erase(it);
    }
    return d;
  };

  // Ended conditions first, in the order they ended: a condition that ended and started
  // again inside the evaluated windows resolves its alert before the new one opens.
  for (const Finding& f : input.ended) {
    if (input.kinds.count(f.kind) == 0) continue;
    Decision d = decide(f);
    if (d.alert_id != 0) {
      d.action = Decision::Action::kResolve;
    } else {
      d.action = Decision::Action::kRecordResolved;
      d.found_after_job_end = !input.job_active;
    }
    out.push_back(std::move(d));
  }
  for (const Finding& f : input.holding) {
    if (input.kinds.count(f.kind) == 0) continue;
    Decision d = decide(f);
    if (d.alert_id != 0) {
      // The job ended: its alerts resolve with the condition as last seen.
      d.action = input.job_active ? Decision::Action::kUpdate : Decision::Action::kResolve;
    } else if (input.job_active) {
      d.action = Decision::Action::kOpen;
    } else {
      d.action = Decision::Action::kRecordResolved;
      d.found_after_job_end = true;
    }
    out.push_back(std::move(d));
  }
  // Open alerts whose condition neither holds nor ended.
  for (const OpenAlertRef& a : open) {
    if (!a.kind || input.kinds.count(*a.kind) == 0 || open_by_fp.count(a.fingerprint) == 0) {
      continue;
    }
    Decision d;
    d.action = Decision::Action::kResolve;
    d.fingerprint = a.fingerprint;
    d.alert_id = a.id;
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace goodput::alerting
