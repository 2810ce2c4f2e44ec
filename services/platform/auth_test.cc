#include "services/platform/auth.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace goodput::platform {
namespace {

std::unique_ptr<AuthPolicy> MakePolicy() {
  absl::StatusOr<std::unique_ptr<AuthPolicy>> policy = AuthPolicy::Create(
      {{"sched-token", "scheduler"}, {"tele-token", "telemetry"}, {"op-token", "operator"}});
  EXPECT_TRUE(policy.ok()) << policy.status();
  (*policy)->AllowService("goodput.v1.JobService", {Role::kScheduler});
  (*policy)->AllowMethod("/goodput.v1.IngestService/PushSamples", {Role::kTelemetry});
  return *std::move(policy);
}

TEST(AuthPolicy, MissingOrUnknownTokenIsUnauthenticated) {
  auto policy = MakePolicy();
  EXPECT_EQ(policy->Authorize("/goodput.v1.JobService/GetJob", std::nullopt).code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(policy->Authorize("/goodput.v1.JobService/GetJob", "Bearer nope").code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(policy->Authorize("/goodput.v1.JobService/GetJob", "Basic sched-token").code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(policy->Authorize("/goodput.v1.JobService/GetJob", "Bearer sched-toke").code(),
            absl::StatusCode::kUnauthenticated);
}

TEST(AuthPolicy, WrongRoleIsPermissionDeniedNamingRoles) {
  auto policy = MakePolicy();
  absl::Status status =
      policy->Authorize("/goodput.v1.JobService/RegisterJob", "Bearer tele-token");
  EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(status.message(), ::testing::HasSubstr("role telemetry"));
  EXPECT_THAT(status.message(), ::testing::HasSubstr("operator, scheduler"));
  // Methods nobody declared are for operators only.
  EXPECT_EQ(policy->Authorize("/goodput.v1.AlertService/AckAlert", "Bearer sched-token").code(),
            absl::StatusCode::kPermissionDenied);
}

TEST(AuthPolicy, AllowedRolesAndOperatorPass) {
  auto policy = MakePolicy();
  EXPECT_TRUE(policy->Authorize("/goodput.v1.JobService/RegisterJob", "Bearer sched-token").ok());
  EXPECT_TRUE(
      policy->Authorize("/goodput.v1.IngestService/PushSamples", "bearer  tele-token").ok());
  EXPECT_TRUE(policy->Authorize("/goodput.v1.AlertService/AckAlert", "Bearer op-token").ok());
}

TEST(AuthPolicy, HealthAndReflectionAreOpen) {
  auto policy = MakePolicy();
  EXPECT_TRUE(policy->Authorize("/grpc.health.v1.Health/Check", std::nullopt).ok());
  EXPECT_TRUE(policy->Authorize("/grpc.health.v1.Health/Watch", std::nullopt).ok());
  EXPECT_TRUE(policy
                  ->Authorize("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
                              std::nullopt)
                  .ok());
}

TEST(AuthPolicy, RefusesBadTokenTablesWithoutEchoingTokens) {
  absl::StatusOr<std::unique_ptr<AuthPolicy>> bad_role =
      AuthPolicy::Create({{"secret-1", "admin"}});
  ASSERT_FALSE(bad_role.ok());
  EXPECT_THAT(bad_role.status().message(), ::testing::HasSubstr("\"admin\""));
  EXPECT_THAT(bad_role.status().message(), ::testing::Not(::testing::HasSubstr("secret-1")));
  EXPECT_FALSE(AuthPolicy::Create({{"has space", "sdk"}}).ok());
  EXPECT_FALSE(AuthPolicy::Create({{"", "sdk"}}).ok());
}

TEST(Roles, ParseAndName) {
  EXPECT_EQ(*ParseRole("sdk"), Role::kSdk);
  EXPECT_EQ(RoleName(Role::kTelemetry), "telemetry");
  EXPECT_FALSE(ParseRole("root").ok());
}

}  // namespace
}  // namespace goodput::platform
