// What every call from one goodput service to another sets on its client context.
#pragma once

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "grpcpp/client_context.h"

namespace goodput::platform {

// A deadline `timeout` from now and, unless `bearer_token` is empty, the authorization
// header the receiving service checks (see auth.h).
void PrepareClientContext(grpc::ClientContext* ctx, absl::Duration timeout,
                          absl::string_view bearer_token);

}  // namespace goodput::platform
