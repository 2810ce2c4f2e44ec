// goodput-mfu: composition root. See services/platform/service_main.h for the command line.
#include <memory>

#include "services/mfu/mfu_service.h"
#include "services/platform/service_main.h"

int main(int argc, char** argv) {
  return goodput::platform::RunServiceMain(
      argc, argv,
      {.name = "goodput-mfu",
       .config_sections = {"mfu"},
       .setup =
           [](goodput::platform::ServiceContext& ctx) -> absl::StatusOr<std::shared_ptr<void>> {
         auto service = std::make_shared<goodput::mfu::MfuServiceImpl>();
         ctx.grpc->AddService(service.get(), goodput::v1::MfuService::service_full_name());
         return service;
       }});
}
