// The producer side of an ordered push with catch-up (the API's DeliverySequence): a loop that
// sends, per target and in sequence order, every commit a producer has recorded in PostgreSQL
// above the sequence the target last acknowledged, and records each acknowledgement.
//
// The producer stamps each commit with the next value of a counter taken under a row lock, so
// sequence order is commit order. A push carries `previous_sequence` = the target's last
// acknowledged sequence; a target that lost its watermark answers with a gap and is re-sent
// everything above the watermark it reports; a target that is down is retried with a backoff
// and caught up when it returns. What a commit holds and how it is sent is the producer's
// business: the forwarder only knows sequences.
//
//   OrderedForwarder forwarder(log, {AlertingTarget(...)}, {}, logger);
//   forwarder.Start();   // and forwarder.Wake() after each commit
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "services/platform/logging.h"
#include "services/platform/poll_loop.h"

namespace goodput::platform {

// A receiver's answer (goodput.v1.DeliveryAck without protobuf).
struct OrderedAck {
  int64_t watermark_sequence = 0;
  bool gap_detected = false;
  bool duplicate = false;
};

// Where the producer keeps its commits and the targets' acknowledgements.
struct OrderedLog {
  // Highest sequence `target` acknowledged (0 if none).
  std::function<absl::StatusOr<int64_t>(const std::string& target)> acked_sequence;
  std::function<absl::Status(const std::string& target, int64_t sequence)> set_acked_sequence;
  // Sequences of commits above `after`, ascending, at most `limit`.
  std::function<absl::StatusOr<std::vector<int64_t>>(int64_t after, int limit)> pending;
};

struct OrderedTarget {
  std::string name;  // the key of its acknowledgements, e.g. "alerting"
  // Sends the commit `sequence` with `previous_sequence`; an error status when the target
  // could not be reached or refused (the push is retried later).
  std::function<absl::StatusOr<OrderedAck>(int64_t sequence, int64_t previous_sequence)> push;
};

struct OrderedForwarderOptions {
  absl::Duration poll_interval = absl::Seconds(1);
  absl::Duration retry_backoff = absl::Seconds(5);
  int commits_per_step = 100;
};

class OrderedForwarder {
 public:
  OrderedForwarder(OrderedLog log, std::vector<OrderedTarget> targets,
                   OrderedForwarderOptions options, Logger logger);
  ~OrderedForwarder();

  // Runs the loop on its own thread (nothing to do without targets).
  void Start();
  // Stops and joins the loop.
  void Stop();
  // New commits were recorded: push now rather than at the next poll.
  void Wake();

  // Pushes every pending commit to target `index` (for tests and the loop). The first error
  // (target down, PostgreSQL down) ends the step; nothing is skipped.
  absl::Status StepOnce(size_t index);

 private:
  // One step for every target; false if any failed.
  bool StepAll();

  OrderedLog log_;
  std::vector<OrderedTarget> targets_;
  OrderedForwarderOptions options_;
  Logger logger_;
  PollLoop loop_;  // last: stopped before the rest goes
};

}  // namespace goodput::platform
