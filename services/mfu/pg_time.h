// Timestamps between protobuf and PostgreSQL as integer microseconds since the epoch, so that
// nothing is rounded on the way (SQL side: `timestamptz 'epoch' + $n * interval '1
// microsecond'` in, `(extract(epoch FROM t) * 1000000)::bigint` out).
#pragma once

#include <cstdint>

#include "google/protobuf/timestamp.pb.h"

namespace goodput::mfu {

inline int64_t ToUnixMicros(const google::protobuf::Timestamp& t) {
  return t.seconds() * 1000000 + t.nanos() / 1000;
}

inline google::protobuf::Timestamp FromUnixMicros(int64_t us) {
  google::protobuf::Timestamp t;
  int64_t seconds = us / 1000000;
  int64_t rest = us % 1000000;
  if (rest < 0) {
    rest += 1000000;
    --seconds;
  }
  t.set_seconds(seconds);
  t.set_nanos(static_cast<int32_t>(rest * 1000));
  return t;
}

}  // namespace goodput::mfu
