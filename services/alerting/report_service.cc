#include "services/alerting/report_service.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "services/api/api_convert.h"
#include "services/platform/grpc_reactors.h"
#include "services/platform/scope.h"

namespace goodput::alerting {

absl::Status ReportServiceImpl::DoGetJobReport(const v1::GetJobReportRequest& request,
                                               v1::GetJobReportResponse* response) {
  const v1::JobKey& key = request.job();
  if (key.cluster().empty() || key.job_id().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "job: cluster=\"", key.cluster(), "\" and job_id=\"", key.job_id(), "\" must both be set"));
  }
  absl::StatusOr<ReportJobRow> job = store_->FindJob(key.cluster(), key.job_id());
  if (!job.ok()) return job.status();
  absl::StatusOr<StoredReport> stored = store_->Load(job->id);
  if (absl::IsNotFound(stored.status())) {
    return absl::NotFoundError(absl::StrCat("job cluster=\"", key.cluster(), "\" job_id=\"",
                                            key.job_id(), "\" has no report yet (",
                                            job->ended ? "it ended; its report is being assembled"
                                                       : "reports are written when a job ends",
                                            ")"));
  }
  if (!stored.ok()) return stored.status();
  *response->mutable_report() = std::move(stored->report);
  return absl::OkStatus();
}

absl::Status ReportServiceImpl::DoListJobReports(const v1::ListJobReportsRequest& request,
                                                 v1::ListJobReportsResponse* response) {
  if (!request.ended_in().has_start_time() || !request.ended_in().has_end_time()) {
    return absl::InvalidArgumentError("ended_in: start_time and end_time are both required");
  }
  if (request.page_size() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_size=", request.page_size(), " is negative"));
  }
  ReportListQuery query{.from_ms = api::TimestampToUnixMs(request.ended_in().start_time()),
                        .to_ms = api::TimestampToUnixMs(request.ended_in().end_time()),
                        .cluster = request.cluster(),
                        .user = request.user(),
                        .team = request.team(),
                        .limit = request.page_size() == 0 ? 100
                                                          : std::min(request.page_size(), 1000)};
  if (!request.page_token().empty()) {
    // "<wasted GPU-hours>|<job row>" of the last summary of the previous page.
    std::vector<std::string> parts = absl::StrSplit(request.page_token(), '|');
    ReportCursor cursor;
    if (parts.size() != 2 || !absl::SimpleAtod(parts[0], &cursor.wasted_gpu_hours) ||
        !absl::SimpleAtoi(parts[1], &cursor.job_row)) {
      return absl::InvalidArgumentError(
          absl::StrCat("page_token=\"", request.page_token(), "\" is not a token of this list"));
    }
    query.after = cursor;
  }
  absl::StatusOr<ReportPage> page = store_->List(query);
  if (!page.ok()) return page.status();
  for (v1::ReportSummary& s : page->summaries) *response->add_reports() = std::move(s);
  if (page->next) {
    response->set_next_page_token(
        absl::StrFormat("%.17g|%d", page->next->wasted_gpu_hours, page->next->job_row));
  }
  response->set_pending_reports(static_cast<int32_t>(page->pending_reports));
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* ReportServiceImpl::GetJobReport(grpc::CallbackServerContext* context,
                                                          const v1::GetJobReportRequest* request,
                                                          v1::GetJobReportResponse* response) {
  if (absl::Status s = platform::CallScope::Of(context).CheckJob(request->job().cluster(),
                                                                 request->job().job_id());
      !s.ok()) {
    return platform::FinishUnary(context, s);
  }
  return platform::FinishUnary(context, DoGetJobReport(*request, response));
}

grpc::ServerUnaryReactor* ReportServiceImpl::ListJobReports(
    grpc::CallbackServerContext* context, const v1::ListJobReportsRequest* request,
    v1::ListJobReportsResponse* response) {
  v1::ListJobReportsRequest scoped = *request;
  if (absl::Status s = platform::CallScope::Of(context).NarrowFilters(
          "ListJobReports", scoped.mutable_cluster(), scoped.mutable_user(), scoped.mutable_team());
      !s.ok()) {
    return platform::FinishUnary(context, s);
  }
  return platform::FinishUnary(context, DoListJobReports(scoped, response));
}

}  // namespace goodput::alerting
