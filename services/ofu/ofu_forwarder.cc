#include "services/ofu/ofu_forwarder.h"

#include <utility>
#include <vector>

#include "goodput/v1/alert.grpc.pb.h"
#include "goodput/v1/mfu.grpc.pb.h"
#include "services/ofu/proto_convert.h"
#include "services/platform/grpc_client.h"
#include "services/platform/status_convert.h"

namespace goodput::ofu {
namespace {

// A target pushing the windows of commit `sequence` with `method` (PushOfuWindows and
// PushWindows take the same request shape: a position and windows).
template <class Stub, class Request, class Response>
platform::OrderedTarget MakeTarget(std::string name, OfuStore* store, std::shared_ptr<Stub> stub,
                                   std::string token, absl::Duration timeout,
                                   grpc::Status (Stub::*method)(grpc::ClientContext*,
                                                                const Request&, Response*)) {
  return {
      .name = std::move(name),
      .push = [store, stub, token = std::move(token), timeout, method](
                  int64_t sequence,
                  int64_t previous_sequence) -> absl::StatusOr<platform::OrderedAck> {
        absl::StatusOr<std::vector<std::pair<JobRow, StoredWindow>>> rows =
            store->CommitWindows(sequence);
        if (!rows.ok()) return rows.status();
        Request request;
        request.mutable_position()->set_producer_id(store->ProducerId());
        request.mutable_position()->set_sequence(sequence);
        request.mutable_position()->set_previous_sequence(previous_sequence);
        for (const auto& [job, w] : *rows) {
          *request.add_windows() = WindowToProto(w.result, w.window_s, w.revision, job.cluster,
                                                 job.job_id, job.workload_fingerprint);
        }
        grpc::ClientContext ctx;
        platform::PrepareClientContext(&ctx, timeout, token);
        Response response;
        if (absl::Status s = platform::FromGrpcStatus(((*stub).*method)(&ctx, request, &response));
            !s.ok()) {
          return s;
        }
        return platform::OrderedAck{.watermark_sequence = response.ack().watermark_sequence(),
                                    .gap_detected = response.ack().gap_detected(),
                                    .duplicate = response.ack().duplicate()};
      }};
}

}  // namespace

platform::OrderedLog ForwardLog(OfuStore* store) {
  return {
      .acked_sequence = [store](const std::string& target) { return store->AckedSequence(target); },
      .set_acked_sequence = [store](const std::string& target,
                                    int64_t seq) { return store->SetAckedSequence(target, seq); },
      .pending = [store](int64_t after, int limit) { return store->PendingCommits(after, limit); }};
}

platform::OrderedTarget MfuTarget(OfuStore* store, std::shared_ptr<grpc::Channel> channel,
                                  std::string bearer_token, absl::Duration timeout) {
  return MakeTarget("mfu", store, std::shared_ptr(v1::MfuService::NewStub(channel)),
                    std::move(bearer_token), timeout, &v1::MfuService::Stub::PushOfuWindows);
}

platform::OrderedTarget AlertingTarget(OfuStore* store, std::shared_ptr<grpc::Channel> channel,
                                       std::string bearer_token, absl::Duration timeout) {
  return MakeTarget("alerting", store, std::shared_ptr(v1::AlertService::NewStub(channel)),
                    std::move(bearer_token), timeout, &v1::AlertService::Stub::PushWindows);
}

}  // namespace goodput::ofu
