#include "services/platform/auth.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "absl/time/clock.h"
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

// Writes `text` to `path` as a secret update would: beside it, then renamed into place.
void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path + ".new") << text;
  std::filesystem::rename(path + ".new", path);
}

TEST(TokenFile, ReadsRolesClusterAndUserScopes) {
  const std::string path = ::testing::TempDir() + "/scoped.tokens";
  WriteFile(path,
            "# scheduler of cluster a\n"
            "sched-a scheduler clusters=a\n"
            "\n"
            "tele-ab telemetry clusters=a,b\n"
            "alice-token sdk user=alice\n"
            "root-token operator\n");
  absl::StatusOr<std::vector<TokenGrant>> grants = ReadTokenFile(path, std::nullopt);
  ASSERT_TRUE(grants.ok()) << grants.status();
  ASSERT_EQ(grants->size(), 4u);
  EXPECT_EQ((*grants)[0].identity.role, Role::kScheduler);
  EXPECT_THAT((*grants)[1].identity.clusters, ::testing::ElementsAre("a", "b"));
  EXPECT_EQ((*grants)[2].identity.user, "alice");
  EXPECT_EQ((*grants)[2].identity.UserScope(), "alice");
  EXPECT_EQ((*grants)[3].identity.UserScope(), std::nullopt);
  std::remove(path.c_str());
}

TEST(TokenFile, NamesTheLineOfABadEntryButNeverTheToken) {
  const std::string path = ::testing::TempDir() + "/bad.tokens";
  WriteFile(path, "good-one scheduler\nsecret-xyz superuser\n");
  absl::StatusOr<std::vector<TokenGrant>> grants = ReadTokenFile(path, std::nullopt);
  ASSERT_FALSE(grants.ok());
  EXPECT_THAT(grants.status().message(), ::testing::HasSubstr("line 2"));
  EXPECT_THAT(grants.status().message(), ::testing::HasSubstr("\"superuser\""));
  EXPECT_THAT(grants.status().message(), ::testing::Not(::testing::HasSubstr("secret-xyz")));
  WriteFile(path, "secret-xyz scheduler clusterz=a\n");
  grants = ReadTokenFile(path, std::nullopt);
  ASSERT_FALSE(grants.ok());
  EXPECT_THAT(grants.status().message(), ::testing::HasSubstr("clusterz=a"));
  EXPECT_THAT(grants.status().message(), ::testing::Not(::testing::HasSubstr("secret-xyz")));
  std::remove(path.c_str());
}

TEST(Identity, ClusterScopeRefusalNamesTheScope) {
  Identity scoped{.role = Role::kScheduler, .clusters = {"a"}};
  EXPECT_TRUE(scoped.CheckCluster("a").ok());
  absl::Status refused = scoped.CheckCluster("b");
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(refused.message(), ::testing::HasSubstr("limited to cluster a"));
  EXPECT_THAT(refused.message(), ::testing::HasSubstr("\"b\""));
  EXPECT_TRUE(Identity{.role = Role::kScheduler}.CheckCluster("b").ok());
}

TEST(AuthPolicy, PicksUpAChangedTokenFileAndKeepsTheOldTokensWhenItBreaks) {
  const std::string path = ::testing::TempDir() + "/reloaded.tokens";
  WriteFile(path, "first-token scheduler clusters=a\n");
  AuthConfig config;
  config.enabled = true;
  config.files.push_back({path, ""});
  absl::StatusOr<std::unique_ptr<AuthPolicy>> policy = AuthPolicy::Create(config);
  ASSERT_TRUE(policy.ok()) << policy.status();
  std::optional<Identity> first = (*policy)->Identify("Bearer first-token");
  ASSERT_TRUE(first.has_value());
  EXPECT_THAT(first->clusters, ::testing::ElementsAre("a"));

  WriteFile(path, "second-token telemetry clusters=b\n");
  // The file is looked at again at most once a second: poll until the change is seen.
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while ((*policy)->Identify("Bearer second-token") == std::nullopt && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  std::optional<Identity> second = (*policy)->Identify("Bearer second-token");
  ASSERT_TRUE(second.has_value()) << "the changed token file was not reloaded";
  EXPECT_EQ(second->role, Role::kTelemetry);
  EXPECT_FALSE((*policy)->Identify("Bearer first-token").has_value());

  // A broken file leaves the tokens in force.
  WriteFile(path, "third-token nosuchrole\n");
  absl::SleepFor(absl::Milliseconds(1100));
  EXPECT_TRUE((*policy)->Identify("Bearer second-token").has_value());
  EXPECT_FALSE((*policy)->Identify("Bearer third-token").has_value());
  std::remove(path.c_str());
}

TEST(Roles, ParseAndName) {
  EXPECT_EQ(*ParseRole("sdk"), Role::kSdk);
  EXPECT_EQ(RoleName(Role::kTelemetry), "telemetry");
  EXPECT_FALSE(ParseRole("root").ok());
}

}  // namespace
}  // namespace goodput::platform

