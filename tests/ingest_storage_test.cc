// The ingest service's storage against a real PostgreSQL: partitions created ahead and
// dropped by retention, and batch ids forgotten after the retry horizon.

#include <gtest/gtest.h>

#include "absl/time/clock.h"
#include "services/ingest/sample_store.h"
#include "services/platform/migrations.h"
#include "services/platform/pg_pool.h"
#include "tests/support/postgres_server.h"

namespace goodput::ingest {
namespace {

constexpr int64_t kDayMs = 86'400'000;

TEST(IngestStorageIntegration, PartitionsAreCreatedAheadAndDroppedByRetention) {
  auto pg = testing::PostgresServer::Create();
  ASSERT_TRUE(pg.ok()) << pg.status();
  ASSERT_TRUE((*pg)->CreateDatabase("goodput").ok());
  const std::string dsn = (*pg)->Dsn("goodput");
  ASSERT_TRUE(platform::ApplyMigrations(dsn, std::string(GOODPUT_SOURCE_DIR) + "/migrations").ok());
  auto pool = platform::PgPool::Create({.dsn = dsn});
  ASSERT_TRUE(pool.ok());
  SampleStore store(pool->get());
  const int64_t now = absl::ToUnixMillis(absl::Now());

  auto created = store.CreatePartitions(now - 40 * kDayMs, now - 35 * kDayMs);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(*created, 6);

  Sample old;
  old.gpu = {.host = "n", .gpu_index = 0};
  old.time_unix_ms = now - 38 * kDayMs;
  old.set(SampleField::kTensorActive, 0.5);
  BatchWrite write{.batch_id = "old",
                   .cluster = "c",
                   .source = "grpc",
                   .samples = {&old},
                   .job_row_ids = {std::nullopt},
                   .refused_count = 0,
                   .hosts_seen = {}};
  ASSERT_TRUE(store.WriteBatch(write).ok());

  auto dropped = store.DropPartitionsBefore(now - 30 * kDayMs);
  ASSERT_TRUE(dropped.ok()) << dropped.status();
  EXPECT_EQ(*dropped, 6);
  EXPECT_EQ(*(*pg)->QueryValue("goodput", "SELECT count(*) FROM samples"), "0");

  // A write after the drop recreates what it needs.
  old.time_unix_ms = now - 1000;
  write.batch_id = "new";
  auto result = store.WriteBatch(write);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->stored_count, 1);

  auto forgotten = store.ForgetBatchesBefore(now + 60'000);
  ASSERT_TRUE(forgotten.ok());
  EXPECT_EQ(*forgotten, 2);
}

}  // namespace
}  // namespace goodput::ingest
