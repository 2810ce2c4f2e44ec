#include "services/alerting/alert_lifecycle.h"

#include <map>
#include <utility>

namespace goodput::alerting {

std::vector<Decision> DecideLifecycle(const std::string& cluster, const std::string& job_id,
                                      const LifecycleInput& input,
                                      const std::vector<OpenAlertRef>& open) {
  std::map<std::string, const OpenAlertRef*> open_by_fp;
  for (const OpenAlertRef& a : open) open_by_fp.emplace(a.fingerprint, &a);
  std::set<std::string> decided;  // open alerts that got a decision
  std::vector<Decision> out;

  // Ended conditions first, in the order they ended: a condition that ended and started
  // again inside the evaluated windows resolves its alert before the new one opens.
  for (const Finding& f : input.ended) {
    if (input.kinds.count(f.kind) == 0) continue;
    Decision d;
    d.fingerprint = Fingerprint(f.kind, cluster, job_id, f.detail);
    d.finding = f;
    auto it = open_by_fp.find(d.fingerprint);
    if (it != open_by_fp.end()) {
      d.action = Decision::Action::kResolve;
      d.alert_id = it->second->id;
      decided.insert(d.fingerprint);
      open_by_fp.erase(it);
    } else {
      d.action = Decision::Action::kRecordResolved;
      d.found_after_job_end = !input.job_active;
    }
    out.push_back(std::move(d));
  }
  for (const Finding& f : input.holding) {
    if (input.kinds.count(f.kind) == 0) continue;
    Decision d;
    d.fingerprint = Fingerprint(f.kind, cluster, job_id, f.detail);
    d.finding = f;
    auto it = open_by_fp.find(d.fingerprint);
    if (it != open_by_fp.end()) {
      d.alert_id = it->second->id;
      // The job ended: its alerts resolve with the condition as last seen.
      d.action = input.job_active ? Decision::Action::kUpdate : Decision::Action::kResolve;
      decided.insert(d.fingerprint);
      open_by_fp.erase(it);
    } else if (input.job_active) {
      d.action = Decision::Action::kOpen;
    } else {
      d.action = Decision::Action::kRecordResolved;
      d.found_after_job_end = true;
    }
    out.push_back(std::move(d));
  }
  for (const OpenAlertRef& a : open) {
    if (decided.count(a.fingerprint) > 0 || !a.kind || input.kinds.count(*a.kind) == 0) continue;
    if (open_by_fp.count(a.fingerprint) == 0) continue;
    Decision d;
    d.action = Decision::Action::kResolve;
    d.fingerprint = a.fingerprint;
    d.alert_id = a.id;
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace goodput::alerting
