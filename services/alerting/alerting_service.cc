#include "services/alerting/alerting_service.h"

#include "services/platform/unimplemented.h"

namespace goodput::alerting {
namespace {
constexpr char kWork[] =
    "Alerting service: detect, decide, and deliver to Slurm, Osmo, Alertmanager and webhooks";
}  // namespace

grpc::ServerUnaryReactor* AlertServiceImpl::ListAlerts(grpc::CallbackServerContext* context,
                                                       const v1::ListAlertsRequest* /*request*/,
                                                       v1::ListAlertsResponse* /*response*/) {
  return platform::FinishUnimplemented(context, "/goodput.v1.AlertService/ListAlerts", kWork);
}

grpc::ServerUnaryReactor* AlertServiceImpl::GetAlert(grpc::CallbackServerContext* context,
                                                     const v1::GetAlertRequest* /*request*/,
                                                     v1::GetAlertResponse* /*response*/) {
  return platform::FinishUnimplemented(context, "/goodput.v1.AlertService/GetAlert", kWork);
}

grpc::ServerUnaryReactor* AlertServiceImpl::AckAlert(grpc::CallbackServerContext* context,
                                                     const v1::AckAlertRequest* /*request*/,
                                                     v1::AckAlertResponse* /*response*/) {
  return platform::FinishUnimplemented(context, "/goodput.v1.AlertService/AckAlert", kWork);
}

grpc::ServerUnaryReactor* AlertServiceImpl::CreateSilence(
    grpc::CallbackServerContext* context, const v1::CreateSilenceRequest* /*request*/,
    v1::CreateSilenceResponse* /*response*/) {
  return platform::FinishUnimplemented(context, "/goodput.v1.AlertService/CreateSilence", kWork);
}

grpc::ServerUnaryReactor* AlertServiceImpl::DeleteSilence(
    grpc::CallbackServerContext* context, const v1::DeleteSilenceRequest* /*request*/,
    v1::DeleteSilenceResponse* /*response*/) {
  return platform::FinishUnimplemented(context, "/goodput.v1.AlertService/DeleteSilence", kWork);
}

grpc::ServerUnaryReactor* AlertServiceImpl::ListSilences(grpc::CallbackServerContext* context,
                                                         const v1::ListSilencesRequest* /*request*/,
                                                         v1::ListSilencesResponse* /*response*/) {
  return platform::FinishUnimplemented(context, "/goodput.v1.AlertService/ListSilences", kWork);
}

grpc::ServerWriteReactor<v1::SubscribeAlertsResponse>* AlertServiceImpl::SubscribeAlerts(
    grpc::CallbackServerContext* /*context*/, const v1::SubscribeAlertsRequest* /*request*/) {
  return platform::UnimplementedWriter<v1::SubscribeAlertsResponse>(
      "/goodput.v1.AlertService/SubscribeAlerts", kWork);
}

grpc::ServerUnaryReactor* AlertServiceImpl::PushWindows(grpc::CallbackServerContext* context,
                                                        const v1::PushWindowsRequest* /*request*/,
                                                        v1::PushWindowsResponse* /*response*/) {
  return platform::FinishUnimplemented(context, "/goodput.v1.AlertService/PushWindows", kWork);
}

grpc::ServerUnaryReactor* AlertServiceImpl::PushDivergenceEvents(
    grpc::CallbackServerContext* context, const v1::PushDivergenceEventsRequest* /*request*/,
    v1::PushDivergenceEventsResponse* /*response*/) {
  return platform::FinishUnimplemented(context, "/goodput.v1.AlertService/PushDivergenceEvents",
                                       kWork);
}

}  // namespace goodput::alerting
