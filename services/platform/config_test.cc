#include "services/platform/config.h"

#include <cstdio>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace goodput::platform {
namespace {

using ::testing::HasSubstr;

constexpr char kYaml[] = R"(
service:
  name: goodput-ofu
grpc:
  port: 50051
postgres:
  dsn: "host=db dbname=goodput"
  pool_size: 8
redis:
  host: cache
log:
  format: text
ofu:
  window_s: 60
  replicas: [a, b]
)";

TEST(ConfigTree, ReadsTypedValuesAndDefaults) {
  absl::StatusOr<ConfigTree> tree = ConfigTree::LoadString(kYaml);
  ASSERT_TRUE(tree.ok()) << tree.status();
  EXPECT_EQ(*tree->GetInt("grpc.port", 0), 50051);
  EXPECT_EQ(*tree->GetInt("ofu.window_s", 30), 60);
  EXPECT_EQ(*tree->GetInt("ofu.lateness_s", 120), 120);
  EXPECT_EQ(*tree->GetString("postgres.dsn", ""), "host=db dbname=goodput");
  EXPECT_THAT(*tree->GetStringList("ofu.replicas"), ::testing::ElementsAre("a", "b"));
  EXPECT_FALSE(*tree->GetBool("auth.enabled", false));
  EXPECT_TRUE(tree->Has("ofu.window_s"));
  EXPECT_FALSE(tree->Has("ofu.missing"));
}

TEST(ConfigTree, EnvironmentOverridesFileValues) {
  EnvironmentMap env = {{"GOODPUT_POSTGRES__DSN", "host=other"},
                        {"GOODPUT_POSTGRES__POOL_SIZE", "2"},
                        {"GOODPUT_OFU__SHARD__INDEX", "3"},
                        {"UNRELATED", "x"}};
  absl::StatusOr<ConfigTree> tree = ConfigTree::LoadString(kYaml, env);
  ASSERT_TRUE(tree.ok()) << tree.status();
  EXPECT_EQ(*tree->GetString("postgres.dsn", ""), "host=other");
  EXPECT_EQ(*tree->GetInt("postgres.pool_size", 4), 2);
  EXPECT_EQ(*tree->GetInt("ofu.shard.index", 0), 3);
  // Siblings of an overridden key survive.
  EXPECT_EQ(*tree->GetInt("ofu.window_s", 0), 60);
}

TEST(ConfigTree, MapsEnvironmentNamesToDottedKeys) {
  EXPECT_EQ(EnvVarToKey("GOODPUT_POSTGRES__DSN"), "postgres.dsn");
  EXPECT_EQ(EnvVarToKey("GOODPUT_REDIS__PASSWORD"), "redis.password");
  EXPECT_EQ(EnvVarToKey("GOODPUT_SHUTDOWN__DRAIN_TIMEOUT_S"), "shutdown.drain_timeout_s");
  EXPECT_EQ(EnvVarToKey("HOME"), std::nullopt);
  EXPECT_EQ(EnvVarToKey("GOODPUT_A____B"), std::nullopt);
}

TEST(ConfigTree, BadValueNamesKeyAndValue) {
  absl::StatusOr<ConfigTree> tree = ConfigTree::LoadString("grpc:\n  port: abc\n");
  ASSERT_TRUE(tree.ok());
  absl::StatusOr<ServiceConfig> config = ParseServiceConfig(*tree, "goodput-test");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(config.status().message(), "config key grpc.port: \"abc\" is not an integer");
}

TEST(ConfigTree, BadValueFromEnvironmentNamesKey) {
  absl::StatusOr<ConfigTree> tree = ConfigTree::LoadString("", {{"GOODPUT_HTTP__PORT", "70000"}});
  ASSERT_TRUE(tree.ok());
  absl::StatusOr<ServiceConfig> config = ParseServiceConfig(*tree, "goodput-test");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(), HasSubstr("config key http.port: \"70000\""));
  EXPECT_THAT(config.status().message(), HasSubstr("[0, 65535]"));
}

TEST(ConfigTree, RefusesUnknownLogFormat) {
  absl::StatusOr<ConfigTree> tree = ConfigTree::LoadString("log:\n  format: xml\n");
  absl::StatusOr<ServiceConfig> config = ParseServiceConfig(*tree, "goodput-test");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(), HasSubstr("config key log.format: \"xml\""));
}

TEST(ConfigTree, MalformedYamlNamesTheLine) {
  absl::StatusOr<ConfigTree> tree = ConfigTree::LoadString("grpc:\n  port: [1, 2\n");
  ASSERT_FALSE(tree.ok());
  EXPECT_THAT(tree.status().message(), HasSubstr("line"));
}

