// goodput-alerting: composition root. See services/platform/service_main.h for the command line
// and services/alerting/README.md for the `alerting.*` configuration keys.
#include <unistd.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "services/alerting/alert_config.h"
#include "services/alerting/alert_engine.h"
#include "services/alerting/alerting_service.h"
#include "services/alerting/delivery_setup.h"
#include "services/platform/service_main.h"

namespace {

constexpr char kSweepLease[] = "goodput:alerting:sweep";

// Everything goodput-alerting keeps alive while serving.
struct AlertingRuntime {
  // Alert engine: detectors, lifecycle, routing into the outbox.
  std::unique_ptr<goodput::alerting::AlertHub> hub;
  std::unique_ptr<goodput::alerting::AlertEngine> engine;
  std::unique_ptr<goodput::alerting::AlertServiceImpl> service;
  // Delivery: outbox -> targets.
  std::shared_ptr<goodput::alerting::DeliveryRuntime> delivery;
};

absl::StatusOr<std::shared_ptr<void>> Setup(goodput::platform::ServiceContext& ctx) {
  if (ctx.pg == nullptr) {
    return absl::FailedPreconditionError("postgres.dsn: required by goodput-alerting");
  }
  auto rt = std::make_shared<AlertingRuntime>();

  // --- Alert engine ---
  absl::StatusOr<goodput::alerting::AlertingConfig> config =
      goodput::alerting::LoadAlertingConfig(*ctx.config_tree);
  if (!config.ok()) return config.status();
  rt->hub = std::make_unique<goodput::alerting::AlertHub>();
  goodput::platform::CounterFamily* changes = &ctx.metrics->AddCounter(
      "goodput_alerting_alert_changes_total",
      "Alert changes committed by this replica (fired, updated, resolved, ...), by kind.",
      {"kind", "change"});
  rt->hub->Subscribe({}, [changes](const goodput::v1::SubscribeAlertsResponse& c) {
    changes
        ->WithLabels({goodput::v1::AlertKind_Name(c.alert().kind()),
                      goodput::v1::AlertChange_Name(c.change())})
        .Increment();
  });
  rt->engine = std::make_unique<goodput::alerting::AlertEngine>(
      ctx.pg, config->engine, rt->hub.get(), ctx.logger.With({{"component", "engine"}}));
  // One replica sweeps at a time: the holder of a Redis lease. Without Redis every replica
  // sweeps, which is safe (idempotent under PostgreSQL locks), only redundant.
  std::function<bool()> may_sweep;
  if (ctx.redis != nullptr) {
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    const std::string owner = absl::StrCat(ctx.config->service_name, "/", host, "/", getpid());
    const absl::Duration ttl = 3 * config->sweep_interval;
    goodput::platform::RedisClient* redis = ctx.redis;
    may_sweep = [redis, owner, ttl] {
      absl::StatusOr<bool> mine = redis->RenewLease(kSweepLease, owner, ttl);
      if (mine.ok() && !*mine) mine = redis->AcquireLease(kSweepLease, owner, ttl);
      return !mine.ok() || *mine;
    };
  }
  rt->engine->Start(config->sweep_interval, std::move(may_sweep));
  goodput::alerting::AlertEngine* engine = rt->engine.get();
  ctx.on_shutdown->push_back([engine] { engine->Stop(); });
  rt->service =
      std::make_unique<goodput::alerting::AlertServiceImpl>(rt->engine.get(), rt->hub.get());
  ctx.grpc->AddService(rt->service.get(), goodput::v1::AlertService::service_full_name());
  // --- end alert engine ---

  // --- Delivery ---
  std::vector<goodput::alerting::RoutedTarget> routed;
  const goodput::alerting::RoutingConfig& routing = config->engine.routing;
  for (size_t i = 0; i < routing.routes.size(); ++i) {
    for (const std::string& t : routing.routes[i].targets) {
      routed.push_back({absl::StrCat("alerting.routes[", i, "].targets"), t});
    }
  }
  for (const std::string& t : routing.default_targets) {
    routed.push_back({"alerting.default_targets", t});
  }
  absl::StatusOr<std::shared_ptr<goodput::alerting::DeliveryRuntime>> delivery =
      goodput::alerting::StartDelivery(ctx, routed);
  if (!delivery.ok()) return delivery.status();
  rt->delivery = *std::move(delivery);
  // Every committed alert change may have enqueued outbox rows: look now rather than at the
  // worker's next poll. The hub publishes after the commit, so the rows are visible.
  goodput::alerting::DeliveryWorker* worker = rt->delivery->worker.get();
  rt->hub->Subscribe({}, [worker](const goodput::v1::SubscribeAlertsResponse&) { worker->Wake(); });
  // --- end delivery ---

  return rt;
}

}  // namespace

int main(int argc, char** argv) {
  return goodput::platform::RunServiceMain(
      argc, argv, {.name = "goodput-alerting", .config_sections = {"alerting"}, .setup = Setup});
}
