#include "services/platform/redis_client.h"

#include <gtest/gtest.h>

namespace goodput::platform {
namespace {

TEST(RedisClient, RefusesAPortOutOfRangeNamingIt) {
  auto client = RedisClient::Create({.port = 70000});
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(client.status().message().find("port=70000"), std::string::npos);
}

TEST(RedisClient, RefusesAnEmptyHost) {
  auto client = RedisClient::Create({.host = ""});
  ASSERT_FALSE(client.ok());
  EXPECT_NE(client.status().message().find("host"), std::string::npos);
}

TEST(RedisClient, UnreachableServerIsUnavailableAndBacksOff) {
  auto client = RedisClient::Create({.host = "127.0.0.1",
                                     .port = 1,
                                     .min_reconnect_backoff = absl::Seconds(30),
                                     .max_reconnect_backoff = absl::Seconds(60)});
  ASSERT_TRUE(client.ok()) << client.status();
  auto first = (*client)->Get("k");
  ASSERT_FALSE(first.ok());
  EXPECT_EQ(first.status().code(), absl::StatusCode::kUnavailable) << first.status();
  auto second = (*client)->Ping();
  EXPECT_EQ(second.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(second.message().find("next attempt in"), std::string::npos) << second;
  EXPECT_EQ((*client)->Stats().connect_failures, 1);
}

TEST(RedisClient, RefusesZeroTtlBeforeTalkingToTheServer) {
  auto client = RedisClient::Create({.port = 1});
  ASSERT_TRUE(client.ok());
  absl::Status status = (*client)->Set("k", "v", absl::ZeroDuration());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("ttl=0"), std::string::npos) << status;
  EXPECT_EQ((*client)->Stats().connect_failures, 0);
}

TEST(RedisReply, AccessorsNameTheActualType) {
  RedisReply reply{.value = std::string("abc")};
  EXPECT_EQ(*reply.AsString(), "abc");
  auto as_int = reply.AsInt();
  ASSERT_FALSE(as_int.ok());
  EXPECT_NE(as_int.status().message().find("string"), std::string::npos);
  RedisReply nil;
  EXPECT_TRUE(nil.IsNil());
  RedisReply status{.value = RedisReply::Status{"OK"}};
  EXPECT_EQ(*status.AsString(), "OK");
}

}  // namespace
}  // namespace goodput::platform