TEST(ServiceConfig, ParsesCommonKeysWithDefaults) {
  absl::StatusOr<ConfigTree> tree = ConfigTree::LoadString(kYaml);
  absl::StatusOr<ServiceConfig> config = ParseServiceConfig(*tree, "fallback", {"ofu"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->service_name, "goodput-ofu");
  EXPECT_EQ(config->grpc_port, 50051);
  EXPECT_EQ(config->http_port, 0);
  EXPECT_EQ(config->postgres.pool_size, 8);
  EXPECT_EQ(config->redis.host, "cache");
  EXPECT_EQ(config->redis.port, 6379);
  EXPECT_EQ(config->log.format, LogFormat::kText);
  EXPECT_FALSE(config->auth.enabled);
  EXPECT_EQ(config->shutdown_drain_timeout, absl::Seconds(10));
  EXPECT_TRUE(config->warnings.empty());
}

TEST(ServiceConfig, ReadsHttpLimitsAndTheProbePort) {
  absl::StatusOr<ConfigTree> tree = ConfigTree::LoadString(kYaml);
  absl::StatusOr<ServiceConfig> config = ParseServiceConfig(*tree, "fallback", {"ofu"});
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->http_probe_port, -1) << "no probe listener unless configured";
  EXPECT_EQ(config->http_limits.threads, 16);
  EXPECT_EQ(config->http_limits.max_body_bytes, 1 << 20);
  EXPECT_EQ(config->http_limits.request_timeout, absl::Seconds(60));
  EXPECT_EQ(config->http_limits.header_timeout, absl::Seconds(10));
  EXPECT_EQ(config->http_limits.max_connections, 4096);
  EXPECT_EQ(config->http_limits.max_connections_per_client, 128);

  tree = ConfigTree::LoadString(
      "http:\n  port: 9000\n  probe_port: 9001\n  threads: 4\n  max_body_bytes: 2048\n"
      "  read_timeout_s: 0.5\n  header_timeout_s: 2\n  max_connections: 300\n"
      "  max_connections_per_client: 20\n",
      {{"GOODPUT_HTTP__MAX_QUEUED_CONNECTIONS", "3"}});
  config = ParseServiceConfig(*tree, "fallback");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->http_probe_port, 9001);
  EXPECT_EQ(config->http_limits.threads, 4);
  EXPECT_EQ(config->http_limits.max_queued_connections, 3);
  EXPECT_EQ(config->http_limits.max_body_bytes, 2048);
  EXPECT_EQ(config->http_limits.read_timeout, absl::Milliseconds(500));
  EXPECT_EQ(config->http_limits.header_timeout, absl::Seconds(2));
  EXPECT_EQ(config->http_limits.max_connections, 300);
  EXPECT_EQ(config->http_limits.max_connections_per_client, 20);

  tree = ConfigTree::LoadString("http:\n  max_connections_per_client: 0\n");
  config = ParseServiceConfig(*tree, "fallback");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(),
              HasSubstr("config key http.max_connections_per_client: \"0\""));

  tree = ConfigTree::LoadString("http:\n  idle_timeout_s: 0\n");
  config = ParseServiceConfig(*tree, "fallback");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(), HasSubstr("config key http.idle_timeout_s: \"0\""));

  tree = ConfigTree::LoadString("http:\n  port: 9000\n  probe_port: 9000\n");
  config = ParseServiceConfig(*tree, "fallback");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(), HasSubstr("config key http.probe_port: \"9000\""));
}

TEST(ServiceConfig, WarnsAboutUnknownTopLevelKeys) {
  absl::StatusOr<ConfigTree> tree = ConfigTree::LoadString(kYaml);
  absl::StatusOr<ServiceConfig> config = ParseServiceConfig(*tree, "fallback");
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_EQ(config->warnings.size(), 1u);
  EXPECT_THAT(config->warnings[0], HasSubstr("\"ofu\""));
}

// The installed configuration files name the installed migrations folder (deploy/etc/).
TEST(ServiceConfig, KnowsTheMigrationsSectionEveryServiceReads) {
  absl::StatusOr<ConfigTree> tree =
      ConfigTree::LoadString("migrations:\n  dir: /usr/share/goodput/migrations\n");
  ASSERT_TRUE(tree.ok()) << tree.status();
  absl::StatusOr<ServiceConfig> config = ParseServiceConfig(*tree, "goodput-ingest");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->warnings.empty()) << config->warnings[0];
}

TEST(ServiceConfig, ReadsTokensFromListsEnvironmentAndFiles) {
  std::string path = ::testing::TempDir() + "/operator.tokens";
  {
    std::ofstream out(path);
    out << "# operators\nop-token-1\n\n  op-token-2  \n";
  }
  absl::StatusOr<ConfigTree> tree = ConfigTree::LoadString(
      "auth:\n  enabled: true\n  tokens:\n    scheduler: [sched-1]\n  token_files:\n    "
      "operator: " +
          path + "\n",
      {{"GOODPUT_AUTH__TOKENS__SDK", "sdk-1, sdk-2"}});
  absl::StatusOr<ServiceConfig> config = ParseServiceConfig(*tree, "x");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->auth.enabled);
  using Pair = std::pair<std::string, std::string>;
  EXPECT_THAT(config->auth.tokens,
              ::testing::UnorderedElementsAre(Pair("sched-1", "scheduler"), Pair("sdk-1", "sdk"),
                                              Pair("sdk-2", "sdk"), Pair("op-token-1", "operator"),
                                              Pair("op-token-2", "operator")));
  std::remove(path.c_str());
}

TEST(ServiceConfig, RefusesUnknownRoleAndAuthWithoutTokens) {
  absl::StatusOr<ConfigTree> bad_role =
      ConfigTree::LoadString("auth:\n  tokens:\n    admin: [t]\n");
  absl::StatusOr<ServiceConfig> config = ParseServiceConfig(*bad_role, "x");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(), HasSubstr("config key auth.tokens.admin: \"admin\""));

  absl::StatusOr<ConfigTree> no_tokens = ConfigTree::LoadString("auth:\n  enabled: yes\n");
  config = ParseServiceConfig(*no_tokens, "x");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(), HasSubstr("auth.enabled"));
}

TEST(ConfigTree, LoadFileNamesMissingPath) {
  absl::StatusOr<ConfigTree> tree = ConfigTree::LoadFile("/nonexistent/goodput.yaml", {});
  ASSERT_FALSE(tree.ok());
  EXPECT_THAT(tree.status().message(), HasSubstr("/nonexistent/goodput.yaml"));
}

}  // namespace
}  // namespace goodput::platform
