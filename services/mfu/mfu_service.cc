#include "services/mfu/mfu_service.h"

#include "services/platform/unimplemented.h"

namespace goodput::mfu {
namespace {
constexpr char kWork[] =
    "MFU service and SDK: what frameworks say, checked against what the hardware did";
}  // namespace

grpc::ServerUnaryReactor* MfuServiceImpl::ReportMfu(grpc::CallbackServerContext* context,
                                                    const v1::ReportMfuRequest* /*request*/,
                                                    v1::ReportMfuResponse* /*response*/) {
  return platform::FinishUnimplemented(context, "/goodput.v1.MfuService/ReportMfu", kWork);
}

grpc::ServerReadReactor<v1::StreamMfuReportsRequest>* MfuServiceImpl::StreamMfuReports(
    grpc::CallbackServerContext* /*context*/, v1::StreamMfuReportsResponse* /*response*/) {
  return platform::UnimplementedReader<v1::StreamMfuReportsRequest>(
      "/goodput.v1.MfuService/StreamMfuReports", kWork);
}

grpc::ServerUnaryReactor* MfuServiceImpl::ListMfuReports(
    grpc::CallbackServerContext* context, const v1::ListMfuReportsRequest* /*request*/,
    v1::ListMfuReportsResponse* /*response*/) {
  return platform::FinishUnimplemented(context, "/goodput.v1.MfuService/ListMfuReports", kWork);
}

grpc::ServerUnaryReactor* MfuServiceImpl::GetReconciliation(
    grpc::CallbackServerContext* context, const v1::GetReconciliationRequest* /*request*/,
    v1::GetReconciliationResponse* /*response*/) {
  return platform::FinishUnimplemented(context, "/goodput.v1.MfuService/GetReconciliation", kWork);
}

grpc::ServerUnaryReactor* MfuServiceImpl::GetFleetReport(
    grpc::CallbackServerContext* context, const v1::GetFleetReportRequest* /*request*/,
    v1::GetFleetReportResponse* /*response*/) {
  return platform::FinishUnimplemented(context, "/goodput.v1.MfuService/GetFleetReport", kWork);
}

grpc::ServerUnaryReactor* MfuServiceImpl::PushOfuWindows(
    grpc::CallbackServerContext* context, const v1::PushOfuWindowsRequest* /*request*/,
    v1::PushOfuWindowsResponse* /*response*/) {
  return platform::FinishUnimplemented(context, "/goodput.v1.MfuService/PushOfuWindows", kWork);
}

}  // namespace goodput::mfu
