// goodput.v1.AlertService: the gRPC face of goodput-alerting. Each RPC validates, calls the
// AlertEngine (alert_engine.h) and converts its status; SubscribeAlerts streams the engine's
// AlertHub, optionally preceded by the open alerts.
#pragma once

#include "goodput/v1/alert.grpc.pb.h"
#include "services/alerting/alert_engine.h"
#include "services/alerting/policy_stage.h"

namespace goodput::alerting {

namespace v1 = ::goodput::v1;

class AlertServiceImpl final : public v1::AlertService::CallbackService {
 public:
  // Both must outlive the service.
  AlertServiceImpl(AlertEngine* engine, AlertHub* hub) : engine_(engine), hub_(hub) {}
  // The policy stage's audit log (List/Get/UndoPolicyAction); without it those RPCs answer
  // FAILED_PRECONDITION. Set before serving; must outlive the service.
  void SetPolicyStage(PolicyStage* policies) { policies_ = policies; }

  grpc::ServerUnaryReactor* ListAlerts(grpc::CallbackServerContext* context,
                                       const v1::ListAlertsRequest* request,
                                       v1::ListAlertsResponse* response) override;
  grpc::ServerUnaryReactor* GetAlert(grpc::CallbackServerContext* context,
                                     const v1::GetAlertRequest* request,
                                     v1::GetAlertResponse* response) override;
  grpc::ServerUnaryReactor* AckAlert(grpc::CallbackServerContext* context,
                                     const v1::AckAlertRequest* request,
                                     v1::AckAlertResponse* response) override;
  grpc::ServerUnaryReactor* CreateSilence(grpc::CallbackServerContext* context,
                                          const v1::CreateSilenceRequest* request,
                                          v1::CreateSilenceResponse* response) override;
  grpc::ServerUnaryReactor* DeleteSilence(grpc::CallbackServerContext* context,
                                          const v1::DeleteSilenceRequest* request,
                                          v1::DeleteSilenceResponse* response) override;
  grpc::ServerUnaryReactor* ListSilences(grpc::CallbackServerContext* context,
                                         const v1::ListSilencesRequest* request,
                                         v1::ListSilencesResponse* response) override;
  grpc::ServerWriteReactor<v1::SubscribeAlertsResponse>* SubscribeAlerts(
      grpc::CallbackServerContext* context, const v1::SubscribeAlertsRequest* request) override;
  grpc::ServerUnaryReactor* PushWindows(grpc::CallbackServerContext* context,
                                        const v1::PushWindowsRequest* request,
                                        v1::PushWindowsResponse* response) override;
  grpc::ServerUnaryReactor* PushDivergenceEvents(
      grpc::CallbackServerContext* context, const v1::PushDivergenceEventsRequest* request,
      v1::PushDivergenceEventsResponse* response) override;
  grpc::ServerUnaryReactor* ListPolicyActions(grpc::CallbackServerContext* context,
                                              const v1::ListPolicyActionsRequest* request,
                                              v1::ListPolicyActionsResponse* response) override;
  grpc::ServerUnaryReactor* GetPolicyAction(grpc::CallbackServerContext* context,
                                            const v1::GetPolicyActionRequest* request,
                                            v1::GetPolicyActionResponse* response) override;
  grpc::ServerUnaryReactor* UndoPolicyAction(grpc::CallbackServerContext* context,
                                             const v1::UndoPolicyActionRequest* request,
                                             v1::UndoPolicyActionResponse* response) override;

 private:
  AlertEngine* engine_;
  AlertHub* hub_;
  PolicyStage* policies_ = nullptr;
};

}  // namespace goodput::alerting
