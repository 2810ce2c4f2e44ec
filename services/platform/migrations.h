#pragma once

// Schema migrations: numbered SQL files `NNNN_<name>.sql` in one folder, applied in version
// order, each in its own transaction, and recorded in `schema_migrations` (version, name,
// SHA-256 checksum, applied_at). A file that was applied must never change: if its
// checksum differs from the recorded one, nothing is applied and the run fails with
// FAILED_PRECONDITION naming the file. The whole run holds a PostgreSQL advisory lock, so
// two processes migrating at once apply each file exactly once (the second waits, then
// finds nothing left to do).
//
//   absl::StatusOr<MigrationReport> report = ApplyMigrations(dsn, "migrations");
//   for (const auto& m : report->applied) LOG(INFO) << "applied " << m.FileName();
//
// A migration file must be able to run inside a transaction (no CREATE INDEX
// CONCURRENTLY, no VACUUM).

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
  int version = 0;   // from the NNNN prefix
  std::string name;  // the part after the prefix, without ".sql"
  std::filesystem::path path;
  std::string sql;
  std::string sha256_hex;        // of the file's bytes
  std::string FileName() const;  // "0001_jobs_and_samples.sql"
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
// for a `.sql` name that is not `NNNN_<lowercase name>.sql`, a version 0, or two files
// with one version; NOT_FOUND if `dir` does not exist. Other files are ignored.
absl::StatusOr<std::vector<MigrationFile>> LoadMigrationFiles(const std::filesystem::path& dir);

// Applies the pending migrations of `dir` to the database at `dsn` (see the file comment).
// UNAVAILABLE if PostgreSQL cannot be reached or the lock is not obtained in time;
// FAILED_PRECONDITION for an edited or missing applied file; a failing file's error names
// the file, and the files applied before it stay applied.
absl::StatusOr<MigrationReport> ApplyMigrations(const std::string& dsn,
                                                const std::filesystem::path& dir,
                                                const MigrationOptions& options = {});

// Lowercase hex SHA-256 of `data`.
std::string Sha256Hex(absl::string_view data);

}  // namespace goodput::platform
