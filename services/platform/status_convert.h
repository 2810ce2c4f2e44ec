// The one place where absl::Status and grpc::Status meet. Both use the same canonical codes,
// so the conversion keeps the code and the message; RPC handlers end with
// `return ToGrpcStatus(status);`.
#pragma once

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace goodput::platform {

// Same code, same message. OK stays OK.
grpc::Status ToGrpcStatus(const absl::Status& status);

// Same code, same message (error details are dropped). For clients calling other services.
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace goodput::platform
