#include "services/ofu/ofu_forwarder.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "goodput/v1/alert.grpc.pb.h"
#include "goodput/v1/mfu.grpc.pb.h"
#include "services/ofu/proto_convert.h"
#include "services/platform/status_convert.h"

namespace goodput::ofu {
namespace {

template <class Stub, class Request, class Response>
PushFn MakePush(std::shared_ptr<Stub> stub, std::string token, absl::Duration timeout,
                grpc::Status (Stub::*method)(grpc::ClientContext*, const Request&, Response*)) {
  return [stub, token, timeout, method](const v1::DeliverySequence& position,
                                        const std::vector<v1::OfuWindow>& windows,
                                        v1::DeliveryAck* ack) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::milliseconds(absl::ToInt64Milliseconds(timeout)));
    if (!token.empty()) ctx.AddMetadata("authorization", absl::StrCat("Bearer ", token));
    Request req;
    *req.mutable_position() = position;
    for (const v1::OfuWindow& w : windows) *req.add_windows() = w;
    Response resp;
    grpc::Status s = ((*stub).*method)(&ctx, req, &resp);
    if (s.ok()) *ack = resp.ack();
    return s;
  };
}

}  // namespace

ForwardTarget MfuTarget(std::shared_ptr<grpc::Channel> channel, std::string bearer_token,
                        absl::Duration timeout) {
  std::shared_ptr<v1::MfuService::Stub> stub = v1::MfuService::NewStub(channel);
  return {.name = "mfu",
          .push = MakePush(stub, std::move(bearer_token), timeout,
                           &v1::MfuService::Stub::PushOfuWindows)};
}

ForwardTarget AlertingTarget(std::shared_ptr<grpc::Channel> channel, std::string bearer_token,
                             absl::Duration timeout) {
  std::shared_ptr<v1::AlertService::Stub> stub = v1::AlertService::NewStub(channel);
  return {.name = "alerting",
          .push = MakePush(stub, std::move(bearer_token), timeout,
                           &v1::AlertService::Stub::PushWindows)};
}

OfuForwarder::OfuForwarder(OfuStore* store, std::vector<ForwardTarget> targets,
                           ForwarderOptions options, platform::Logger logger)
    : store_(store), targets_(std::move(targets)), options_(options), logger_(std::move(logger)) {}

OfuForwarder::~OfuForwarder() { Stop(); }

absl::Status OfuForwarder::StepOnce(size_t index) {
  const ForwardTarget& target = targets_[index];
  absl::StatusOr<int64_t> acked = store_->AckedSequence(target.name);
  if (!acked.ok()) return acked.status();
  while (true) {
    absl::StatusOr<std::vector<int64_t>> commits =
        store_->PendingCommits(*acked, options_.commits_per_step);
    if (!commits.ok()) return commits.status();
    if (commits->empty()) return absl::OkStatus();
    for (int64_t seq : *commits) {
      absl::StatusOr<std::vector<std::pair<JobRow, StoredWindow>>> rows =
          store_->CommitWindows(seq);
      if (!rows.ok()) return rows.status();
      std::vector<v1::OfuWindow> windows;
      for (const auto& [job, w] : *rows) {
        windows.push_back(WindowToProto(w.result, w.window_s, w.revision, job.cluster, job.job_id,
                                        job.workload_fingerprint));
      }
      v1::DeliverySequence position;
      position.set_producer_id(store_->ProducerId());
      position.set_sequence(seq);
      position.set_previous_sequence(*acked);
      v1::DeliveryAck ack;
      grpc::Status s = target.push(position, windows, &ack);
      if (!s.ok()) {
        return absl::Status(
            static_cast<absl::StatusCode>(s.error_code()),
            absl::StrCat(target.name, ": push of sequence ", seq, " failed: ", s.error_message()));
      }
      if (ack.gap_detected()) {
        // The target has less than we thought (it lost its state): resend above its watermark.
        logger_.Warn("forward target reported a gap; resending",
                     {{"target", target.name},
                      {"target_watermark", ack.watermark_sequence()},
                      {"our_acked", *acked}});
        *acked = std::min(*acked, ack.watermark_sequence());
        if (absl::Status st = store_->SetAckedSequence(target.name, *acked); !st.ok()) return st;
        break;
      }
      *acked = seq;
      if (absl::Status st = store_->SetAckedSequence(target.name, seq); !st.ok()) return st;
    }
  }
}

void OfuForwarder::Run() {
  while (true) {
    bool failed = false;
    for (size_t i = 0; i < targets_.size(); ++i) {
      absl::Status s = StepOnce(i);
      if (!s.ok()) {
        failed = true;
        logger_.Debug("forwarding failed; retrying later",
                      {{"target", targets_[i].name}, {"error", s.ToString()}});
      }
    }
    absl::MutexLock lock(&mu_);
    if (stop_) return;
    auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stop_ || wake_; };
    mu_.AwaitWithTimeout(absl::Condition(&ready),
                         failed ? options_.retry_backoff : options_.poll_interval);
    wake_ = false;
    if (stop_) return;
  }
}

void OfuForwarder::Start() {
  if (targets_.empty()) return;
  thread_ = std::thread([this] { Run(); });
}

void OfuForwarder::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void OfuForwarder::Wake() {
  absl::MutexLock lock(&mu_);
  wake_ = true;
}

}  // namespace goodput::ofu
