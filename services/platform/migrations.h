#pragma once

// Schema migrations: numbered SQL files `<version>_<name>.sql` in one folder, applied in
// version order, each in its own transaction unless it says otherwise, and recorded in
// `schema_migrations` (version, name, SHA-256 checksum, applied_at). A file that was applied must
// never change: if its checksum differs from the recorded one, nothing is applied and the run fails
// with FAILED_PRECONDITION naming the file. The whole run holds a PostgreSQL advisory lock, so two
// processes migrating at once apply each file exactly once (the second waits, then finds nothing
// left to do).
//
//   absl::StatusOr<MigrationReport> report = ApplyMigrations(dsn, "migrations");
//   for (const auto& m : report->applied) LOG(INFO) << "applied " << m.FileName();
//
// Versions: the first migrations are numbered 0001..0061; every later one is named by the UTC
// time it was written, `YYYYMMDDHHMMSS_<name>.sql`, so two branches never pick the same
// version. A pending file older than one already applied (a branch merged late) is applied
// too: migrations of different branches do not depend on each other.
//
// A file's leading comment lines may hold one directive:
//   -- goodput: no-transaction
//       its statements run one by one outside a transaction (CREATE INDEX CONCURRENTLY,
//       DROP INDEX CONCURRENTLY, ALTER TYPE ... ADD VALUE). Write them idempotently (IF NOT
//       EXISTS): a failure leaves the statements before it done, and the file runs again from
//       its start. After such a file the runner refuses to go on while an index is invalid
//       (what a failed CREATE INDEX CONCURRENTLY leaves), naming it.
//   -- goodput: backfill batch_rows=N
//       the file holds one statement (an UPDATE, DELETE or INSERT ... SELECT) containing
//       `:batch_rows`; it runs again and again, each time in a transaction of its own with
//       :batch_rows replaced by N, until a run changes no row. The statement must select what
//       is still to do, so that a backfill interrupted at any batch resumes where it stopped.
// Everything else runs in one transaction. The rules that keep a migration safe on a large
// production database (indexes built concurrently, no table rewrite, no backfill in one
// transaction) are checked by migration_lint.h.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace goodput::platform {

// One migration file read from disk.
struct MigrationFile {
  enum class Mode { kTransaction, kNoTransaction, kBackfill };

  int64_t version = 0;  // from the numeric prefix
  std::string name;     // the part after the prefix, without ".sql"
  std::filesystem::path path;
  std::string sql;
  std::string sha256_hex;           // of the file's bytes
  Mode mode = Mode::kTransaction;   // from the file's directive
  int64_t backfill_batch_rows = 0;  // kBackfill: rows per batch
  std::string FileName() const;     // "0001_jobs_and_samples.sql"
};

struct MigrationReport {
  std::vector<MigrationFile> applied;          // applied by this run, in order
  std::vector<MigrationFile> already_applied;  // found recorded with a matching checksum
};

struct MigrationOptions {
  // How long to wait for another process's migration run to finish.
  absl::Duration lock_timeout = absl::Minutes(10);
};

// Reads every `*.sql` file of `dir`, sorted by version. INVALID_ARGUMENT naming the file
// for a `.sql` name that is not `<digits, 4 or more>_<lowercase name>.sql`, a version 0, two
// files with one version, an unknown `-- goodput:` directive or a backfill file that is not
// one statement with `:batch_rows`; NOT_FOUND if `dir` does not exist. Other files are
// ignored.
absl::StatusOr<std::vector<MigrationFile>> LoadMigrationFiles(const std::filesystem::path& dir);

// Applies the pending migrations of `dir` to the database at `dsn` (see the file comment).
// UNAVAILABLE if PostgreSQL cannot be reached or the lock is not obtained in time;
// FAILED_PRECONDITION for an edited or missing applied file; a failing file's error names
// the file, and the files applied before it stay applied.
absl::StatusOr<MigrationReport> ApplyMigrations(const std::string& dsn,
                                                const std::filesystem::path& dir,
                                                const MigrationOptions& options = {});

// The directive of a migration's text (see the file comment): sets `file->mode` and
// `file->backfill_batch_rows`, or INVALID_ARGUMENT naming the line.
absl::Status ParseMigrationDirective(MigrationFile* file);

// Lowercase hex SHA-256 of `data`.
std::string Sha256Hex(absl::string_view data);

}  // namespace goodput::platform
