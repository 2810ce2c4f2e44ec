#include "services/alerting/alert_hub.h"

#include "absl/strings/str_cat.h"
#include "services/alerting/alert_proto.h"
#include "services/api/api_convert.h"

namespace goodput::alerting {
namespace {
int64_t TsMs(const google::protobuf::Timestamp& t) { return api::TimestampToUnixMs(t); }
}  // namespace

bool AlertFilter::Matches(const v1::Alert& a) const {
  if (!states.empty() && states.count(a.state()) == 0) return false;
  if (!kinds.empty() && kinds.count(a.kind()) == 0) return false;
  if (min_severity != v1::SEVERITY_UNSPECIFIED && a.severity() < min_severity) return false;
  if (!cluster.empty() && a.job().cluster() != cluster) return false;
  if (!job_id.empty() && (a.job().cluster() != job_cluster || a.job().job_id() != job_id))
    return false;
  if (active_from_ms && a.has_end_time() && TsMs(a.end_time()) < *active_from_ms) return false;
  if (active_to_ms && TsMs(a.start_time()) >= *active_to_ms) return false;
  return MatchesAll(matchers, LabelsOf(a));
}

namespace {
template <class Request>
absl::Status CommonFilter(const Request& r, AlertFilter& f) {
  for (int k : r.kinds()) {
    if (!KindFromProto(static_cast<v1::AlertKind>(k))) {
      return absl::InvalidArgumentError(absl::StrCat("kinds: ", k, " is not an alert kind"));
    }
    f.kinds.insert(static_cast<v1::AlertKind>(k));
  }
  f.min_severity = r.min_severity();
  f.cluster = r.cluster();
  if (r.has_job()) {
    if (r.job().cluster().empty() || r.job().job_id().empty()) {
      return absl::InvalidArgumentError("job: cluster and job_id are both required");
    }
    f.job_cluster = r.job().cluster();
    f.job_id = r.job().job_id();
  }
  absl::StatusOr<std::vector<Matcher>> m = MatchersFromProto(r.matchers(), "matchers");
  if (!m.ok()) return m.status();
  f.matchers = *std::move(m);
  return absl::OkStatus();
}
}  // namespace

absl::StatusOr<AlertFilter> FilterFromRequest(const v1::ListAlertsRequest& r) {
  AlertFilter f;
  for (int s : r.states()) {
    if (s < 1 || s > 4)
      return absl::InvalidArgumentError(absl::StrCat("states: ", s, " is not an alert state"));
    f.states.insert(static_cast<v1::AlertState>(s));
  }
  if (absl::Status s = CommonFilter(r, f); !s.ok()) return s;
  if (r.has_active_in()) {
    if (r.active_in().has_start_time()) f.active_from_ms = TsMs(r.active_in().start_time());
    if (r.active_in().has_end_time()) f.active_to_ms = TsMs(r.active_in().end_time());
  }
  return f;
}

absl::StatusOr<AlertFilter> FilterFromRequest(const v1::SubscribeAlertsRequest& r) {
  AlertFilter f;
  if (absl::Status s = CommonFilter(r, f); !s.ok()) return s;
  return f;
}

int64_t AlertHub::Subscribe(AlertFilter filter, Sink sink) {
  absl::MutexLock lock(&mu_);
  const int64_t id = next_id_++;
  subscribers_.emplace(id, Subscriber{std::move(filter), std::move(sink)});
  return id;
}

void AlertHub::Unsubscribe(int64_t id) {
  absl::MutexLock lock(&mu_);
  subscribers_.erase(id);
}

void AlertHub::Publish(const v1::SubscribeAlertsResponse& change) {
  absl::MutexLock lock(&mu_);
  for (auto& [id, s] : subscribers_) {
    if (s.filter.Matches(change.alert())) s.sink(change);
  }
}

}  // namespace goodput::alerting
