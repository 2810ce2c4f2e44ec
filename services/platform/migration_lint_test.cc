#include "services/platform/migration_lint.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <set>

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

// The Citus rules over a schema of two files, against a small declaration.
std::vector<std::string> DistributionRules(const std::string& sql) {
  const std::vector<TableDistribution> distribution = {
      {"samples", TableDistribution::Kind::kDistributed, "host"},
      {"windows", TableDistribution::Kind::kDistributed, "job"},
      {"job_state", TableDistribution::Kind::kDistributed, "job"},
      {"jobs", TableDistribution::Kind::kReference, ""},
  };
  std::vector<MigrationFile> files = {
      File(
          20261128170000,
          "CREATE TABLE jobs (id bigint PRIMARY KEY, cluster text, job_id text,\n"
          "  CONSTRAINT jobs_key UNIQUE (cluster, job_id));\n"
          "CREATE TABLE samples (seq bigint, host text NOT NULL, job bigint REFERENCES jobs (id))\n"
          "  PARTITION BY RANGE (seq);\n"
          "CREATE TABLE windows (job bigint NOT NULL REFERENCES jobs (id), gpu text,\n"
          "  start_time timestamptz, PRIMARY KEY (job, gpu, start_time));\n"
          "CREATE TABLE job_state (job bigint PRIMARY KEY);\n"),
      File(20261128180000, sql)};
  std::vector<std::string> rules;
  for (const MigrationProblem& p : LintDistribution(files, distribution)) {
    rules.push_back(p.rule);
  }
  return rules;
}

TEST(MigrationLint, CitusKeysOfDistributedTablesIncludeTheDistributionColumn) {
  EXPECT_EQ(DistributionRules("SELECT 1;"), Names{});
  // A key of a distributed table without its distribution column, in each form.
  EXPECT_EQ(DistributionRules("ALTER TABLE samples ADD CONSTRAINT samples_pkey PRIMARY KEY (seq);"),
            Names{"citus-key-without-distribution-column"});
  EXPECT_EQ(DistributionRules("CREATE UNIQUE INDEX windows_by_gpu ON windows (gpu, start_time);"),
            Names{"citus-key-without-distribution-column"});
  EXPECT_EQ(DistributionRules("ALTER TABLE windows ADD COLUMN id bigint UNIQUE;"),
            Names{"citus-key-without-distribution-column"});
  EXPECT_EQ(DistributionRules("ALTER TABLE samples ADD CONSTRAINT no_overlap EXCLUDE USING gist "
                              "(seq WITH =, host WITH &&);"),
            Names{"citus-key-without-distribution-column"});
  // With it, they are legal; on a reference table anything is.
  EXPECT_EQ(DistributionRules("CREATE UNIQUE INDEX windows_by_gpu ON windows (gpu, job);\n"
                              "ALTER TABLE samples ADD CONSTRAINT one EXCLUDE USING gist "
                              "(host WITH =, seq WITH &&);\n"
                              "CREATE UNIQUE INDEX jobs_by_job_id ON jobs (job_id);"),
            Names{});
  // A key made legal later (dropped, then added with the column) leaves no problem.
  EXPECT_EQ(DistributionRules("-- goodput: no-transaction\n"
                              "CREATE UNIQUE INDEX CONCURRENTLY s_key ON samples (host, seq);\n"
                              "ALTER TABLE samples ADD CONSTRAINT samples_pkey PRIMARY KEY "
                              "USING INDEX s_key;"),
            Names{});
  EXPECT_EQ(DistributionRules("CREATE UNIQUE INDEX bad ON windows (gpu);\nDROP INDEX bad;"),
            Names{});
}

TEST(MigrationLint, CitusTablesAreDeclaredAndForeignKeysStayInAShard) {
  EXPECT_EQ(DistributionRules("CREATE TABLE gpu_notes (host text PRIMARY KEY);"),
            Names{"citus-undeclared-table"});
  // Distributed to distributed only on both distribution columns; reference to distributed
  // never; anything to a reference table.
  EXPECT_EQ(DistributionRules("ALTER TABLE job_state ADD CONSTRAINT w FOREIGN KEY (job) "
                              "REFERENCES windows (job) NOT VALID;"),
            Names{});
  EXPECT_EQ(DistributionRules("ALTER TABLE samples ADD CONSTRAINT w FOREIGN KEY (job) "
                              "REFERENCES job_state (job) NOT VALID;"),
            Names{"citus-foreign-key"});
  EXPECT_EQ(DistributionRules("ALTER TABLE jobs ADD COLUMN state_job bigint REFERENCES job_state;"),
            Names{"citus-foreign-key"});
  const std::vector<TableDistribution> wrong_column = {
      {"jobs", TableDistribution::Kind::kDistributed, "gpu"}};
  std::vector<std::string> rules;
  for (const MigrationProblem& p : LintDistribution(
           {File(20261128170000, "CREATE TABLE jobs (id bigint PRIMARY KEY);")}, wrong_column)) {
    rules.push_back(p.rule);
  }
  EXPECT_EQ(rules,
            (Names{"citus-key-without-distribution-column", "citus-no-distribution-column"}));
}

TEST(MigrationLint, CitusProblemsNameTheFileAndLineOfTheKey) {
  const std::vector<TableDistribution> distribution = {
      {"samples", TableDistribution::Kind::kDistributed, "host"}};
  std::vector<MigrationProblem> problems =
      LintDistribution({File(20261128170000,
                             "SELECT 1;\nCREATE TABLE samples (\n  seq bigint PRIMARY KEY,\n"
                             "  host text);")},
                       distribution);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].Message(),
            "20261128170000_change.sql line 2: [citus-key-without-distribution-column] primary "
            "key samples_pkey of samples (seq) does not include samples's distribution column "
            "host: each shard enforces it alone; include the column, or declare the table "
            "reference");
}

// The lint reads the project's whole schema: with nothing declared every table it creates is
// reported, and gpu_fault_events' first primary key (id alone) broke its declaration until
// 20261128214101 made it (host, id).
TEST(MigrationLint, CitusReadsTheProjectsWholeSchema) {
  absl::StatusOr<std::vector<MigrationFile>> files =
      LoadMigrationFiles(std::filesystem::path(GOODPUT_SOURCE_DIR) / "migrations");
  ASSERT_TRUE(files.ok()) << files.status();
  std::set<std::string> undeclared;
  for (const MigrationProblem& p : LintDistribution(*files, {})) {
    EXPECT_EQ(p.rule, "citus-undeclared-table");
    undeclared.insert(p.why.substr(0, p.why.find(" is not declared")));
  }
  EXPECT_EQ(undeclared.size(), ProjectTableDistribution().size());
  EXPECT_TRUE(undeclared.contains("table samples"));
  EXPECT_TRUE(undeclared.contains("table gpu_fault_events"));

  std::vector<MigrationFile> before;
  for (const MigrationFile& f : *files) {
    if (f.version < 20261128214100) before.push_back(f);
  }
  std::vector<std::string> problems;
  for (const MigrationProblem& p : LintDistribution(before, ProjectTableDistribution())) {
    problems.push_back(p.Message());
  }
  ASSERT_EQ(problems.size(), 1u) << absl::StrJoin(problems, "\n");
  EXPECT_NE(problems[0].find("20261128190000_gpu_fault_events.sql"), std::string::npos);
  EXPECT_NE(problems[0].find("primary key gpu_fault_events_pkey of gpu_fault_events (id)"),
            std::string::npos);
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
