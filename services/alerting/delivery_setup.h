// Wires delivery into goodput-alerting: reads `alerting.delivery.*` and `alerting.targets`
// (README.md, "Delivery"), builds the targets, the rate limiter and the worker, starts the
// worker and stops it on shutdown. Bad configuration is an INVALID_ARGUMENT naming the key.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "services/alerting/delivery_store.h"
#include "services/alerting/delivery_worker.h"
#include "services/alerting/rate_limiter.h"
#include "services/platform/service_main.h"

namespace goodput::alerting {

// Everything delivery keeps alive while the service runs.
struct DeliveryRuntime {
  std::unique_ptr<DeliveryStore> store;
  std::unique_ptr<RateLimiter> limiter;
  std::unique_ptr<DeliveryWorker> worker;  // Wake() after enqueuing for prompt delivery
};

// Reads alerting.delivery.* into options (clock and random source left at their defaults).
absl::StatusOr<DeliveryOptions> ParseDeliveryOptions(const platform::ConfigTree& config);

// A target name that routing refers to, and where: {"alerting.routes[2].targets", "am-prod"}.
struct RoutedTarget {
  std::string where;
  std::string name;
};

// Builds and starts delivery; registers its stop in ctx.on_shutdown. Every name in `routed`
// must be a configured target (INVALID_ARGUMENT naming the key and the name otherwise), so a
// typo in a route stops start-up instead of leaving notifications queued forever.
absl::StatusOr<std::shared_ptr<DeliveryRuntime>> StartDelivery(
    platform::ServiceContext& ctx, const std::vector<RoutedTarget>& routed = {});

}  // namespace goodput::alerting
