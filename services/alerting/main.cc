// goodput-alerting: composition root. See services/platform/service_main.h for the command line.
#include <memory>

#include "services/alerting/alerting_service.h"
#include "services/alerting/delivery_setup.h"
#include "services/platform/service_main.h"

namespace {

// Everything goodput-alerting keeps alive while serving.
struct AlertingRuntime {
  std::shared_ptr<goodput::alerting::DeliveryRuntime> delivery;  // outbox -> targets
  std::shared_ptr<goodput::alerting::AlertServiceImpl> service;
};

}  // namespace

int main(int argc, char** argv) {
  return goodput::platform::RunServiceMain(
      argc, argv,
      {.name = "goodput-alerting",
       .config_sections = {"alerting"},
       .setup =
           [](goodput::platform::ServiceContext& ctx) -> absl::StatusOr<std::shared_ptr<void>> {
         auto rt = std::make_shared<AlertingRuntime>();
         absl::StatusOr<std::shared_ptr<goodput::alerting::DeliveryRuntime>> delivery =
             goodput::alerting::StartDelivery(ctx);
         if (!delivery.ok()) return delivery.status();
         rt->delivery = *std::move(delivery);
         rt->service = std::make_shared<goodput::alerting::AlertServiceImpl>();
         ctx.grpc->AddService(rt->service.get(), goodput::v1::AlertService::service_full_name());
         return rt;
       }});
}
