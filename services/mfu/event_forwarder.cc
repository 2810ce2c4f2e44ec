#include "services/mfu/event_forwarder.h"

#include <utility>

#include "goodput/v1/alert.grpc.pb.h"
#include "services/platform/grpc_client.h"
#include "services/platform/status_convert.h"

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
            platform::PrepareClientContext(&ctx, timeout, token);
            v1::PushDivergenceEventsResponse response;
            if (absl::Status s =
                    platform::FromGrpcStatus(stub->PushDivergenceEvents(&ctx, request, &response));
                !s.ok()) {
              return s;
            }
            return platform::OrderedAck{.watermark_sequence = response.ack().watermark_sequence(),
                                        .gap_detected = response.ack().gap_detected(),
                                        .duplicate = response.ack().duplicate()};
          }};
}

}  // namespace goodput::mfu
