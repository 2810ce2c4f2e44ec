// The migration runner and the schema of migrations/ against a real PostgreSQL: applied
// once, edits refused, safe from concurrent runners; COPY into the partitioned samples
// table, partition maintenance and the GPU allocation overlap guard.

#include "services/platform/migrations.h"

#include <gtest/gtest.h>

#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "services/platform/pg_pool.h"
#include "tests/support/postgres_server.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_steps.h"

namespace goodput::platform {
namespace {

namespace fs = std::filesystem;
using ::goodput::testing::PostgresServer;
using ::goodput::testing::TempDir;

const fs::path kMigrationsDir = fs::path(GOODPUT_SOURCE_DIR) / "migrations";

class MigrationsIntegration : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(::goodput::testing::StartPostgres(&pg_));
    auto dir = TempDir::Create("goodput-migrations");
    ASSERT_TRUE(dir.ok());
    dir_ = std::make_unique<TempDir>(*std::move(dir));
  }

  void WriteFile(const std::string& name, const std::string& sql) {
    std::ofstream(dir_->path() / name) << sql;
  }

  std::string Query(const std::string& sql) { return ::goodput::testing::QueryScalar(*pg_, sql); }
  void Execute(const std::string& sql) {
    absl::Status s = pg_->Execute("goodput", sql);
    ASSERT_TRUE(s.ok()) << s << "\n" << sql;
  }

  std::unique_ptr<PostgresServer> pg_;
  std::unique_ptr<TempDir> dir_;
};

std::vector<std::string> Names(const std::vector<MigrationFile>& files) {
  std::vector<std::string> names;
  for (const auto& f : files) names.push_back(f.FileName());
  return names;
}

TEST_F(MigrationsIntegration, ProjectMigrationsApplyOnceAndASecondRunAppliesNothing) {
  auto files = LoadMigrationFiles(kMigrationsDir);
  ASSERT_TRUE(files.ok()) << files.status();
  ASSERT_FALSE(files->empty());

  auto first = ApplyMigrations(pg_->Dsn("goodput"), kMigrationsDir);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(Names(first->applied), Names(*files));
  EXPECT_TRUE(first->already_applied.empty());

  auto second = ApplyMigrations(pg_->Dsn("goodput"), kMigrationsDir);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_TRUE(second->applied.empty());
  EXPECT_EQ(Names(second->already_applied), Names(*files));

  EXPECT_EQ(Query("SELECT count(*) FROM schema_migrations"), std::to_string(files->size()));
  EXPECT_EQ(Query("SELECT checksum FROM schema_migrations WHERE version = 1"),
            (*files)[0].sha256_hex);
}

TEST_F(MigrationsIntegration, AnEditedAppliedFileIsRefusedByNameAndNothingElseRuns) {
  WriteFile("0001_first.sql", "CREATE TABLE first (id int);\n");
  ASSERT_TRUE(ApplyMigrations(pg_->Dsn("goodput"), dir_->path()).ok());

  WriteFile("0001_first.sql", "CREATE TABLE first (id bigint);\n");
  WriteFile("0002_second.sql", "CREATE TABLE second (id int);\n");
  auto run = ApplyMigrations(pg_->Dsn("goodput"), dir_->path());
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(run.status().message().find("0001_first.sql"), std::string::npos) << run.status();
  EXPECT_NE(run.status().message().find("edited"), std::string::npos) << run.status();
  EXPECT_EQ(Query("SELECT count(*) FROM schema_migrations"), "1");
  EXPECT_EQ(Query("SELECT to_regclass('second') IS NULL"), "t");
}

TEST_F(MigrationsIntegration, AFailingFileIsNamedAndEarlierOnesStayApplied) {
  WriteFile("0001_ok.sql", "CREATE TABLE ok (id int);\n");
  WriteFile("0002_broken.sql", "CREATE TABLE half (id int);\nCREATE TABLE oops (;\n");
  auto run = ApplyMigrations(pg_->Dsn("goodput"), dir_->path());
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("0002_broken.sql"), std::string::npos) << run.status();
  EXPECT_EQ(Query("SELECT string_agg(name, ',') FROM schema_migrations"), "ok");
  EXPECT_EQ(Query("SELECT to_regclass('half') IS NULL"), "t");  // its transaction rolled back

  WriteFile("0002_broken.sql", "CREATE TABLE half (id int);\n");  // never applied: may be fixed
  auto fixed = ApplyMigrations(pg_->Dsn("goodput"), dir_->path());
  ASSERT_TRUE(fixed.ok()) << fixed.status();
  EXPECT_EQ(Names(fixed->applied), std::vector<std::string>{"0002_broken.sql"});
}

