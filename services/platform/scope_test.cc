#include "services/platform/scope.h"

#include "gmock/gmock.h"
#include "grpcpp/server_context.h"
#include "gtest/gtest.h"

namespace goodput::platform {
namespace {

TEST(ScopeTable, GivesEveryListedMethodAScopeAndNoneToOthers) {
  EXPECT_EQ(DeclaredScope("/goodput.v1.JobService/UpdateJob"), ScopeKind::kJob);
  EXPECT_EQ(DeclaredScope("/goodput.v1.JobService/ListJobs"), ScopeKind::kFiltered);
  EXPECT_EQ(DeclaredScope("POST /api/v1/write"), ScopeKind::kCluster);
  EXPECT_EQ(DeclaredScope("/goodput.v1.JobService/NotAMethod"), ScopeKind::kUndeclared);
  for (size_t i = 0; i < kScopeTableSize; ++i) {
    EXPECT_NE(kScopeTable[i].scope, ScopeKind::kUndeclared) << kScopeTable[i].method;
    for (size_t j = i + 1; j < kScopeTableSize; ++j) {
      EXPECT_NE(kScopeTable[i].method, kScopeTable[j].method) << "listed twice";
    }
  }
}

TEST(CallScope, AnInProcessCallCarriesTheScopedCallerOfItsThread) {
  grpc::ServerContext context;  // no metadata: an in-process call
  EXPECT_FALSE(CallScope::Of(&context).restricted());
  EXPECT_FALSE(CallScope::Of(nullptr).restricted());
  {
    const ScopedCaller caller(Identity{.role = Role::kScheduler, .clusters = {"a"}});
    const CallScope scope = CallScope::Of(&context);
    ASSERT_TRUE(scope.restricted());
    EXPECT_TRUE(scope.CheckCluster("a").ok());
    absl::Status other = scope.CheckJob("b", "7");
    EXPECT_EQ(other.code(), absl::StatusCode::kPermissionDenied);
    EXPECT_THAT(other.message(), ::testing::HasSubstr("limited to cluster a"));
    // A scoped caller names the whole job.
    EXPECT_EQ(scope.CheckJob("a", "").code(), absl::StatusCode::kInvalidArgument);
    // Alert and MFU-report lists: narrowed to its cluster without a job.
    std::string cluster;
    ASSERT_TRUE(scope.NarrowToJob("ListAlerts", &cluster, "", "").ok());
    EXPECT_EQ(cluster, "a");
    EXPECT_EQ(scope.NarrowToJob("ListMfuReports", nullptr, "", "").code(),
              absl::StatusCode::kPermissionDenied);
  }
  EXPECT_FALSE(CallScope::Of(&context).restricted());
  {
    // A user-limited caller needs the job registry to know a job's owner.
    const ScopedCaller caller(Identity{.role = Role::kSdk, .user = "alice"});
    const CallScope scope = CallScope::Of(&context);
    EXPECT_TRUE(scope.owner_scoped());
    std::string cluster;
    EXPECT_EQ(scope.NarrowToJob("ListAlerts", &cluster, "", "").code(),
              absl::StatusCode::kPermissionDenied);
    EXPECT_EQ(scope.CheckJob("a", "7").code(), absl::StatusCode::kFailedPrecondition);
  }
}

}  // namespace
}  // namespace goodput::platform
