// Forwarding of job-level OFU windows to mfu (MfuService.PushOfuWindows) and alerting
// (AlertService.PushWindows), with the catch-up guarantee of the API's DeliverySequence.
//
// Every consumer commit that writes job-level windows takes the shard's next commit sequence
// and stamps its rows with it (migrations/0011); a revised window moves to its newer commit.
// The loop is services/platform/ordered_forwarder.h: it pushes, per target and in sequence
// order, the windows each pending commit still owns, with `previous_sequence` = the last
// sequence the target acknowledged, and records each acknowledgement in PostgreSQL. A target
// that reports a gap (it lost its watermark) is re-sent everything above the watermark it
// reports; a retry at or below its watermark is acknowledged by it as a duplicate. A target
// that is down is retried with a backoff and caught up from PostgreSQL when it returns.
//
//   platform::OrderedForwarder forwarder(ForwardLog(store), {MfuTarget(store, ...)}, {}, logger);
#pragma once

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "services/ofu/ofu_store.h"
#include "services/platform/ordered_forwarder.h"

namespace goodput::ofu {

// The forwarding log kept by `store` (which must outlive it): the shard's commit sequences
// and the targets' acknowledgements.
platform::OrderedLog ForwardLog(OfuStore* store);

// Targets over gRPC, named "mfu" and "alerting" (the keys of their acknowledgements):
// MfuService.PushOfuWindows and AlertService.PushWindows on `channel`, each push carrying the
// windows the commit still owns, with `bearer_token` (empty: none) and a per-call deadline.
platform::OrderedTarget MfuTarget(OfuStore* store, std::shared_ptr<grpc::Channel> channel,
                                  std::string bearer_token, absl::Duration timeout);
platform::OrderedTarget AlertingTarget(OfuStore* store, std::shared_ptr<grpc::Channel> channel,
                                       std::string bearer_token, absl::Duration timeout);

}  // namespace goodput::ofu