TEST_F(MigrationsIntegration, TwoConcurrentRunnersApplyEachMigrationExactlyOnce) {
  // CREATE TABLE without IF NOT EXISTS: applying a file twice would fail.
  for (int v = 1; v <= 4; ++v) {
    WriteFile(absl::StrCat("000", v, "_step", v, ".sql"),
              absl::StrCat("SELECT pg_sleep(0.1);\nCREATE TABLE step", v, " (id int);\n"));
  }
  absl::StatusOr<MigrationReport> a, b;
  std::thread ta([&] { a = ApplyMigrations(pg_->Dsn("goodput"), dir_->path()); });
  std::thread tb([&] { b = ApplyMigrations(pg_->Dsn("goodput"), dir_->path()); });
  ta.join();
  tb.join();
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->applied.size() + b->applied.size(), 4u);
  EXPECT_EQ(a->applied.size() + a->already_applied.size(), 4u);
  EXPECT_EQ(b->applied.size() + b->already_applied.size(), 4u);
  EXPECT_EQ(Query("SELECT count(*) FROM schema_migrations"), "4");
}

TEST_F(MigrationsIntegration, RunnerWaitsForTheLockOnlyAsLongAsAllowed) {
  WriteFile("0001_only.sql", "CREATE TABLE only_one (id int);\n");
  ASSERT_TRUE(ApplyMigrations(pg_->Dsn("goodput"), dir_->path()).ok());
  // Another session holds the migration lock.
  pqxx::connection holder(pg_->Dsn("goodput"));
  pqxx::nontransaction(holder).exec("SELECT pg_advisory_lock(" +
                                    std::to_string(0x676f6f6470757401) + ")");
  auto run =
      ApplyMigrations(pg_->Dsn("goodput"), dir_->path(), {.lock_timeout = absl::Milliseconds(200)});
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), absl::StatusCode::kUnavailable) << run.status();
  EXPECT_NE(run.status().message().find("lock"), std::string::npos) << run.status();
}

TEST_F(MigrationsIntegration, BadFileNamesAreRefused) {
  WriteFile("1_short.sql", "SELECT 1;");
  auto run = ApplyMigrations(pg_->Dsn("goodput"), dir_->path());
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(run.status().message().find("1_short.sql"), std::string::npos);
}

TEST_F(MigrationsIntegration, ANoTransactionFileBuildsItsIndexConcurrently) {
  WriteFile("0001_table.sql",
            "CREATE TABLE t (id bigint, v int); INSERT INTO t SELECT g, g FROM generate_series(1, "
            "1000) g;");
  WriteFile("20261128180000_index_t.sql",
            "-- Built while writers go on.\n-- goodput: no-transaction\n"
            "CREATE INDEX CONCURRENTLY IF NOT EXISTS t_by_v ON t (v);\n"
            "CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS t_by_id ON t (id);\n");
  auto run = ApplyMigrations(pg_->Dsn("goodput"), dir_->path());
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(Names(run->applied),
            (std::vector<std::string>{"0001_table.sql", "20261128180000_index_t.sql"}));
  EXPECT_EQ(Query("SELECT count(*) FROM pg_index WHERE indrelid = 't'::regclass AND indisvalid"),
            "2");
  EXPECT_EQ(Query("SELECT max(version) FROM schema_migrations"), "20261128180000");
}

TEST_F(MigrationsIntegration, AFailedConcurrentIndexIsNamedAndBlocksTheNextRunUntilDropped) {
  WriteFile("0001_table.sql", "CREATE TABLE t (id bigint); INSERT INTO t VALUES (1), (1);");
  WriteFile("20261128180000_unique_t.sql",
            "-- goodput: no-transaction\n"
            "SELECT 1;\n"
            "CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS t_by_id ON t (id);\n");
  auto first = ApplyMigrations(pg_->Dsn("goodput"), dir_->path());
  ASSERT_FALSE(first.ok());
  EXPECT_NE(first.status().message().find("20261128180000_unique_t.sql"), std::string::npos)
      << first.status();
  EXPECT_NE(first.status().message().find("statement at line 3"), std::string::npos)
      << first.status();
  // The failed build left an invalid index behind; IF NOT EXISTS would skip it silently.
  auto second = ApplyMigrations(pg_->Dsn("goodput"), dir_->path());
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("invalid indexes remain after it: t_by_id (on t)"),
            std::string::npos)
      << second.status();
  EXPECT_EQ(Query("SELECT count(*) FROM schema_migrations WHERE version = 20261128180000"), "0");
  // Fixed data and the index dropped: the file applies.
  Execute("DELETE FROM t WHERE ctid = (SELECT max(ctid) FROM t)");
  Execute("DROP INDEX t_by_id");
  auto third = ApplyMigrations(pg_->Dsn("goodput"), dir_->path());
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_EQ(Names(third->applied), std::vector<std::string>{"20261128180000_unique_t.sql"});
}

