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

// The HTTP status answering a request that failed with `code`, as gRPC-HTTP gateways map
// them: 400 invalid/out of range, 401, 403, 404, 409 already exists/failed precondition/
// aborted, 429 resource exhausted, 501, 503 unavailable, 504 deadline; anything else 500.
int HttpStatusFor(absl::StatusCode code);

}  // namespace goodput::platform
