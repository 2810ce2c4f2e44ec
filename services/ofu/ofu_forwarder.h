// Forwarding of job-level OFU windows to mfu (MfuService.PushOfuWindows) and alerting
// (AlertService.PushWindows), with the catch-up guarantee of the API's DeliverySequence.
//
// Every consumer commit that writes job-level windows takes the shard's next commit sequence
// and stamps its rows with it (migrations/0011); a revised window moves to its newer commit.
// The forwarder pushes, per target and in sequence order, the windows each pending commit
// still owns, with `previous_sequence` = the last sequence the target acknowledged, and
// records each acknowledgement in PostgreSQL. A target that reports a gap (it lost its
// watermark) is re-sent everything above the watermark it reports; a retry at or below its
// watermark is acknowledged by it as a duplicate. A target that is down is retried with a
// backoff and caught up from PostgreSQL when it returns, so nothing is skipped.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "goodput/v1/ofu.pb.h"
#include "grpcpp/grpcpp.h"
#include "services/ofu/ofu_store.h"
#include "services/platform/logging.h"

namespace goodput::ofu {

// Sends one push: fills `ack` from the receiver's answer.
using PushFn =
    std::function<grpc::Status(const v1::DeliverySequence& position,
                               const std::vector<v1::OfuWindow>& windows, v1::DeliveryAck* ack)>;

struct ForwardTarget {
  std::string name;  // "mfu", "alerting": the key of its acknowledgements
  PushFn push;
};

// Targets over gRPC: MfuService.PushOfuWindows and AlertService.PushWindows on `channel`,
// with `bearer_token` (empty: none) and a per-call deadline.
ForwardTarget MfuTarget(std::shared_ptr<grpc::Channel> channel, std::string bearer_token,
                        absl::Duration timeout);
ForwardTarget AlertingTarget(std::shared_ptr<grpc::Channel> channel, std::string bearer_token,
                             absl::Duration timeout);

struct ForwarderOptions {
  absl::Duration poll_interval = absl::Seconds(1);
  absl::Duration retry_backoff = absl::Seconds(5);
  int commits_per_step = 100;
  int32_t window_s = 60;
};

class OfuForwarder {
 public:
  OfuForwarder(OfuStore* store, std::vector<ForwardTarget> targets, ForwarderOptions options,
               platform::Logger logger);
  ~OfuForwarder();

  void Start();
  void Stop();
  // New windows were committed: push now.
  void Wake();

  // Pushes every pending commit to target `index` (for tests and the loop). The first error
  // (target down, PostgreSQL down) stops the step.
  absl::Status StepOnce(size_t index);

 private:
  void Run();

  OfuStore* store_;
  std::vector<ForwardTarget> targets_;
  ForwarderOptions options_;
  platform::Logger logger_;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool wake_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace goodput::ofu
