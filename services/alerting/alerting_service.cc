#include "services/alerting/alerting_service.h"

#include <functional>
#include <utility>
#include <vector>

#include "services/api/alert_checks.h"
#include "services/platform/grpc_reactors.h"
#include "services/platform/scope.h"

namespace goodput::alerting {
namespace {

using platform::FinishUnary;

template <class T, class F>
absl::Status Assign(absl::StatusOr<T> value, F&& set) {
  if (!value.ok()) return value.status();
  set(*std::move(value));
  return absl::OkStatus();
}

// One SubscribeAlerts call: queued changes written one at a time. A subscriber that cannot
// keep up loses its oldest queued changes rather than holding the engine back.
class AlertStream : public platform::QueuedStreamWriter<v1::SubscribeAlertsResponse> {
 public:
  static constexpr size_t kMaxQueued = 1000;

  // Subscribes first, then takes the snapshot, so no change falls between the two (a change
  // may show in both: subscribers see an alert at least once).
  using Snapshot = std::function<absl::StatusOr<std::vector<v1::SubscribeAlertsResponse>>()>;
  AlertStream(AlertHub* hub, AlertFilter filter, const Snapshot& snapshot)
      : QueuedStreamWriter(kMaxQueued), hub_(hub) {
    Hold();
    subscription_ = hub_->Subscribe(std::move(filter),
                                    [this](const v1::SubscribeAlertsResponse& r) { Push(r); });
    Start(snapshot ? snapshot() : std::vector<v1::SubscribeAlertsResponse>{});
  }

  void OnDone() override {
    hub_->Unsubscribe(subscription_);
    delete this;
  }

