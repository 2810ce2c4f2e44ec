// Wires delivery into goodput-alerting: reads `alerting.delivery.*` and `alerting.targets`
// (README.md, "Delivery"), builds the targets, the rate limiter and the worker, starts the
// worker and stops it on shutdown. Bad configuration is an INVALID_ARGUMENT naming the key.
#pragma once

#include <memory>

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

// Builds and starts delivery; registers its stop in ctx.on_shutdown.
absl::StatusOr<std::shared_ptr<DeliveryRuntime>> StartDelivery(platform::ServiceContext& ctx);

}  // namespace goodput::alerting
