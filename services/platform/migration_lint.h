// The rules that keep a migration safe on a year of production data, checked in CI over
// migrations/ (migration_lint_test.cc) before a file can merge:
//
// - versions of new files are UTC timestamps (YYYYMMDDHHMMSS), so branches never collide;
// - an index on an existing table is built CONCURRENTLY (in a `-- goodput: no-transaction`
//   file), or ON ONLY a partitioned parent; CONCURRENTLY never in a transactional file;
// - no table rewrite: no ALTER COLUMN ... TYPE, no ADD COLUMN with a volatile default
//   (clock_timestamp(), random(), gen_random_uuid(), nextval(), serial) or GENERATED ... STORED;
// - no full scan under an exclusive lock: SET NOT NULL, ADD CONSTRAINT ... FOREIGN KEY/CHECK
//   without NOT VALID (validate in a later file), ADD PRIMARY KEY/UNIQUE without USING INDEX,
//   VACUUM FULL, CLUSTER, REINDEX without CONCURRENTLY, LOCK TABLE;
// - no backfill in a migration's transaction: UPDATE, DELETE and INSERT ... SELECT on an
//   existing table go in a `-- goodput: backfill batch_rows=N` file (migrations.h);
// - ready for Citus (LintDistribution, over the schema all files build together): every
//   table is declared distributed or reference in table_distribution.h, and its keys, unique
//   indexes, exclusion constraints and foreign keys are legal under that declaration.
//
// Files up to `legacy_last_version` were merged before these rules and are not checked: a
// merged migration is never edited.
//
//   for (const MigrationProblem& p : LintMigration(file, {})) std::cerr << p.Message();
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "services/platform/migrations.h"
#include "services/platform/table_distribution.h"

namespace goodput::platform {

struct MigrationLintOptions {
  // The last version numbered before the rules; later files must follow them.
  int64_t legacy_last_version = 61;
  // The tables' distribution LintMigrations checks the schema against; null: the project's
  // (ProjectTableDistribution()).
  const std::vector<TableDistribution>* distribution = nullptr;
};

struct MigrationProblem {
  std::string file;  // "20261128180000_add_x.sql"
  int line = 0;      // of the offending statement; 0 for the file as a whole
  std::string rule;  // short name, e.g. "index-not-concurrent"
  std::string why;   // what is wrong and what to write instead

  // "FILE line N: [rule] why"
  std::string Message() const;
};

// The problems of one migration file (empty: it follows the rules).
std::vector<MigrationProblem> LintMigration(const MigrationFile& file,
                                            const MigrationLintOptions& options = {});

// The problems of every file of a folder, in version order, then LintDistribution's over
// all of them; a folder that does not load gives one problem naming why.
std::vector<MigrationProblem> LintMigrations(const std::vector<MigrationFile>& files,
                                             const MigrationLintOptions& options = {});

// The schema that `files` build (in order, legacy files included: the schema is all of
// them) checked against `distribution` (table_distribution.h). Each problem names the file
// and line of the statement that declared the offending table, key, index or constraint:
// - citus-undeclared-table: a table created but not declared;
// - citus-no-distribution-column: a distributed table without its distribution column;
// - citus-key-without-distribution-column: a primary key, unique constraint or unique index
//   of a distributed table without its distribution column, or an exclusion constraint
//   without it compared by `=`;
// - citus-foreign-key: a foreign key from a distributed table to a distributed table not on
//   both distribution columns, or from a reference table to a distributed one.
// Statements inside function bodies and DO blocks are not read.
std::vector<MigrationProblem> LintDistribution(const std::vector<MigrationFile>& files,
                                               const std::vector<TableDistribution>& distribution);

}  // namespace goodput::platform
