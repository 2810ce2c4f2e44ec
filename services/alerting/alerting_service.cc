#include "services/alerting/alerting_service.h"

#include <deque>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "services/platform/status_convert.h"

namespace goodput::alerting {
namespace {

grpc::ServerUnaryReactor* Finish(grpc::CallbackServerContext* context, const absl::Status& s) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(platform::ToGrpcStatus(s));
  return reactor;
}

template <class T, class F>
absl::Status Assign(absl::StatusOr<T> value, F&& set) {
  if (!value.ok()) return value.status();
  set(*std::move(value));
  return absl::OkStatus();
}

// One SubscribeAlerts call: queued changes written one at a time. A subscriber that cannot
// keep up loses its oldest queued changes rather than holding the engine back.
class AlertStream : public grpc::ServerWriteReactor<v1::SubscribeAlertsResponse> {
 public:
  static constexpr size_t kMaxQueued = 1000;

  // Subscribes first, then takes the snapshot, so no change falls between the two (a change
  // may show in both: subscribers see an alert at least once).
  using Snapshot = std::function<absl::StatusOr<std::vector<v1::SubscribeAlertsResponse>>()>;
  AlertStream(AlertHub* hub, AlertFilter filter, const Snapshot& snapshot) : hub_(hub) {
    {
      absl::MutexLock lock(&mu_);
      holding_ = true;
    }
    subscription_ = hub_->Subscribe(std::move(filter),
                                    [this](const v1::SubscribeAlertsResponse& r) { Push(r); });
    absl::StatusOr<std::vector<v1::SubscribeAlertsResponse>> first =
        snapshot ? snapshot() : std::vector<v1::SubscribeAlertsResponse>{};
    absl::MutexLock lock(&mu_);
    holding_ = false;
    if (!first.ok()) {
      FinishLocked(platform::ToGrpcStatus(first.status()));
      return;
    }
    for (auto it = first->rbegin(); it != first->rend(); ++it) queue_.push_front(std::move(*it));
    WriteNextLocked();
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (finished_) {
      if (pending_finish_.has_value()) Finish(*std::exchange(pending_finish_, std::nullopt));
      return;
    }
    if (!ok) {
      FinishLocked(grpc::Status::OK);
      return;
    }
    WriteNextLocked();
  }
  void OnCancel() override {
    absl::MutexLock lock(&mu_);
    FinishLocked(grpc::Status::CANCELLED);
  }
  void OnDone() override {
    hub_->Unsubscribe(subscription_);
    delete this;
  }

 private:
  void Push(const v1::SubscribeAlertsResponse& r) {
    absl::MutexLock lock(&mu_);
    if (finished_) return;
    if (queue_.size() >= kMaxQueued) queue_.pop_front();
    queue_.push_back(r);
    WriteNextLocked();
  }
  void WriteNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (holding_ || writing_ || finished_ || queue_.empty()) return;
    current_ = std::move(queue_.front());
    queue_.pop_front();
    writing_ = true;
    StartWrite(&current_);
  }
  void FinishLocked(grpc::Status s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_) return;
    finished_ = true;
    if (!writing_) {
      Finish(std::move(s));
    } else {
      pending_finish_ = std::move(s);
    }
  }

  AlertHub* hub_;
  int64_t subscription_ = 0;
  absl::Mutex mu_;
  std::deque<v1::SubscribeAlertsResponse> queue_ ABSL_GUARDED_BY(mu_);
  v1::SubscribeAlertsResponse current_;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool holding_ ABSL_GUARDED_BY(mu_) = false;  // until the snapshot is queued
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<grpc::Status> pending_finish_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

grpc::ServerUnaryReactor* AlertServiceImpl::ListAlerts(grpc::CallbackServerContext* context,
                                                       const v1::ListAlertsRequest* request,
                                                       v1::ListAlertsResponse* response) {
  return Finish(context, Assign(engine_->ListAlerts(*request),
                                [&](v1::ListAlertsResponse r) { *response = std::move(r); }));
}

grpc::ServerUnaryReactor* AlertServiceImpl::GetAlert(grpc::CallbackServerContext* context,
                                                     const v1::GetAlertRequest* request,
                                                     v1::GetAlertResponse* response) {
  return Finish(context, Assign(engine_->GetAlert(request->alert_id()),
                                [&](v1::Alert a) { *response->mutable_alert() = std::move(a); }));
}

grpc::ServerUnaryReactor* AlertServiceImpl::AckAlert(grpc::CallbackServerContext* context,
                                                     const v1::AckAlertRequest* request,
                                                     v1::AckAlertResponse* response) {
  return Finish(context, Assign(engine_->AckAlert(*request),
                                [&](v1::Alert a) { *response->mutable_alert() = std::move(a); }));
}

grpc::ServerUnaryReactor* AlertServiceImpl::CreateSilence(grpc::CallbackServerContext* context,
                                                          const v1::CreateSilenceRequest* request,
                                                          v1::CreateSilenceResponse* response) {
  return Finish(context, Assign(engine_->CreateSilence(request->silence()), [&](v1::Silence s) {
                  *response->mutable_silence() = std::move(s);
                }));
}

grpc::ServerUnaryReactor* AlertServiceImpl::DeleteSilence(grpc::CallbackServerContext* context,
                                                          const v1::DeleteSilenceRequest* request,
                                                          v1::DeleteSilenceResponse* response) {
  return Finish(context, Assign(engine_->DeleteSilence(request->silence_id()), [&](v1::Silence s) {
                  *response->mutable_silence() = std::move(s);
                }));
}

grpc::ServerUnaryReactor* AlertServiceImpl::ListSilences(grpc::CallbackServerContext* context,
                                                         const v1::ListSilencesRequest* request,
                                                         v1::ListSilencesResponse* response) {
  return Finish(context, Assign(engine_->ListSilences(*request),
                                [&](v1::ListSilencesResponse r) { *response = std::move(r); }));
}

grpc::ServerWriteReactor<v1::SubscribeAlertsResponse>* AlertServiceImpl::SubscribeAlerts(
    grpc::CallbackServerContext* /*context*/, const v1::SubscribeAlertsRequest* request) {
  class Failed : public grpc::ServerWriteReactor<v1::SubscribeAlertsResponse> {
   public:
    explicit Failed(const absl::Status& s) { Finish(platform::ToGrpcStatus(s)); }
    void OnDone() override { delete this; }
  };
  absl::StatusOr<AlertFilter> filter = FilterFromRequest(*request);
  if (!filter.ok()) return new Failed(filter.status());
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
  return Finish(context, Assign(engine_->PushWindows(*request), [&](v1::DeliveryAck a) {
                  *response->mutable_ack() = std::move(a);
                }));
}

grpc::ServerUnaryReactor* AlertServiceImpl::PushDivergenceEvents(
    grpc::CallbackServerContext* context, const v1::PushDivergenceEventsRequest* request,
    v1::PushDivergenceEventsResponse* response) {
  return Finish(context, Assign(engine_->PushDivergenceEvents(*request), [&](v1::DeliveryAck a) {
                  *response->mutable_ack() = std::move(a);
                }));
}

}  // namespace goodput::alerting
