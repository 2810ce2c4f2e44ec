// goodput-alerting: composition root. See services/platform/service_main.h for the command line
// and services/alerting/README.md for the `alerting.*` configuration keys.
#include <memory>

#include "services/alerting/alert_config.h"
#include "services/alerting/alert_engine.h"
#include "services/alerting/alerting_service.h"
#include "services/alerting/delivery_setup.h"
#include "services/platform/service_main.h"

namespace {

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
  rt->engine = std::make_unique<goodput::alerting::AlertEngine>(
      ctx.pg, config->engine, rt->hub.get(), ctx.logger.With({{"component", "engine"}}));
  rt->engine->Start(config->sweep_interval);
  goodput::alerting::AlertEngine* engine = rt->engine.get();
  ctx.on_shutdown->push_back([engine] { engine->Stop(); });
  rt->service =
      std::make_unique<goodput::alerting::AlertServiceImpl>(rt->engine.get(), rt->hub.get());
  ctx.grpc->AddService(rt->service.get(), goodput::v1::AlertService::service_full_name());
  // --- end alert engine ---

  // --- Delivery ---
  absl::StatusOr<std::shared_ptr<goodput::alerting::DeliveryRuntime>> delivery =
      goodput::alerting::StartDelivery(ctx);
  if (!delivery.ok()) return delivery.status();
  rt->delivery = *std::move(delivery);
  // --- end delivery ---

  return rt;
}

}  // namespace

int main(int argc, char** argv) {
  return goodput::platform::RunServiceMain(
      argc, argv,
      {.name = "goodput-alerting", .config_sections = {"alerting"}, .setup = Setup});
}
