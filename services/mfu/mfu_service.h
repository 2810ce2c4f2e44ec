// goodput.v1.MfuService: the gRPC face of goodput-mfu. Every RPC answers UNIMPLEMENTED
// naming the work that builds it until that work lands; the binary already serves health,
// reflection, metrics and auth so that deployments and clients can be wired up now.
#pragma once

#include "goodput/v1/mfu.grpc.pb.h"

namespace goodput::mfu {

namespace v1 = ::goodput::v1;

class MfuServiceImpl final : public v1::MfuService::CallbackService {
 public:
  grpc::ServerUnaryReactor* ReportMfu(grpc::CallbackServerContext* context,
                                      const v1::ReportMfuRequest* request,
                                      v1::ReportMfuResponse* response) override;
  grpc::ServerReadReactor<v1::StreamMfuReportsRequest>* StreamMfuReports(
      grpc::CallbackServerContext* context, v1::StreamMfuReportsResponse* response) override;
  grpc::ServerUnaryReactor* ListMfuReports(grpc::CallbackServerContext* context,
                                           const v1::ListMfuReportsRequest* request,
                                           v1::ListMfuReportsResponse* response) override;
  grpc::ServerUnaryReactor* GetReconciliation(grpc::CallbackServerContext* context,
                                              const v1::GetReconciliationRequest* request,
                                              v1::GetReconciliationResponse* response) override;
  grpc::ServerUnaryReactor* GetFleetReport(grpc::CallbackServerContext* context,
                                           const v1::GetFleetReportRequest* request,
                                           v1::GetFleetReportResponse* response) override;
  grpc::ServerUnaryReactor* PushOfuWindows(grpc::CallbackServerContext* context,
                                           const v1::PushOfuWindowsRequest* request,
                                           v1::PushOfuWindowsResponse* response) override;
};

}  // namespace goodput::mfu
