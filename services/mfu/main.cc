// goodput-mfu: composition root. See services/platform/service_main.h for the command line.
#include <memory>

#include "services/mfu/mfu_service.h"
#include "services/mfu/mfu_store.h"
#include "services/platform/service_main.h"

int main(int argc, char** argv) {
  return goodput::platform::RunServiceMain(
      argc, argv,
      {.name = "goodput-mfu",
       .config_sections = {"mfu"},
       .needs_redis = false,  // reports and reconciliations live in PostgreSQL only
       .setup =
           [](goodput::platform::ServiceContext& ctx) -> absl::StatusOr<std::shared_ptr<void>> {
         struct Objects {
           std::unique_ptr<goodput::mfu::MfuStore> store;
           std::unique_ptr<goodput::mfu::MfuServiceImpl> service;
         };
         auto objects = std::make_shared<Objects>();
         objects->store = std::make_unique<goodput::mfu::MfuStore>(ctx.pg);
         objects->service =
             std::make_unique<goodput::mfu::MfuServiceImpl>(objects->store.get(), ctx.logger);
         ctx.grpc->AddService(objects->service.get(),
                              goodput::v1::MfuService::service_full_name());
         return std::shared_ptr<void>(objects);
       }});
}
