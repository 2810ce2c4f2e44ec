#include "services/platform/grpc_client.h"

#include <chrono>

#include "absl/strings/str_cat.h"

namespace goodput::platform {

void PrepareClientContext(grpc::ClientContext* ctx, absl::Duration timeout,
                          absl::string_view bearer_token) {
  ctx->set_deadline(std::chrono::system_clock::now() +
                    std::chrono::milliseconds(absl::ToInt64Milliseconds(timeout)));
  if (!bearer_token.empty())
    ctx->AddMetadata("authorization", absl::StrCat("Bearer ", bearer_token));
}

}  // namespace goodput::platform
