// goodput.v1.ReportService: the gRPC face of the job-end reports that job_reporter.h
// assembles and report_store.h keeps. Reads only: a report is written by the reporter when
// the job ends and revised by it when late data changes it.
#pragma once

#include "goodput/v1/report.grpc.pb.h"
#include "services/ofu/ofu_store.h"
#include "services/ofu/report_store.h"

namespace goodput::ofu {

class ReportServiceImpl final : public v1::ReportService::CallbackService {
 public:
  // Both stores must outlive the service.
  ReportServiceImpl(OfuStore* ofu_store, ReportStore* store)
      : ofu_store_(ofu_store), store_(store) {}

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
  OfuStore* ofu_store_;
  ReportStore* store_;
};

}  // namespace goodput::ofu
