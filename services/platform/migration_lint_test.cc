#include "services/platform/migration_lint.h"

#include <gtest/gtest.h>

#include "absl/strings/str_join.h"

namespace goodput::platform {
namespace {

MigrationFile File(int64_t version, std::string sql) {
  MigrationFile f;
  f.version = version;
  f.name = "change";
  f.sql = std::move(sql);
  EXPECT_TRUE(ParseMigrationDirective(&f).ok());
  return f;
}

// The rules broken by `sql` in a new migration, by name.
std::vector<std::string> Rules(const std::string& sql, int64_t version = 20261128180000) {
  std::vector<std::string> rules;
  for (const MigrationProblem& p : LintMigration(File(version, sql))) rules.push_back(p.rule);
  return rules;
}

using Names = std::vector<std::string>;

TEST(MigrationLint, NewVersionsAreTimestampsSoBranchesNeverCollide) {
  EXPECT_EQ(Rules("SELECT 1;", 62), Names{"version-not-timestamp"});
  EXPECT_EQ(Rules("SELECT 1;", 20261399000000), Names{"version-not-timestamp"});
  EXPECT_EQ(Rules("SELECT 1;", 20261128180000), Names{});
  // Merged before the rules: never checked, never edited.
  EXPECT_EQ(Rules("UPDATE samples SET x = 1;", 61), Names{});
}

TEST(MigrationLint, IndexesOnExistingTablesAreBuiltConcurrentlyOutsideATransaction) {
  EXPECT_EQ(Rules("CREATE INDEX samples_by_x ON samples (x);"), Names{"index-not-concurrent"});
  EXPECT_EQ(Rules("CREATE INDEX CONCURRENTLY samples_by_x ON samples (x);"),
            Names{"concurrent-in-transaction"});
  EXPECT_EQ(Rules("-- goodput: no-transaction\n"
                  "CREATE INDEX CONCURRENTLY IF NOT EXISTS samples_by_x ON samples (x);\n"
                  "DROP INDEX CONCURRENTLY IF EXISTS samples_by_y;"),
            Names{});
  EXPECT_EQ(Rules("CREATE INDEX samples_by_x ON ONLY samples (x);"), Names{});
  // A table of the same file is empty: a plain index is fine.
  EXPECT_EQ(Rules("CREATE TABLE IF NOT EXISTS faults (id bigint);\n"
                  "CREATE UNIQUE INDEX faults_by_id ON public.faults (id);"),
            Names{});
  EXPECT_EQ(Rules("ALTER TABLE jobs ADD CONSTRAINT jobs_u UNIQUE (cluster, job_id);"),
            Names{"index-not-concurrent"});
  EXPECT_EQ(Rules("ALTER TABLE jobs ADD CONSTRAINT jobs_u UNIQUE USING INDEX jobs_u_idx;"),
            Names{});
}

TEST(MigrationLint, NoTableRewriteAndNoScanUnderAnExclusiveLock) {
  EXPECT_EQ(Rules("ALTER TABLE samples ALTER COLUMN value TYPE double precision;"),
            Names{"table-rewrite"});
  EXPECT_EQ(Rules("ALTER TABLE jobs ADD COLUMN token uuid DEFAULT gen_random_uuid();"),
            Names{"table-rewrite"});
  EXPECT_EQ(Rules("ALTER TABLE jobs ADD COLUMN n bigserial;"), Names{"table-rewrite"});
  // A constant (or stable) default is stored once in the catalog: no rewrite.
  EXPECT_EQ(Rules("ALTER TABLE jobs ADD COLUMN kind text NOT NULL DEFAULT 'training';"), Names{});
  EXPECT_EQ(Rules("ALTER TABLE jobs ADD COLUMN seen timestamptz DEFAULT now();"), Names{});
  EXPECT_EQ(Rules("ALTER TABLE jobs ALTER COLUMN team SET NOT NULL;"), Names{"scan-under-lock"});
  EXPECT_EQ(Rules("ALTER TABLE alerts ADD CONSTRAINT a_job FOREIGN KEY (job) REFERENCES jobs;"),
            Names{"scan-under-lock"});
  EXPECT_EQ(Rules("ALTER TABLE alerts ADD CONSTRAINT a_job FOREIGN KEY (job) REFERENCES jobs "
                  "NOT VALID;"),
            Names{});
  EXPECT_EQ(Rules("VACUUM FULL samples;"), Names{"table-rewrite"});
  EXPECT_EQ(Rules("REINDEX TABLE samples;"), Names{"reindex-locks"});
  EXPECT_EQ(Rules("LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE;"), Names{"explicit-lock"});
}

TEST(MigrationLint, BackfillsRunInBatchesOutsideTheMigration) {
  EXPECT_EQ(Rules("UPDATE jobs SET kind = 'training' WHERE kind IS NULL;"),
            Names{"backfill-in-migration"});
  EXPECT_EQ(Rules("INSERT INTO job_kinds SELECT cluster, job_id, 'training' FROM jobs;"),
            Names{"backfill-in-migration"});
  EXPECT_EQ(Rules("DELETE FROM samples WHERE value < 0;"), Names{"backfill-in-migration"});
  // Seed rows and rows of a table the file creates are not a backfill.
  EXPECT_EQ(Rules("INSERT INTO settings (k, v) VALUES ('a', 'delete from x');"), Names{});
  EXPECT_EQ(Rules("CREATE TABLE k (c text);\nINSERT INTO k SELECT cluster FROM jobs;"), Names{});
  EXPECT_EQ(Rules("-- goodput: backfill batch_rows=5000\n"
                  "UPDATE jobs SET kind = 'training' WHERE (cluster, job_id) IN (\n"
                  "  SELECT cluster, job_id FROM jobs WHERE kind IS NULL LIMIT :batch_rows);"),
            Names{});
}

TEST(MigrationLint, ProblemsNameTheFileTheLineAndTheRule) {
  std::vector<MigrationProblem> p =
      LintMigration(File(20261128180000, "SELECT 1;\n\nCREATE INDEX i ON jobs (x);"));
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].line, 3);
  EXPECT_EQ(p[0].Message().substr(0, 96),
            "20261128180000_change.sql line 3: [index-not-concurrent] CREATE INDEX on the "
            "existing table JOBS");
}

