// The receiving side of an ordered push (the API's DeliverySequence) for in-memory stand-ins
// of mfu and alerting: a push is applied only when it follows the producer's watermark.
//
//   if (AcceptInOrder(watermarks_, req->position(), resp->mutable_ack())) Apply(*req);
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "goodput/v1/common.pb.h"

namespace goodput::testing {

// `watermarks`: producer -> last applied sequence. True when the push is the next one (its
// previous_sequence is at or below the watermark): the watermark moves to it and the caller
// applies it. Otherwise the ack says duplicate (at or below the watermark) or gap. The ack
// carries the watermark in every case.
inline bool AcceptInOrder(std::map<std::string, int64_t>& watermarks,
                          const goodput::v1::DeliverySequence& position,
                          goodput::v1::DeliveryAck* ack) {
  int64_t& watermark = watermarks[position.producer_id()];
  bool accepted = false;
  if (position.sequence() <= watermark) {
    ack->set_duplicate(true);
  } else if (position.previous_sequence() > watermark) {
    ack->set_gap_detected(true);
  } else {
    watermark = position.sequence();
    accepted = true;
  }
  ack->set_watermark_sequence(watermark);
  return accepted;
}

}  // namespace goodput::testing