TEST_F(MigrationsIntegration, ABackfillRunsInBatchesOfItsOwnUntilNothingIsLeft) {
  WriteFile("0001_table.sql",
            "CREATE TABLE t (id bigint PRIMARY KEY, kind text);"
            "INSERT INTO t SELECT g, NULL FROM generate_series(1, 1000) g;"
            // One row a statement: how many batches ran.
            "CREATE TABLE batches (n int);"
            "CREATE FUNCTION count_batch() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN INSERT INTO batches VALUES (1); RETURN NULL; END $$;"
            "CREATE TRIGGER t_batches AFTER UPDATE ON t FOR EACH STATEMENT "
            "EXECUTE FUNCTION count_batch();");
  WriteFile("20261128180000_kind_backfill.sql",
            "-- goodput: backfill batch_rows=300\n"
            "UPDATE t SET kind = 'training' WHERE id IN (\n"
            "  SELECT id FROM t WHERE kind IS NULL ORDER BY id LIMIT :batch_rows);\n");
  auto run = ApplyMigrations(pg_->Dsn("goodput"), dir_->path());
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(Query("SELECT count(*) FROM t WHERE kind = 'training'"), "1000");
  // 300 + 300 + 300 + 100, then one that finds nothing left.
  EXPECT_EQ(Query("SELECT count(*) FROM batches"), "5");
}

TEST_F(MigrationsIntegration, ALateBranchsOlderTimestampIsStillApplied) {
  WriteFile("0001_first.sql", "CREATE TABLE a (x int);");
  WriteFile("20261128190000_later.sql", "CREATE TABLE c (x int);");
  ASSERT_TRUE(ApplyMigrations(pg_->Dsn("goodput"), dir_->path()).ok());
  WriteFile("20261128180000_merged_late.sql", "CREATE TABLE b (x int);");
  auto run = ApplyMigrations(pg_->Dsn("goodput"), dir_->path());
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(Names(run->applied), std::vector<std::string>{"20261128180000_merged_late.sql"});
  EXPECT_EQ(Query("SELECT to_regclass('b') IS NOT NULL"), "t");
}

TEST_F(MigrationsIntegration, ADatabaseWithIntegerVersionsIsWidenedForTimestamps) {
  WriteFile("0001_first.sql", "CREATE TABLE a (x int);");
  Execute(
      "CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL, "
      "checksum text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now(), duration_ms "
      "bigint NOT NULL DEFAULT 0)");
  Execute("CREATE TABLE a (x int)");
  Execute(
      absl::StrCat("INSERT INTO schema_migrations (version, name, checksum) VALUES (1, 'first', '",
                   Sha256Hex("CREATE TABLE a (x int);"), "')"));
  WriteFile("20261128180000_b.sql", "CREATE TABLE b (x int);");
  auto run = ApplyMigrations(pg_->Dsn("goodput"), dir_->path());
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(Names(run->applied), std::vector<std::string>{"20261128180000_b.sql"});
  EXPECT_EQ(Query("SELECT data_type FROM information_schema.columns WHERE table_name = "
                  "'schema_migrations' AND column_name = 'version'"),
            "bigint");
}

class SchemaIntegration : public MigrationsIntegration {
 protected:
  void SetUp() override {
    MigrationsIntegration::SetUp();
    if (HasFatalFailure()) return;
    auto report = ApplyMigrations(pg_->Dsn("goodput"), kMigrationsDir);
    ASSERT_TRUE(report.ok()) << report.status();
    auto pool = PgPool::Create({.dsn = pg_->Dsn("goodput")});
    ASSERT_TRUE(pool.ok());
    pool_ = *std::move(pool);
  }
  std::unique_ptr<PgPool> pool_;
};

