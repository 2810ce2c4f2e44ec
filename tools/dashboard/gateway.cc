#include "tools/dashboard/gateway.h"

#include <algorithm>
#include <chrono>
#include <iterator>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/blocking_counter.h"
#include "services/api/api_convert.h"
#include "services/platform/status_convert.h"

namespace goodput::dashboard {
namespace {

void SetTime(absl::Time t, google::protobuf::Timestamp* out) {
  *out = api::UnixMsToTimestamp(absl::ToUnixMillis(t));
}

std::string KeyOf(const v1::JobKey& key) { return absl::StrCat(key.cluster(), "\n", key.job_id()); }

// The open states an alert list on the pages shows.
void AddOpenStates(v1::ListAlertsRequest* request) {
  request->add_states(v1::ALERT_STATE_FIRING);
  request->add_states(v1::ALERT_STATE_ACKNOWLEDGED);
  request->add_states(v1::ALERT_STATE_SILENCED);
}

}  // namespace

Gateway::Gateway(Backends backends, GatewayOptions options)
    : options_(std::move(options)),
      jobs_(v1::JobService::NewStub(backends.ingest)),
      ofu_(v1::OfuService::NewStub(backends.ofu)),
      mfu_(v1::MfuService::NewStub(backends.mfu)),
      alerts_(v1::AlertService::NewStub(backends.alerting)),
      reports_(v1::ReportService::NewStub(backends.alerting)) {}

std::unique_ptr<grpc::ClientContext> Gateway::Context() const {
  auto ctx = StreamContext();
  ctx->set_deadline(std::chrono::system_clock::now() +
                    absl::ToChronoMilliseconds(options_.rpc_timeout));
  return ctx;
}

std::unique_ptr<grpc::ClientContext> Gateway::StreamContext() const {
  auto ctx = std::make_unique<grpc::ClientContext>();
  if (!options_.token.empty()) ctx->AddMetadata("authorization", "Bearer " + options_.token);
  return ctx;
}

grpc::Status Gateway::FleetTotal(absl::Time start, absl::Time end, v1::FleetGroup* total) {
  v1::GetFleetSummaryRequest request;
  SetTime(start, request.mutable_time_range()->mutable_start_time());
  SetTime(end, request.mutable_time_range()->mutable_end_time());
  v1::GetFleetSummaryResponse response;
  grpc::Status status = ofu_->GetFleetSummary(Context().get(), request, &response);
  if (status.ok()) *total = response.total();
  return status;
}

Json Gateway::Fleet(const FleetQuery& query) {
  constexpr v1::FleetGroupBy kGroupings[] = {v1::FLEET_GROUP_BY_CLUSTER,
                                             v1::FLEET_GROUP_BY_GPU_MODEL, v1::FLEET_GROUP_BY_USER,
                                             v1::FLEET_GROUP_BY_TEAM};
  constexpr size_t kAsks = std::size(kGroupings);
  // The four summaries at once: the page waits for the slowest, not for their sum.
  v1::GetFleetSummaryRequest requests[kAsks];
  v1::GetFleetSummaryResponse responses[kAsks];
  grpc::Status statuses[kAsks];
  std::unique_ptr<grpc::ClientContext> contexts[kAsks];
  absl::BlockingCounter done(kAsks);
  for (size_t i = 0; i < kAsks; ++i) {
    v1::GetFleetSummaryRequest& request = requests[i];
    SetTime(query.start, request.mutable_time_range()->mutable_start_time());
    SetTime(query.end, request.mutable_time_range()->mutable_end_time());
    request.add_group_by(kGroupings[i]);
    request.set_cluster(query.cluster);
    request.set_user(query.user);
    request.set_team(query.team);
    request.set_gpu_model(query.gpu_model);
    contexts[i] = Context();
    ofu_->async()->GetFleetSummary(contexts[i].get(), &request, &responses[i],
                                   [&statuses, &done, i](grpc::Status s) {
                                     statuses[i] = std::move(s);
                                     done.DecrementCount();
                                   });
  }
  done.Wait();
  grpc::Status status;
  for (const grpc::Status& s : statuses) {
    if (!s.ok()) {
      status = s;
      break;
    }
  }
  const v1::GetFleetSummaryResponse &by_cluster = responses[0], &by_model = responses[1],
                                    &by_user = responses[2], &by_team = responses[3];
  Json out = status.ok() ? Json{{"available", true}} : UnavailableSection(status);
  out["start_ms"] = absl::ToUnixMillis(query.start);
  out["end_ms"] = absl::ToUnixMillis(query.end);
  out["filters"] = Json{{"cluster", query.cluster},
                        {"user", query.user},
                        {"team", query.team},
                        {"gpu_model", query.gpu_model}};
  out["low_efficiency_ofu_threshold"] = by_cluster.low_efficiency_ofu_threshold();
  out["by_cluster"] = Json::array();
  out["by_gpu_model"] = Json::array();
  out["by_user"] = Json::array();
  out["by_team"] = Json::array();
  if (!status.ok()) return out;
  out["total"] = FleetGroupJson(by_cluster.total());
  for (const v1::FleetGroup& g : by_cluster.groups())
    out["by_cluster"].push_back(FleetGroupJson(g));
  for (const v1::FleetGroup& g : by_model.groups())
    out["by_gpu_model"].push_back(FleetGroupJson(g));
  // People and teams most wasted first: whom to talk to.
  for (auto [response, key] : {std::pair{&by_user, "by_user"}, std::pair{&by_team, "by_team"}}) {
    std::vector<v1::FleetGroup> groups(response->groups().begin(), response->groups().end());
    std::stable_sort(groups.begin(), groups.end(),
                     [](const v1::FleetGroup& a, const v1::FleetGroup& b) {
                       return a.wasted_gpu_hours() > b.wasted_gpu_hours();
                     });
    for (const v1::FleetGroup& g : groups) out[key].push_back(FleetGroupJson(g));
  }
  return out;
}

absl::StatusOr<Json> Gateway::Jobs(const JobsQuery& query) {
  v1::ListJobsRequest request;
  request.set_cluster(query.cluster);
  request.set_user(query.user);
  request.set_team(query.team);
  request.set_gpu_model(query.gpu_model);
  if (query.active_from != absl::Time()) {
    SetTime(query.active_from, request.mutable_active_in()->mutable_start_time());
  }
  if (query.active_to != absl::Time()) {
    SetTime(query.active_to, request.mutable_active_in()->mutable_end_time());
  }
  request.set_page_size(std::clamp(query.limit, 1, 1000));
  v1::ListJobsResponse listed;
  grpc::Status status = jobs_->ListJobs(Context().get(), request, &listed);
  if (!status.ok()) return platform::FromGrpcStatus(status);

  Json out{{"next_page_token", listed.next_page_token()}, {"ofu", {{"available", true}}}};
  Json rows = Json::array();
  std::map<std::string, size_t> index;
  for (const v1::Job& job : listed.jobs()) {
    index[KeyOf(job.key())] = rows.size();
    rows.push_back(JobRowJson(job));
  }

  // Whole-job figures, one call per job (a page holds at most `limit` jobs).
  grpc::Status ofu_status;
  for (const v1::Job& job : listed.jobs()) {
    v1::GetJobSummaryRequest summary_request;
    *summary_request.mutable_job() = job.key();
    v1::GetJobSummaryResponse summary;
    grpc::Status s = ofu_->GetJobSummary(Context().get(), summary_request, &summary);
    if (s.error_code() == grpc::StatusCode::NOT_FOUND) continue;  // no windows yet
    if (!s.ok()) {
      ofu_status = s;
      break;
    }
    Json& row = rows[index[KeyOf(job.key())]];
    const v1::JobOfuSummary& sum = summary.summary();
    row["ofu"] = sum.ofu();
    if (sum.has_steady_state_ofu()) row["steady_state_ofu"] = sum.steady_state_ofu();
    row["gpu_hours"] = sum.gpu_hours();
    row["wasted_gpu_hours"] = std::max(0.0, sum.gpu_hours() - sum.effective_gpu_hours());
  }
  if (ofu_status.ok() && listed.jobs_size() > 0) {
    v1::GetLatestOfuRequest latest_request;
    for (const v1::Job& job : listed.jobs()) *latest_request.add_jobs() = job.key();
    v1::GetLatestOfuResponse latest;
    ofu_status = ofu_->GetLatestOfu(Context().get(), latest_request, &latest);
    for (const v1::LatestOfu& l : latest.jobs()) {
      auto it = index.find(KeyOf(l.job()));
      if (it != index.end() && l.has_window()) rows[it->second]["latest_ofu"] = l.window().ofu();
    }
  }
  if (!ofu_status.ok()) out["ofu"] = UnavailableSection(ofu_status);

  // Open alerts per job, from one listing.
  v1::ListAlertsRequest alert_request;
  AddOpenStates(&alert_request);
  alert_request.set_cluster(query.cluster);
  alert_request.set_page_size(1000);
  v1::ListAlertsResponse alerts;
  status = alerts_->ListAlerts(Context().get(), alert_request, &alerts);
  if (status.ok()) {
    out["alerts"] = Json{{"available", true}};
    for (Json& row : rows) row["open_alerts"] = 0;
    for (const v1::Alert& a : alerts.alerts()) {
      auto it = index.find(KeyOf(a.job()));
      if (it != index.end())
        rows[it->second]["open_alerts"] = rows[it->second]["open_alerts"].get<int>() + 1;
    }
  } else {
    out["alerts"] = UnavailableSection(status);
  }
  out["jobs"] = std::move(rows);
  return out;
}

absl::StatusOr<Json> Gateway::Job(const std::string& cluster, const std::string& job_id) {
  v1::JobKey key;
  key.set_cluster(cluster);
  key.set_job_id(job_id);
  v1::GetJobRequest job_request;
  *job_request.mutable_key() = key;
  v1::GetJobResponse job;
  grpc::Status status = jobs_->GetJob(Context().get(), job_request, &job);
  if (!status.ok()) return platform::FromGrpcStatus(status);
  Json out{{"job", JobRowJson(job.job())}};

  v1::GetJobSummaryRequest summary_request;
  *summary_request.mutable_job() = key;
  v1::GetJobSummaryResponse summary;
  status = ofu_->GetJobSummary(Context().get(), summary_request, &summary);
  out["summary"] = status.ok() ? JobSummaryJson(summary.summary()) : UnavailableSection(status);

  // Downsample long jobs to about max_points windows (the service rounds the resolution up
  // to a multiple of its native window).
  int resolution_s = 0;
  if (status.ok() && summary.summary().has_time_range()) {
    const v1::TimeRange& range = summary.summary().time_range();
    int64_t span_s = range.end_time().seconds() - range.start_time().seconds();
    if (span_s > 0) resolution_s = static_cast<int>(span_s / std::max(1, options_.max_points));
  }
  v1::GetJobOfuResponse ofu;
  v1::GetJobOfuRequest ofu_request;
  *ofu_request.mutable_job() = key;
  ofu_request.set_resolution_s(resolution_s);
  ofu_request.set_include_per_gpu(true);
  ofu_request.set_page_size(1000);
  for (int page = 0; page < 20; ++page) {
    v1::GetJobOfuResponse part;
    status = ofu_->GetJobOfu(Context().get(), ofu_request, &part);
    if (!status.ok()) break;
    ofu.set_effective_window_s(part.effective_window_s());
    for (auto& w : *part.mutable_windows()) *ofu.add_windows() = std::move(w);
    for (auto& w : *part.mutable_gpu_windows()) *ofu.add_gpu_windows() = std::move(w);
    if (part.next_page_token().empty()) break;
    ofu_request.set_page_token(part.next_page_token());
  }
  out["ofu"] = status.ok() ? JobOfuJson(ofu) : UnavailableSection(status);

  v1::GetReconciliationRequest rec_request;
  *rec_request.mutable_job() = key;
  rec_request.set_resolution_s(ofu.effective_window_s() > 60 ? ofu.effective_window_s() : 0);
  v1::GetReconciliationResponse rec;
  status = mfu_->GetReconciliation(Context().get(), rec_request, &rec);
  out["reconciliation"] = status.ok() ? ReconciliationJson(rec) : UnavailableSection(status);

  v1::ListAlertsRequest alert_request;
  *alert_request.mutable_job() = key;
  alert_request.set_page_size(100);
  v1::ListAlertsResponse alerts;
  status = alerts_->ListAlerts(Context().get(), alert_request, &alerts);
  if (status.ok()) {
    Json items = Json::array();
    for (const v1::Alert& a : alerts.alerts()) items.push_back(AlertJson(a));
    out["alerts"] = Json{{"available", true}, {"items", std::move(items)}};
  } else {
    out["alerts"] = UnavailableSection(status);
    out["alerts"]["items"] = Json::array();
  }

  v1::GetJobReportRequest report_request;
  *report_request.mutable_job() = key;
  v1::GetJobReportResponse report;
  status = reports_->GetJobReport(Context().get(), report_request, &report);
  out["report"] = status.ok() ? JobReportJson(report.report()) : UnavailableSection(status);
  return out;
}

Json Gateway::Alerts(const std::string& cluster, absl::Time start, absl::Time end) {
  v1::ListAlertsRequest request;
  request.set_cluster(cluster);
  SetTime(start, request.mutable_active_in()->mutable_start_time());
  SetTime(end, request.mutable_active_in()->mutable_end_time());
  request.set_page_size(100);
  v1::ListAlertsResponse response;
  grpc::Status status = alerts_->ListAlerts(Context().get(), request, &response);
  if (!status.ok()) {
    Json out = UnavailableSection(status);
    out["items"] = Json::array();
    return out;
  }
  Json items = Json::array();
  for (const v1::Alert& a : response.alerts()) items.push_back(AlertJson(a));
  return Json{{"available", true}, {"items", std::move(items)}};
}

}  // namespace goodput::dashboard