namespace goodput::platform {
namespace {

TEST(TokenFile, ReadsTeamScopesAndRefusesAnOperatorLimitedToAUser) {
  const std::string path = ::testing::TempDir() + "/team.tokens";
  WriteFile(path, "ml-token sdk clusters=a team=ml\n");
  absl::StatusOr<std::vector<TokenGrant>> grants = ReadTokenFile(path, std::nullopt);
  ASSERT_TRUE(grants.ok()) << grants.status();
  EXPECT_EQ((*grants)[0].identity.TeamScope(), "ml");
  EXPECT_TRUE((*grants)[0].identity.OwnerScoped());
  EXPECT_EQ((*grants)[0].identity.Describe(), "the sdk token limited to cluster a, team ml");
  for (const char* line : {"secret-op operator user=alice\n", "secret-op operator team=ml\n",
                           "secret-op sdk team=\n"}) {
    WriteFile(path, line);
    grants = ReadTokenFile(path, std::nullopt);
    ASSERT_FALSE(grants.ok()) << line;
    EXPECT_THAT(grants.status().message(), ::testing::HasSubstr("line 1"));
    EXPECT_THAT(grants.status().message(), ::testing::Not(::testing::HasSubstr("secret-op")));
  }
  std::remove(path.c_str());
}

TEST(Identity, ChecksAJobsClusterAndOwner) {
  const Identity alice{.role = Role::kScheduler, .clusters = {"a"}, .user = "alice"};
  EXPECT_TRUE(alice.CheckJob("a", "1", "alice", "ml").ok());
  absl::Status other_user = alice.CheckJob("a", "2", "bob", "ml");
  EXPECT_EQ(other_user.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(other_user.message(), ::testing::HasSubstr("limited to cluster a, user alice"));
  EXPECT_THAT(other_user.message(), ::testing::HasSubstr("job a/2"));
  EXPECT_EQ(alice.CheckJob("b", "1", "alice", "ml").code(), absl::StatusCode::kPermissionDenied);
  const Identity ml{.role = Role::kSdk, .team = "ml"};
  EXPECT_TRUE(ml.CheckJob("z", "1", "anyone", "ml").ok());
  EXPECT_FALSE(ml.CheckJob("z", "1", "anyone", "other").ok());
  // An operator is limited by clusters only.
  const Identity op{.role = Role::kOperator, .user = "root"};
  EXPECT_TRUE(op.CheckJob("z", "1", "bob", "other").ok());
  EXPECT_FALSE(op.Restricted());
}

TEST(Identity, NarrowsListFiltersToItsScope) {
  const Identity alice{.role = Role::kScheduler, .clusters = {"a"}, .user = "alice"};
  std::string cluster, user, team;
  ASSERT_TRUE(alice.NarrowFilters("ListJobs", &cluster, &user, &team).ok());
  EXPECT_EQ(cluster, "a");
  EXPECT_EQ(user, "alice");
  EXPECT_EQ(team, "");
  user = "bob";
  absl::Status refused = alice.NarrowFilters("ListJobs", &cluster, &user, &team);
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(refused.message(), ::testing::HasSubstr("user \"bob\" is outside its scope"));
  // A filter the request does not have cannot hold the scope.
  user.clear();
  EXPECT_EQ(alice.NarrowFilters("GetFleetReport", &cluster, nullptr, nullptr).code(),
            absl::StatusCode::kPermissionDenied);
  // Several clusters: the request names one.
  const Identity two{.role = Role::kScheduler, .clusters = {"a", "b"}};
  std::string none;
  refused = two.NarrowFilters("ListJobs", &none, nullptr, nullptr);
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(refused.message(), ::testing::HasSubstr("names one of its clusters"));
  std::string b = "b";
  EXPECT_TRUE(two.NarrowFilters("ListJobs", &b, nullptr, nullptr).ok());
}

TEST(AuthPolicy, RefusesScopedTokensTheMethodsTheirScopeCannotReach) {
  const std::string path = ::testing::TempDir() + "/scoped-policy.tokens";
  WriteFile(path,
            "tele-a telemetry clusters=a\n"
            "tele-alice telemetry user=alice\n"
            "op-a operator clusters=a\n"
            "op operator\n");
  AuthConfig config;
  config.enabled = true;
  config.files.push_back({.path = path, .role = ""});
  absl::StatusOr<std::unique_ptr<AuthPolicy>> policy = AuthPolicy::Create(config);
  ASSERT_TRUE(policy.ok()) << policy.status();
  (*policy)->AllowMethod("/x.S/Push", {Role::kTelemetry}, ScopeKind::kCluster);
  (*policy)->AllowMethod("/x.S/Fleet", {Role::kTelemetry}, ScopeKind::kFleet);
  (*policy)->AllowMethod("/x.S/Undeclared", {Role::kTelemetry});
  EXPECT_TRUE((*policy)->Authorize("/x.S/Push", "Bearer tele-a").ok());
  absl::Status owner = (*policy)->Authorize("/x.S/Push", "Bearer tele-alice");
  EXPECT_EQ(owner.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(owner.message(), ::testing::HasSubstr("limited to user alice"));
  EXPECT_THAT(owner.message(), ::testing::Not(::testing::HasSubstr("tele-alice")));
  EXPECT_EQ((*policy)->Authorize("/x.S/Fleet", "Bearer tele-a").code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ((*policy)->Authorize("/x.S/Fleet", "Bearer op-a").code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE((*policy)->Authorize("/x.S/Fleet", "Bearer op").ok());
  absl::Status undeclared = (*policy)->Authorize("/x.S/Undeclared", "Bearer tele-a");
  EXPECT_EQ(undeclared.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(undeclared.message(), ::testing::HasSubstr("declares no scope"));
  std::remove(path.c_str());
}

}  // namespace
}  // namespace goodput::platform
