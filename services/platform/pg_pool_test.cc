#include "services/platform/pg_pool.h"

#include <gtest/gtest.h>

namespace goodput::platform {
namespace {

TEST(PgPool, RefusesAnEmptyDsn) {
  auto pool = PgPool::Create({});
  ASSERT_FALSE(pool.ok());
  EXPECT_EQ(pool.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(pool.status().message().find("dsn"), std::string::npos);
}

TEST(PgPool, RefusesAZeroSizedPoolNamingTheField) {
  auto pool = PgPool::Create({.dsn = "host=127.0.0.1", .max_connections = 0});
  ASSERT_FALSE(pool.ok());
  EXPECT_EQ(pool.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(pool.status().message().find("max_connections=0"), std::string::npos);
}

TEST(PgPool, CreatingOpensNoConnection) {
  auto pool = PgPool::Create({.dsn = "host=127.0.0.1 port=1 dbname=none"});
  ASSERT_TRUE(pool.ok()) << pool.status();
  EXPECT_EQ((*pool)->Stats().open_connections, 0);
  EXPECT_EQ((*pool)->Stats().connects, 0);
}

TEST(PgPool, UnreachableServerIsUnavailableAndBacksOff) {
  // Nothing listens on port 1 of the loopback: the connection is refused at once.
  auto pool = PgPool::Create({.dsn = "host=127.0.0.1 port=1 dbname=none",
                              .min_reconnect_backoff = absl::Seconds(30),
                              .max_reconnect_backoff = absl::Seconds(60)});
  ASSERT_TRUE(pool.ok()) << pool.status();
  auto first = (*pool)->Acquire();
  ASSERT_FALSE(first.ok());
  EXPECT_EQ(first.status().code(), absl::StatusCode::kUnavailable) << first.status();
  // Within the backoff the pool does not hammer the server: it fails without connecting.
  auto second = (*pool)->Acquire();
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find("next attempt in"), std::string::npos)
      << second.status();
  EXPECT_EQ((*pool)->Stats().connect_failures, 1);
  EXPECT_EQ((*pool)->Stats().open_connections, 0);
}

TEST(PgPool, RunTransactionReportsUnavailableWhenTheServerIsDown) {
  auto pool = PgPool::Create({.dsn = "host=127.0.0.1 port=1 dbname=none",
                              .min_reconnect_backoff = absl::Milliseconds(1),
                              .max_reconnect_backoff = absl::Milliseconds(2),
                              .max_attempts = 2});
  ASSERT_TRUE(pool.ok());
  bool ran = false;
  absl::Status status = (*pool)->RunTransaction([&](pqxx::work&) {
    ran = true;
    return absl::OkStatus();
  });
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_FALSE(ran);
  EXPECT_NE(status.message().find("2 attempts"), std::string::npos) << status;
}

TEST(PgExceptionToStatus, MapsSqlStatesToCodes) {
  struct Case {
    const char* sqlstate;
    absl::StatusCode code;
  };
  for (const Case& c :
       {Case{"23505", absl::StatusCode::kAlreadyExists},
        Case{"23503", absl::StatusCode::kFailedPrecondition},
        Case{"22P02", absl::StatusCode::kInvalidArgument},
        Case{"40001", absl::StatusCode::kAborted}, Case{"40P01", absl::StatusCode::kAborted},
        Case{"57014", absl::StatusCode::kDeadlineExceeded},
        Case{"53200", absl::StatusCode::kResourceExhausted},
        Case{"57P01", absl::StatusCode::kUnavailable},
        Case{"08006", absl::StatusCode::kUnavailable},
        Case{"XX000", absl::StatusCode::kInternal}}) {
    pqxx::sql_error error("boom", "SELECT 1", c.sqlstate);
    absl::Status status = PgExceptionToStatus(error, "inserting job");
    EXPECT_EQ(status.code(), c.code) << c.sqlstate << ": " << status;
    EXPECT_NE(status.message().find("inserting job"), std::string::npos);
    EXPECT_NE(status.message().find(c.sqlstate), std::string::npos);
  }
}

TEST(PgExceptionToStatus, BrokenConnectionIsUnavailableAndInDoubtIsUnknown) {
  EXPECT_EQ(PgExceptionToStatus(pqxx::broken_connection("gone"), "x").code(),
            absl::StatusCode::kUnavailable);
  EXPECT_TRUE(IsPgConnectionFailure(pqxx::broken_connection("gone")));
  absl::Status in_doubt = PgExceptionToStatus(pqxx::in_doubt_error("lost during commit"), "x");
  EXPECT_EQ(in_doubt.code(), absl::StatusCode::kUnknown);
  EXPECT_NE(in_doubt.message().find("outcome unknown"), std::string::npos);
  EXPECT_EQ(PgExceptionToStatus(std::runtime_error("other"), "x").code(),
            absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace goodput::platform
