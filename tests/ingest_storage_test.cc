// The ingest service's storage against a real PostgreSQL: partitions created ahead and
// dropped by retention, batch ids forgotten after the retry horizon, and GPU fault events
// deleted by their own, longer retention.

#include <gtest/gtest.h>

#include "absl/time/clock.h"
#include "services/ingest/maintenance.h"
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

// Fault events older than ingest.fault_event_retention_days go, oldest first and in batches,
// at maintenance rounds; younger ones (and events older than the samples' retention) stay.
TEST(IngestStorageIntegration, FaultEventsAreDeletedByTheirOwnRetention) {
  auto pg = testing::PostgresServer::Create();
  ASSERT_TRUE(pg.ok()) << pg.status();
  ASSERT_TRUE((*pg)->CreateDatabase("goodput").ok());
  const std::string dsn = (*pg)->Dsn("goodput");
  ASSERT_TRUE(platform::ApplyMigrations(dsn, std::string(GOODPUT_SOURCE_DIR) + "/migrations").ok());
  auto pool = platform::PgPool::Create({.dsn = dsn});
  ASSERT_TRUE(pool.ok());
  SampleStore store(pool->get());
  const int64_t now = absl::ToUnixMillis(absl::Now());
  // 25 events, 1 to 385 days old in steps of 16 days.
  ASSERT_TRUE((*pg)
                  ->Execute("goodput",
                            "INSERT INTO gpu_fault_events (cluster, host, gpu_index, event_time, "
                            "signal, xid, value, count, batch_id, source) SELECT 'c', 'n', 0, "
                            "now() - (1 + 16 * i) * interval '1 day', 'xid', 79, 79, 1, 'b', "
                            "'grpc' FROM generate_series(0, 24) i")
                  .ok());
  SampleStore* samples = &store;
  Maintenance maintenance(
      samples, nullptr,
      {.partitions_ahead_days = 1,
       .retention_ms = 30 * kDayMs,
       .batch_id_retention_ms = 0,
       .fault_event_retention_ms = 365 * kDayMs,
       .fault_events_per_delete = 1,
       .fault_event_deletes_per_round = 1,
       .silent_job_after_ms = 0},
      [now] { return now; }, platform::Logger());
  // 23 within a year (1 .. 353 days), 2 older (369, 385: one per round here).
  ASSERT_TRUE(maintenance.RunOnce().ok());
  EXPECT_EQ(*(*pg)->QueryValue("goodput", "SELECT count(*) FROM gpu_fault_events"), "24");
  ASSERT_TRUE(maintenance.RunOnce().ok());
  EXPECT_EQ(*(*pg)->QueryValue("goodput", "SELECT count(*) FROM gpu_fault_events"), "23");
  EXPECT_EQ(*(*pg)->QueryValue("goodput",
                               "SELECT count(*) FROM gpu_fault_events WHERE "
                               "event_time < now() - interval '365 days'"),
            "0");
  ASSERT_TRUE(maintenance.RunOnce().ok());
  EXPECT_EQ(*(*pg)->QueryValue("goodput", "SELECT count(*) FROM gpu_fault_events"), "23");
}

}  // namespace
}  // namespace goodput::ingest
