// goodput.v1.ReportService, served by goodput-alerting: the gRPC face of the job-end reports
// that job_reporter.h assembles and report_store.h keeps. Reads only: a report is written by
// the reporter when the job's evaluation reaches its end and revised by it when late data
// changes it. A report's admin_comment_status is read from its outbox row when it is read.
#pragma once

#include "goodput/v1/report.grpc.pb.h"
#include "services/alerting/report_store.h"

namespace goodput::alerting {

class ReportServiceImpl final : public v1::ReportService::CallbackService {
 public:
  // The store must outlive the service.
  explicit ReportServiceImpl(ReportStore* store) : store_(store) {}

  grpc::ServerUnaryReactor* GetJobReport(grpc::CallbackServerContext* context,
                                         const v1::GetJobReportRequest* request,
                                         v1::GetJobReportResponse* response) override;
  grpc::ServerUnaryReactor* ListJobReports(grpc::CallbackServerContext* context,
                                           const v1::ListJobReportsRequest* request,
                                           v1::ListJobReportsResponse* response) override;

  // The logic behind the RPCs, callable without gRPC.
  absl::Status DoGetJobReport(const v1::GetJobReportRequest& request,
                              v1::GetJobReportResponse* response);
  absl::Status DoListJobReports(const v1::ListJobReportsRequest& request,
                                v1::ListJobReportsResponse* response);

 private:
  ReportStore* store_;
};

}  // namespace goodput::alerting
