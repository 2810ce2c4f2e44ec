#include "services/platform/status_convert.h"

#include "gtest/gtest.h"

namespace goodput::platform {
namespace {

TEST(StatusConvert, KeepsCodeAndMessageBothWays) {
  absl::Status status = absl::InvalidArgumentError("sample 17 of batch 3: tensor_active=1.7");
  grpc::Status converted = ToGrpcStatus(status);
  EXPECT_EQ(converted.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(converted.error_message(), "sample 17 of batch 3: tensor_active=1.7");
  EXPECT_EQ(FromGrpcStatus(converted), status);
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
  EXPECT_EQ(ToGrpcStatus(absl::ResourceExhaustedError("x")).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_TRUE(FromGrpcStatus(grpc::Status::OK).ok());
}

}  // namespace
}  // namespace goodput::platform
