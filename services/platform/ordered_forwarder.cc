#include "services/platform/ordered_forwarder.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace goodput::platform {

OrderedForwarder::OrderedForwarder(OrderedLog log, std::vector<OrderedTarget> targets,
                                   OrderedForwarderOptions options, Logger logger)
    : log_(std::move(log)),
      targets_(std::move(targets)),
      options_(options),
      logger_(std::move(logger)),
      loop_([this] { return StepAll(); },
            {.poll_interval = options_.poll_interval, .retry_backoff = options_.retry_backoff}) {}

OrderedForwarder::~OrderedForwarder() { Stop(); }

absl::Status OrderedForwarder::StepOnce(size_t index) {
  const OrderedTarget& target = targets_[index];
  absl::StatusOr<int64_t> acked = log_.acked_sequence(target.name);
  if (!acked.ok()) return acked.status();
  while (true) {
    absl::StatusOr<std::vector<int64_t>> commits = log_.pending(*acked, options_.commits_per_step);
    if (!commits.ok()) return commits.status();
    if (commits->empty()) return absl::OkStatus();
    for (int64_t seq : *commits) {
      absl::StatusOr<OrderedAck> ack = target.push(seq, *acked);
      if (!ack.ok()) {
        return absl::Status(ack.status().code(),
                            absl::StrCat(target.name, ": push of sequence ", seq,
                                         " failed: ", ack.status().message()));
      }
      if (ack->gap_detected) {
        // The target has less than we recorded (it lost its state): resend above its
        // watermark.
        logger_.Warn("forward target reported a gap; resending",
                     {{"target", target.name},
                      {"target_watermark", ack->watermark_sequence},
                      {"our_acked", *acked}});
        *acked = std::min(*acked, ack->watermark_sequence);
        if (absl::Status st = log_.set_acked_sequence(target.name, *acked); !st.ok()) return st;
        break;
      }
      *acked = seq;
      if (absl::Status st = log_.set_acked_sequence(target.name, seq); !st.ok()) return st;
    }
  }
}

bool OrderedForwarder::StepAll() {
  bool ok = true;
  for (size_t i = 0; i < targets_.size(); ++i) {
    absl::Status s = StepOnce(i);
    if (!s.ok()) {
      ok = false;
      logger_.Debug("forwarding failed; retrying later",
                    {{"target", targets_[i].name}, {"error", s.ToString()}});
    }
  }
  return ok;
}

void OrderedForwarder::Start() {
  if (!targets_.empty()) loop_.Start();
}

void OrderedForwarder::Stop() { loop_.Stop(); }

void OrderedForwarder::Wake() { loop_.Wake(); }

}  // namespace goodput::platform
