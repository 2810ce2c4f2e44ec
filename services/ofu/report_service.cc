#include "services/ofu/report_service.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "services/api/api_convert.h"
#include "services/platform/grpc_reactors.h"

namespace goodput::ofu {

absl::Status ReportServiceImpl::DoGetJobReport(const v1::GetJobReportRequest& request,
                                               v1::GetJobReportResponse* response) {
  const v1::JobKey& key = request.job();
  if (key.cluster().empty() || key.job_id().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "job: cluster=\"", key.cluster(), "\" and job_id=\"", key.job_id(), "\" must both be set"));
  }
  absl::StatusOr<JobRow> job = ofu_store_->FindJob(key.cluster(), key.job_id());
  if (!job.ok()) return job.status();
  absl::StatusOr<StoredReport> stored = store_->Load(job->id);
  if (absl::IsNotFound(stored.status())) {
    return absl::NotFoundError(absl::StrCat(
        "job cluster=\"", key.cluster(), "\" job_id=\"", key.job_id(), "\" has no report yet (",
        job->end_ms.has_value() ? "it ended; its report is being assembled"
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
  const int limit = request.page_size() == 0 ? 100 : std::min(request.page_size(), 1000);
  absl::StatusOr<std::vector<v1::ReportSummary>> list =
      store_->List(api::TimestampToUnixMs(request.ended_in().start_time()),
                   api::TimestampToUnixMs(request.ended_in().end_time()), request.cluster(),
                   request.user(), request.team(), limit);
  if (!list.ok()) return list.status();
  for (v1::ReportSummary& s : *list) *response->add_reports() = std::move(s);
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* ReportServiceImpl::GetJobReport(grpc::CallbackServerContext* context,
                                                          const v1::GetJobReportRequest* request,
                                                          v1::GetJobReportResponse* response) {
  return platform::FinishUnary(context, DoGetJobReport(*request, response));
}

grpc::ServerUnaryReactor* ReportServiceImpl::ListJobReports(
    grpc::CallbackServerContext* context, const v1::ListJobReportsRequest* request,
    v1::ListJobReportsResponse* response) {
  return platform::FinishUnary(context, DoListJobReports(*request, response));
}

}  // namespace goodput::ofu
