// PgPool against a real PostgreSQL: transactions, bounds, and recovery after the server
// restarts or drops the connection, all without recreating the pool.

#include "services/platform/pg_pool.h"

#include <gtest/gtest.h>

#include <atomic>

#include "tests/support/postgres_server.h"
#include "tests/support/test_steps.h"

namespace goodput::platform {
namespace {

using ::goodput::testing::PollUntil;
using ::goodput::testing::PostgresServer;

class PgPoolIntegration : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(::goodput::testing::StartPostgres(&pg_));
    ASSERT_TRUE(
        pg_->Execute("goodput", "CREATE TABLE events (id bigint PRIMARY KEY, note text)").ok());
  }

  std::unique_ptr<PgPool> MakePool(PgPoolOptions options = {}) {
    options.dsn = pg_->Dsn("goodput");
    auto pool = PgPool::Create(std::move(options));
    EXPECT_TRUE(pool.ok()) << pool.status();
    return pool.ok() ? *std::move(pool) : nullptr;
  }

  absl::Status Insert(PgPool& pool, int64_t id) {
    return pool.RunTransaction([&](pqxx::work& txn) {
      txn.exec_params("INSERT INTO events (id, note) VALUES ($1, 'x')", id);
      return absl::OkStatus();
    });
  }

  int64_t CountEvents() {
    auto value = pg_->QueryValue("goodput", "SELECT count(*) FROM events");
    EXPECT_TRUE(value.ok()) << value.status();
    return value.ok() ? std::stoll(*value) : -1;
  }

  std::unique_ptr<PostgresServer> pg_;
};

TEST_F(PgPoolIntegration, CommitsWhenTheFunctionSucceedsAndRollsBackWhenItFails) {
  auto pool = MakePool();
  ASSERT_TRUE(Insert(*pool, 1).ok());
  absl::Status refused = pool->RunTransaction([&](pqxx::work& txn) {
    txn.exec("INSERT INTO events (id) VALUES (2)");
    return absl::InvalidArgumentError("caller changed its mind");
  });
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CountEvents(), 1);
}

TEST_F(PgPoolIntegration, SqlErrorsBecomeStatusesNotExceptions) {
  auto pool = MakePool();
  ASSERT_TRUE(Insert(*pool, 7).ok());
  absl::Status duplicate = Insert(*pool, 7);
  EXPECT_EQ(duplicate.code(), absl::StatusCode::kAlreadyExists) << duplicate;
  EXPECT_NE(duplicate.message().find("23505"), std::string::npos) << duplicate;
  absl::Status syntax = pool->Execute("SELEKT 1");
  EXPECT_EQ(syntax.code(), absl::StatusCode::kInternal) << syntax;
}

TEST_F(PgPoolIntegration, RunsPreparedStatementsOnEveryConnection) {
  auto pool = MakePool(
      {.max_connections = 2,
       .prepared_statements = {{"insert_event", "INSERT INTO events (id, note) VALUES ($1, $2)"}}});
  auto a = pool->Acquire();
  auto b = pool->Acquire();
  ASSERT_TRUE(a.ok() && b.ok());
  for (auto* lease : {&*a, &*b}) {
    pqxx::work txn(lease->connection());
    txn.exec_prepared("insert_event", lease == &*a ? 1 : 2, "prepared");
    txn.commit();
  }
  EXPECT_EQ(CountEvents(), 2);
}

TEST_F(PgPoolIntegration, BorrowingFromAnExhaustedPoolIsResourceExhausted) {
  auto pool = MakePool({.max_connections = 1, .acquire_timeout = absl::Milliseconds(50)});
  auto held = pool->Acquire();
  ASSERT_TRUE(held.ok()) << held.status();
  auto second = pool->Acquire();
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kResourceExhausted) << second.status();
  held = absl::UnavailableError("returned");  // gives the connection back
  EXPECT_TRUE(pool->Acquire().ok());
}

TEST_F(PgPoolIntegration, QueriesFailWhileDownAndSucceedAfterRestartWithTheSamePool) {
  auto pool = MakePool({.min_reconnect_backoff = absl::Milliseconds(20),
                        .max_reconnect_backoff = absl::Milliseconds(200)});
  ASSERT_TRUE(Insert(*pool, 1).ok());

  ASSERT_TRUE(pg_->Stop().ok());
  absl::Status while_down = Insert(*pool, 2);
  EXPECT_EQ(while_down.code(), absl::StatusCode::kUnavailable) << while_down;
  EXPECT_EQ(pool->Ping().code(), absl::StatusCode::kUnavailable);

  ASSERT_TRUE(pg_->Start().ok());
  absl::Status last;
  EXPECT_TRUE(PollUntil([&] { return (last = Insert(*pool, 3)).ok(); }, absl::Seconds(30)))
      << "last error: " << last;
  EXPECT_TRUE(pool->Ping().ok());
  EXPECT_EQ(CountEvents(), 2);  // rows 1 and 3; row 2 was refused, not half-written
  EXPECT_GE(pool->Stats().connect_failures + pool->Stats().broken_dropped, 1);
}

TEST_F(PgPoolIntegration, FirstTransactionAfterARestartSucceedsByRetryingOnANewConnection) {
  auto pool = MakePool({.max_connections = 4});
  {
    // Fill the pool with idle connections that the restart will break.
    std::vector<PgPool::Lease> leases;
    for (int i = 0; i < 4; ++i) {
      auto lease = pool->Acquire();
      ASSERT_TRUE(lease.ok()) << lease.status();
      leases.push_back(*std::move(lease));
    }
  }
  ASSERT_EQ(pool->Stats().idle_connections, 4);
  ASSERT_TRUE(pg_->Restart().ok());

  absl::Status status = Insert(*pool, 10);
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(CountEvents(), 1);
  EXPECT_GE(pool->Stats().broken_dropped, 1);
}

TEST_F(PgPoolIntegration, ConnectionKilledBeforeCommitIsRetriedAndAppliedOnce) {
  auto pool = MakePool();
  std::atomic<int> calls = 0;
  absl::Status status = pool->RunTransaction([&](pqxx::work& txn) {
    txn.exec("INSERT INTO events (id, note) VALUES (42, 'once')");
    if (calls.fetch_add(1) == 0) {
      // The server drops this session mid-transaction, as on a failover.
      txn.exec("SELECT pg_terminate_backend(pg_backend_pid())");
    }
    return absl::OkStatus();
  });
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(calls.load(), 2);
  EXPECT_EQ(CountEvents(), 1);
}

TEST_F(PgPoolIntegration, StatementTimeoutIsDeadlineExceeded) {
  auto pool = MakePool({.statement_timeout = absl::Milliseconds(100)});
  absl::Status status = pool->RunTransaction([&](pqxx::work& txn) {
    txn.exec("SELECT pg_sleep(5)");
    return absl::OkStatus();
  });
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_TRUE(Insert(*pool, 5).ok());  // the connection is still usable
}

}  // namespace
}  // namespace goodput::platform