 private:
  AlertHub* hub_;
  int64_t subscription_ = 0;
};

}  // namespace

grpc::ServerUnaryReactor* AlertServiceImpl::ListAlerts(grpc::CallbackServerContext* context,
                                                       const v1::ListAlertsRequest* request,
                                                       v1::ListAlertsResponse* response) {
  if (absl::Status s = api::CheckMatchers(request->matchers(), "matchers"); !s.ok()) {
    return FinishUnary(context, s);
  }
  // A scoped token lists the alerts of its cluster, or of one of its jobs.
  v1::ListAlertsRequest scoped = *request;
  if (absl::Status s = platform::CallScope::Of(context).NarrowToJob(
          "ListAlerts", scoped.mutable_cluster(), scoped.job().cluster(), scoped.job().job_id());
      !s.ok()) {
    return FinishUnary(context, s);
  }
  return FinishUnary(context, Assign(engine_->ListAlerts(scoped),
                                     [&](v1::ListAlertsResponse r) { *response = std::move(r); }));
}

grpc::ServerUnaryReactor* AlertServiceImpl::GetAlert(grpc::CallbackServerContext* context,
                                                     const v1::GetAlertRequest* request,
                                                     v1::GetAlertResponse* response) {
  absl::StatusOr<v1::Alert> alert = engine_->GetAlert(request->alert_id());
  if (alert.ok()) {
    if (absl::Status s = platform::CallScope::Of(context).CheckJob(alert->job().cluster(),
                                                                   alert->job().job_id());
        !s.ok()) {
      return FinishUnary(context, s);
    }
  }
  return FinishUnary(context, Assign(std::move(alert), [&](v1::Alert a) {
                       *response->mutable_alert() = std::move(a);
                     }));
}

grpc::ServerUnaryReactor* AlertServiceImpl::AckAlert(grpc::CallbackServerContext* context,
                                                     const v1::AckAlertRequest* request,
                                                     v1::AckAlertResponse* response) {
  if (absl::Status s = api::CheckAckRequest(*request); !s.ok()) return FinishUnary(context, s);
  // A scoped token acknowledges the alerts of its own jobs only.
  if (const platform::CallScope scope = platform::CallScope::Of(context); scope.restricted()) {
    absl::StatusOr<v1::Alert> alert = engine_->GetAlert(request->alert_id());
    if (!alert.ok()) return FinishUnary(context, alert.status());
    if (absl::Status s = scope.CheckJob(alert->job().cluster(), alert->job().job_id()); !s.ok()) {
      return FinishUnary(context, s);
    }
  }
  return FinishUnary(context, Assign(engine_->AckAlert(*request), [&](v1::Alert a) {
                       *response->mutable_alert() = std::move(a);
                     }));
}

grpc::ServerUnaryReactor* AlertServiceImpl::CreateSilence(grpc::CallbackServerContext* context,
                                                          const v1::CreateSilenceRequest* request,
                                                          v1::CreateSilenceResponse* response) {
  if (absl::Status s = api::CheckSilence(request->silence()); !s.ok()) {
    return FinishUnary(context, s);
  }
  return FinishUnary(context,
                     Assign(engine_->CreateSilence(request->silence()),
                            [&](v1::Silence s) { *response->mutable_silence() = std::move(s); }));
}

grpc::ServerUnaryReactor* AlertServiceImpl::DeleteSilence(grpc::CallbackServerContext* context,
                                                          const v1::DeleteSilenceRequest* request,
                                                          v1::DeleteSilenceResponse* response) {
  return FinishUnary(context,
                     Assign(engine_->DeleteSilence(request->silence_id()),
                            [&](v1::Silence s) { *response->mutable_silence() = std::move(s); }));
}

grpc::ServerUnaryReactor* AlertServiceImpl::ListSilences(grpc::CallbackServerContext* context,
                                                         const v1::ListSilencesRequest* request,
                                                         v1::ListSilencesResponse* response) {
  return FinishUnary(context,
                     Assign(engine_->ListSilences(*request),
                            [&](v1::ListSilencesResponse r) { *response = std::move(r); }));
}

grpc::ServerWriteReactor<v1::SubscribeAlertsResponse>* AlertServiceImpl::SubscribeAlerts(
    grpc::CallbackServerContext* context, const v1::SubscribeAlertsRequest* request) {
  const auto failed = platform::FailedStream<v1::SubscribeAlertsResponse>;
  // A scoped token follows the alerts of its cluster, or of one of its jobs.
  v1::SubscribeAlertsRequest scoped = *request;
  if (absl::Status s = platform::CallScope::Of(context).NarrowToJob(
          "SubscribeAlerts", scoped.mutable_cluster(), scoped.job().cluster(),
          scoped.job().job_id());
      !s.ok()) {
    return failed(s);
  }
  absl::StatusOr<AlertFilter> filter = FilterFromRequest(scoped);
  if (!filter.ok()) return failed(filter.status());
  AlertStream::Snapshot snapshot;
  if (request->include_open()) {
    snapshot = [engine = engine_,
                f = *filter]() -> absl::StatusOr<std::vector<v1::SubscribeAlertsResponse>> {
      absl::StatusOr<std::vector<v1::Alert>> open = engine->OpenAlerts(f);
      if (!open.ok()) return open.status();
      std::vector<v1::SubscribeAlertsResponse> out;
      for (v1::Alert& a : *open) {
        v1::SubscribeAlertsResponse r;
        r.set_change(v1::ALERT_CHANGE_SNAPSHOT);
        *r.mutable_alert() = std::move(a);
        out.push_back(std::move(r));
      }
      return out;
    };
  }
  return new AlertStream(hub_, *std::move(filter), snapshot);
}

grpc::ServerUnaryReactor* AlertServiceImpl::PushWindows(grpc::CallbackServerContext* context,
                                                        const v1::PushWindowsRequest* request,
                                                        v1::PushWindowsResponse* response) {
  return FinishUnary(context, Assign(engine_->PushWindows(*request), [&](v1::DeliveryAck a) {
                       *response->mutable_ack() = std::move(a);
                     }));
}

grpc::ServerUnaryReactor* AlertServiceImpl::PushDivergenceEvents(
    grpc::CallbackServerContext* context, const v1::PushDivergenceEventsRequest* request,
    v1::PushDivergenceEventsResponse* response) {
  return FinishUnary(context,
                     Assign(engine_->PushDivergenceEvents(*request),
                            [&](v1::DeliveryAck a) { *response->mutable_ack() = std::move(a); }));
}

// The policy stage's audit log: operator-only and fleet-wide (kFleet), so no per-job check.
namespace {
absl::Status NoPolicies() {
  return absl::FailedPreconditionError(
      "the policy stage is not configured on this goodput-alerting (alerting.policies)");
}
}  // namespace

grpc::ServerUnaryReactor* AlertServiceImpl::ListPolicyActions(
    grpc::CallbackServerContext* context, const v1::ListPolicyActionsRequest* request,
    v1::ListPolicyActionsResponse* response) {
  if (policies_ == nullptr) return FinishUnary(context, NoPolicies());
  return FinishUnary(context,
                     Assign(policies_->List(*request),
                            [&](v1::ListPolicyActionsResponse r) { *response = std::move(r); }));
}

grpc::ServerUnaryReactor* AlertServiceImpl::GetPolicyAction(
    grpc::CallbackServerContext* context, const v1::GetPolicyActionRequest* request,
    v1::GetPolicyActionResponse* response) {
  if (policies_ == nullptr) return FinishUnary(context, NoPolicies());
  return FinishUnary(context, Assign(policies_->Get(request->action_id()), [&](v1::PolicyAction a) {
                       *response->mutable_action() = std::move(a);
                     }));
}

grpc::ServerUnaryReactor* AlertServiceImpl::UndoPolicyAction(
    grpc::CallbackServerContext* context, const v1::UndoPolicyActionRequest* request,
    v1::UndoPolicyActionResponse* response) {
  if (policies_ == nullptr) return FinishUnary(context, NoPolicies());
  return FinishUnary(context, Assign(policies_->Undo(*request), [&](v1::PolicyAction a) {
                       *response->mutable_action() = std::move(a);
                     }));
}

}  // namespace goodput::alerting
