// RedisClient against a real redis-server: the operations caches, dedup keys, rate limits
// and leases rely on, thread safety, and recovery after the server restarts.

#include "services/platform/redis_client.h"

#include <gtest/gtest.h>

#include <thread>

#include "tests/support/redis_server.h"
#include "tests/support/test_steps.h"

namespace goodput::platform {
namespace {

using ::goodput::testing::PollUntil;
using ::goodput::testing::RedisServer;

class RedisClientIntegration : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(::goodput::testing::StartRedis(&redis_));
    auto client = RedisClient::Create({.host = redis_->host(),
                                       .port = redis_->port(),
                                       .min_reconnect_backoff = absl::Milliseconds(10),
                                       .max_reconnect_backoff = absl::Milliseconds(200),
                                       .key_prefix = "test:"});
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
  }

  std::unique_ptr<RedisServer> redis_;
  std::unique_ptr<RedisClient> client_;
};

TEST_F(RedisClientIntegration, SetGetDeleteWithPrefix) {
  ASSERT_TRUE(client_->Set("a", std::string("bin\0ary", 7)).ok());
  auto value = client_->Get("a");
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(value->value_or(""), std::string("bin\0ary", 7));
  auto raw = client_->Command({"EXISTS", "test:a"});
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ(*raw->AsInt(), 1);
  EXPECT_EQ(*client_->Delete({"a", "missing"}), 1);
  auto gone = client_->Get("a");
  ASSERT_TRUE(gone.ok());
  EXPECT_FALSE(gone->has_value());
}

TEST_F(RedisClientIntegration, TtlsAreSet) {
  ASSERT_TRUE(client_->Set("cached", "v", absl::Seconds(100)).ok());
  auto pttl = client_->Command({"PTTL", "test:cached"});
  ASSERT_TRUE(pttl.ok());
  EXPECT_GT(*pttl->AsInt(), 0);
  EXPECT_LE(*pttl->AsInt(), 100000);
  ASSERT_TRUE(client_->Set("plain", "v").ok());
  EXPECT_TRUE(*client_->Expire("plain", absl::Seconds(50)));
  EXPECT_FALSE(*client_->Expire("absent", absl::Seconds(50)));
}

TEST_F(RedisClientIntegration, SetIfAbsentDeduplicates) {
  EXPECT_TRUE(*client_->SetIfAbsent("batch:17", "1", absl::Minutes(10)));
  EXPECT_FALSE(*client_->SetIfAbsent("batch:17", "1", absl::Minutes(10)));
}

TEST_F(RedisClientIntegration, IncrementInWindowCountsAndExpiresTheWindow) {
  EXPECT_EQ(*client_->IncrementInWindow("rate:alice", absl::Seconds(60)), 1);
  EXPECT_EQ(*client_->IncrementInWindow("rate:alice", absl::Seconds(60), 4), 5);
  auto pttl = client_->Command({"PTTL", "test:rate:alice"});
  ASSERT_TRUE(pttl.ok());
  EXPECT_GT(*pttl->AsInt(), 0);
}

TEST_F(RedisClientIntegration, ErrorRepliesAreStatuses) {
  ASSERT_TRUE(client_->Set("text", "abc").ok());
  auto incr = client_->Increment("text");
  ASSERT_FALSE(incr.ok());
  EXPECT_EQ(incr.status().code(), absl::StatusCode::kFailedPrecondition) << incr.status();
  EXPECT_TRUE(client_->Ping().ok());  // the connection survived the error reply
}

TEST_F(RedisClientIntegration, LeaseIsExclusiveAndOnlyTheOwnerRenewsOrReleasesIt) {
  EXPECT_TRUE(*client_->AcquireLease("shard:3", "replica-a", absl::Seconds(30)));
  EXPECT_FALSE(*client_->AcquireLease("shard:3", "replica-b", absl::Seconds(30)));
  EXPECT_TRUE(*client_->RenewLease("shard:3", "replica-a", absl::Seconds(30)));
  EXPECT_FALSE(*client_->RenewLease("shard:3", "replica-b", absl::Seconds(30)));
  EXPECT_FALSE(*client_->ReleaseLease("shard:3", "replica-b"));
  EXPECT_TRUE(*client_->ReleaseLease("shard:3", "replica-a"));
  EXPECT_FALSE(*client_->RenewLease("shard:3", "replica-a", absl::Seconds(30)));
  EXPECT_TRUE(*client_->AcquireLease("shard:3", "replica-b", absl::Seconds(30)));
}

TEST_F(RedisClientIntegration, ExpiredLeaseCanBeTakenByAnother) {
  EXPECT_TRUE(*client_->AcquireLease("shard:1", "replica-a", absl::Milliseconds(30)));
  EXPECT_TRUE(
      PollUntil([&] { return *client_->AcquireLease("shard:1", "replica-b", absl::Seconds(30)); },
                absl::Seconds(10)));
  EXPECT_FALSE(*client_->RenewLease("shard:1", "replica-a", absl::Seconds(30)));
}

TEST_F(RedisClientIntegration, ConcurrentCallersShareTheClient) {
  constexpr int kThreads = 8;
  constexpr int kPerThread = 200;
  std::vector<std::thread> threads;
  std::atomic<int> failures = 0;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kPerThread; ++i) {
        if (!client_->Increment("counter").ok()) failures.fetch_add(1);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(client_->Get("counter")->value_or(""), std::to_string(kThreads * kPerThread));
  EXPECT_LE(client_->Stats().open_connections, client_->options().max_connections);
}

TEST_F(RedisClientIntegration, RecoversAfterTheServerRestarts) {
  ASSERT_TRUE(client_->Set("before", "1").ok());
  ASSERT_TRUE(redis_->Stop().ok());
  auto while_down = client_->Get("before");
  ASSERT_FALSE(while_down.ok());
  EXPECT_EQ(while_down.status().code(), absl::StatusCode::kUnavailable) << while_down.status();

  ASSERT_TRUE(redis_->Start().ok());
  absl::Status last;
  EXPECT_TRUE(
      PollUntil([&] { return (last = client_->Set("after", "2")).ok(); }, absl::Seconds(20)))
      << last;
  EXPECT_EQ(client_->Get("after")->value_or(""), "2");
}

TEST_F(RedisClientIntegration, FirstCommandAfterARestartSucceedsOnAFreshConnection) {
  ASSERT_TRUE(client_->Increment("n").ok());
  ASSERT_TRUE(redis_->Restart().ok());
  // Not idempotent, so not retried: the client must notice the dead connection before
  // sending rather than after.
  auto n = client_->Increment("n");
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 1);  // no persistence: the restarted server starts empty
  EXPECT_GE(client_->Stats().broken_dropped, 1);
}

TEST_F(RedisClientIntegration, DataSurvivesRestartWithPersistence) {
  auto server = RedisServer::Create({.persistence = true});
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = RedisClient::Create({.port = (*server)->port()});
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE((*client)->Set("kept", "yes").ok());
  ASSERT_TRUE((*server)->Restart().ok());
  absl::StatusOr<std::optional<std::string>> value;
  EXPECT_TRUE(PollUntil([&] { return (value = (*client)->Get("kept")).ok(); }, absl::Seconds(20)));
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(value->value_or(""), "yes");
}

}  // namespace
}  // namespace goodput::platform
