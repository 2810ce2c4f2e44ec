// goodput-ofu: composition root. See services/platform/service_main.h for the command line.
#include <memory>

#include "services/ofu/ofu_service.h"
#include "services/platform/service_main.h"

int main(int argc, char** argv) {
  return goodput::platform::RunServiceMain(
      argc, argv,
      {.name = "goodput-ofu",
       .config_sections = {"ofu"},
       .setup =
           [](goodput::platform::ServiceContext& ctx) -> absl::StatusOr<std::shared_ptr<void>> {
         auto service = std::make_shared<goodput::ofu::OfuServiceImpl>();
         ctx.grpc->AddService(service.get(), goodput::v1::OfuService::service_full_name());
         return service;
       }});
}
