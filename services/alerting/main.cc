// goodput-alerting: composition root. See services/platform/service_main.h for the command line.
#include <memory>

#include "services/alerting/alerting_service.h"
#include "services/platform/service_main.h"

int main(int argc, char** argv) {
  return goodput::platform::RunServiceMain(
      argc, argv,
      {.name = "goodput-alerting",
       .config_sections = {"alerting"},
       .setup =
           [](goodput::platform::ServiceContext& ctx) -> absl::StatusOr<std::shared_ptr<void>> {
         auto service = std::make_shared<goodput::alerting::AlertServiceImpl>();
         ctx.grpc->AddService(service.get(), goodput::v1::AlertService::service_full_name());
         return service;
       }});
}
