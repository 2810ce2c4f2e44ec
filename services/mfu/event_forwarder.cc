#include "services/mfu/event_forwarder.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "goodput/v1/alert.grpc.pb.h"

namespace goodput::mfu {

platform::OrderedLog EventLog(ReconciliationStore* store) {
  return {
      .acked_sequence = [store](const std::string& target) { return store->AckedSequence(target); },
      .set_acked_sequence = [store](const std::string& target,
                                    int64_t seq) { return store->SetAckedSequence(target, seq); },
      .pending = [store](int64_t after,
                         int limit) { return store->PendingEventSequences(after, limit); }};
}

platform::OrderedTarget AlertingTarget(ReconciliationStore* store,
                                       std::shared_ptr<grpc::Channel> channel,
                                       std::string bearer_token, absl::Duration timeout) {
  std::shared_ptr<v1::AlertService::Stub> stub = v1::AlertService::NewStub(channel);
  return {.name = "alerting",
          .push = [store, stub, token = std::move(bearer_token), timeout](
                      int64_t sequence,
                      int64_t previous_sequence) -> absl::StatusOr<platform::OrderedAck> {
            absl::StatusOr<std::vector<v1::DivergenceEvent>> events = store->Events(sequence);
            if (!events.ok()) return events.status();
            v1::PushDivergenceEventsRequest request;
            request.mutable_position()->set_producer_id(store->producer_id());
            request.mutable_position()->set_sequence(sequence);
            request.mutable_position()->set_previous_sequence(previous_sequence);
            for (v1::DivergenceEvent& e : *events) *request.add_events() = std::move(e);
            grpc::ClientContext ctx;
            ctx.set_deadline(std::chrono::system_clock::now() +
                             std::chrono::milliseconds(absl::ToInt64Milliseconds(timeout)));
            if (!token.empty()) ctx.AddMetadata("authorization", absl::StrCat("Bearer ", token));
            v1::PushDivergenceEventsResponse response;
            grpc::Status s = stub->PushDivergenceEvents(&ctx, request, &response);
            if (!s.ok()) {
              return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
            }
            return platform::OrderedAck{.watermark_sequence = response.ack().watermark_sequence(),
                                        .gap_detected = response.ack().gap_detected(),
                                        .duplicate = response.ack().duplicate()};
          }};
}

}  // namespace goodput::mfu