TEST(MigrationDirective, UnknownOrMalformedDirectivesAreRefusedByLine) {
  MigrationFile f;
  f.version = 20261128180000;
  f.name = "x";
  f.sql = "-- why\n-- goodput: no-transactions\nSELECT 1;";
  absl::Status s = ParseMigrationDirective(&f);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("line 2"), std::string::npos) << s;
  f.sql = "-- goodput: backfill batch_rows=0\nUPDATE t SET a = 1 LIMIT :batch_rows;";
  EXPECT_FALSE(ParseMigrationDirective(&f).ok());
  f.sql = "-- goodput: backfill batch_rows=10\nUPDATE t SET a = 1;";
  EXPECT_NE(ParseMigrationDirective(&f).message().find(":batch_rows"), std::string::npos);
  f.sql = "-- goodput: backfill batch_rows=10\nUPDATE t SET a = 1 LIMIT :batch_rows; SELECT 1;";
  EXPECT_NE(ParseMigrationDirective(&f).message().find("holds 2 statements"), std::string::npos);
  // A directive after the first statement is only a comment.
  f.sql = "SELECT 1;\n-- goodput: no-transaction\n";
  ASSERT_TRUE(ParseMigrationDirective(&f).ok());
  EXPECT_EQ(f.mode, MigrationFile::Mode::kTransaction);
}

// The CI check: every migration of the repository follows the rules.
TEST(MigrationLint, TheProjectsMigrationsFollowTheRules) {
  absl::StatusOr<std::vector<MigrationFile>> files =
      LoadMigrationFiles(std::filesystem::path(GOODPUT_SOURCE_DIR) / "migrations");
  ASSERT_TRUE(files.ok()) << files.status();
  std::vector<MigrationProblem> problems = LintMigrations(*files);
  EXPECT_TRUE(problems.empty()) << absl::StrJoin(
      problems, "\n",
      [](std::string* out, const MigrationProblem& p) { out->append(p.Message()); });
}

}  // namespace
}  // namespace goodput::platform
