// Divergence events to alerting (AlertService.PushDivergenceEvents) in mfu's commit order,
// with the catch-up of services/platform/ordered_forwarder.h: the log is the
// mfu_divergence_events table, one push per commit sequence.
#pragma once

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "services/mfu/reconciliation_store.h"
#include "services/platform/ordered_forwarder.h"

namespace goodput::mfu {

// The forwarding log kept by `store` (which must outlive it).
platform::OrderedLog EventLog(ReconciliationStore* store);

// AlertService.PushDivergenceEvents on `channel`, target name "alerting", with
// `bearer_token` (empty: none) and a per-call deadline.
platform::OrderedTarget AlertingTarget(ReconciliationStore* store,
                                       std::shared_ptr<grpc::Channel> channel,
                                       std::string bearer_token, absl::Duration timeout);

}  // namespace goodput::mfu