TEST_F(SchemaIntegration, CopyIntoSamplesLandsInTheDailyPartitionWithIncreasingSeq) {
  const std::vector<std::string> columns = {"sample_time",  "cluster",  "host",
                                            "gpu_index",    "gpu_uuid", "tensor_active",
                                            "sm_clock_mhz", "job",      "batch_id"};
  absl::Status status = pool_->RunTransaction([&](pqxx::work& txn) {
    txn.exec("SELECT samples_create_partitions('2024-03-01 00:00+00', '2024-03-01 00:00+00')");
    txn.exec(
        "INSERT INTO ingest_batches (batch_id, source, sample_count) VALUES ('b1', 'grpc', 1000)");
    pqxx::stream_to copy(txn, "samples", columns);
    for (int i = 0; i < 1000; ++i) {
      copy << std::make_tuple(absl::StrCat("2024-03-01 12:00:", i % 60, "+00"), std::string("c1"),
                              absl::StrCat("node", i % 4), std::optional<int>(i % 8),
                              std::optional<std::string>(), 0.5 + (i % 10) / 100.0, 1410.0,
                              std::optional<int64_t>(), std::string("b1"));
    }
    copy.complete();
    return absl::OkStatus();
  });
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(Query("SELECT count(*) FROM samples_20240301"), "1000");
  EXPECT_EQ(Query("SELECT count(DISTINCT seq) FROM samples"), "1000");
  EXPECT_EQ(Query("SELECT count(*) FROM samples WHERE gpu_uuid IS NULL AND job IS NULL"), "1000");
  // Committed rows are below the safe watermark of a later reader.
  EXPECT_EQ(Query("SELECT bool_and(ingest_xid < samples_safe_xid()) FROM samples"), "t");
}

TEST_F(SchemaIntegration, PartitionsAreCreatedAheadOnceAndDroppedForRetention) {
  EXPECT_EQ(Query("SELECT samples_create_partitions('2020-01-01 00:00+00', '2020-01-03 23:00+00')"),
            "3");
  EXPECT_EQ(Query("SELECT samples_create_partitions('2020-01-01 00:00+00', '2020-01-03 23:00+00')"),
            "0");
  EXPECT_EQ(Query("SELECT samples_drop_partitions_before('2020-01-03 00:00+00')"), "2");
  EXPECT_EQ(Query("SELECT to_regclass('samples_20200103') IS NOT NULL"), "t");
  // The migration itself created partitions around today.
  EXPECT_EQ(Query("SELECT to_regclass('samples_' || to_char(now() AT TIME ZONE 'UTC', 'YYYYMMDD')) "
                  "IS NOT NULL"),
            "t");
}

TEST_F(SchemaIntegration, OverlappingGpuAllocationsOfTwoJobsAreRefused) {
  ASSERT_TRUE(pg_->Execute("goodput", R"sql(
    INSERT INTO jobs (cluster, job_id, scheduler) VALUES ('c1', '100', 'slurm'), ('c1', '200', 'slurm');
    INSERT INTO job_gpus (job, cluster, host, gpu_index, valid)
      SELECT id, 'c1', 'node1', 0, tstzrange('2024-01-01 00:00+00', NULL) FROM jobs WHERE job_id = '100';
  )sql")
                  .ok());
  absl::Status overlap = pool_->RunTransaction([&](pqxx::work& txn) {
    txn.exec(
        "INSERT INTO job_gpus (job, cluster, host, gpu_index, valid) SELECT id, 'c1', 'node1', 0, "
        "tstzrange('2024-01-02 00:00+00', NULL) FROM jobs WHERE job_id = '200'");
    return absl::OkStatus();
  });
  EXPECT_EQ(overlap.code(), absl::StatusCode::kFailedPrecondition) << overlap;
  EXPECT_NE(overlap.message().find("job_gpus_no_overlap_by_index"), std::string::npos) << overlap;
  // Another GPU of the same host is fine.
  EXPECT_TRUE(pool_
                  ->RunTransaction([&](pqxx::work& txn) {
                    txn.exec(
                        "INSERT INTO job_gpus (job, cluster, host, gpu_index, valid) SELECT id, "
                        "'c1', 'node1', 1, "
                        "tstzrange('2024-01-02 00:00+00', NULL) FROM jobs WHERE job_id = '200'");
                    return absl::OkStatus();
                  })
                  .ok());
}

TEST_F(SchemaIntegration, OptionalParametersBecomeNull) {
  absl::Status status = pool_->RunTransaction([&](pqxx::work& txn) {
    txn.exec_params("INSERT INTO jobs (cluster, job_id, start_time) VALUES ($1, $2, $3)",
                    std::string("c1"), std::string("opt"), std::optional<std::string>());
    return absl::OkStatus();
  });
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(Query("SELECT count(*) FROM jobs WHERE job_id = 'opt' AND start_time IS NULL"), "1");
}

}  // namespace
}  // namespace goodput::platform
