#include "services/platform/migrations.h"

#include <openssl/evp.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <memory>
#include <pqxx/pqxx>
#include <regex>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "services/platform/pg_pool.h"
#include "services/platform/sql_split.h"

namespace goodput::platform {
namespace {

namespace fs = std::filesystem;

// Key of the session advisory lock held while migrating ("goodput" + 0x01).
constexpr int64_t kMigrationLockKey = 0x676f6f6470757401;

constexpr const char* kCreateTableSql = R"sql(
CREATE TABLE IF NOT EXISTS schema_migrations (
  version     bigint      PRIMARY KEY,
  name        text        NOT NULL,
  checksum    text        NOT NULL,
  applied_at  timestamptz NOT NULL DEFAULT now(),
  duration_ms bigint      NOT NULL DEFAULT 0
))sql";

// Databases migrated before versions were timestamps hold them as integer: widen once (the
// table has one row per migration, so the rewrite is instant).
constexpr const char* kWidenVersionSql = R"sql(
DO $$
BEGIN
  IF (SELECT data_type FROM information_schema.columns
      WHERE table_schema = current_schema() AND table_name = 'schema_migrations'
        AND column_name = 'version') = 'integer' THEN
    ALTER TABLE schema_migrations ALTER COLUMN version TYPE bigint;
  END IF;
END $$)sql";

// Indexes a failed CREATE INDEX CONCURRENTLY left behind: present, never used, still
// maintained on every write.
constexpr const char* kInvalidIndexesSql = R"sql(
SELECT string_agg(format('%s (on %s)', i.indexrelid::regclass, i.indrelid::regclass), ', '
                  ORDER BY i.indexrelid::regclass::text)
FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE NOT i.indisvalid AND n.nspname = current_schema())sql";

constexpr absl::string_view kBatchRowsToken = ":batch_rows";

constexpr const char* kRecordSql =
    "INSERT INTO schema_migrations (version, name, checksum, duration_ms) VALUES ($1, $2, $3, $4)";

std::string FileNames(const std::vector<MigrationFile>& files) {
  return absl::StrJoin(files, ", ",
                       [](std::string* out, const MigrationFile& f) { out->append(f.FileName()); });
}

// Thrown for a migration that ran but left the schema unusable.
class MigrationError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Runs `m` as its mode says (see migrations.h). Throws what libpqxx throws, or MigrationError.
void RunMigration(pqxx::connection& conn, const MigrationFile& m) {
  switch (m.mode) {
    case MigrationFile::Mode::kTransaction: {
      pqxx::work txn(conn);
      txn.exec(m.sql);
      txn.commit();
      return;
    }
    case MigrationFile::Mode::kNoTransaction: {
      absl::StatusOr<std::vector<SqlStatement>> statements = SplitSqlStatements(m.sql);
      if (!statements.ok()) throw MigrationError(std::string(statements.status().message()));
      for (const SqlStatement& statement : *statements) {
        try {
          pqxx::nontransaction run(conn);
          run.exec(statement.text);
        } catch (const pqxx::sql_error& e) {
          throw pqxx::sql_error(absl::StrCat("statement at line ", statement.line, ": ", e.what()),
                                e.query(), e.sqlstate().empty() ? nullptr : e.sqlstate().c_str());
        }
      }
      pqxx::nontransaction check(conn);
      pqxx::result invalid = check.exec(kInvalidIndexesSql);
      if (!invalid.empty() && !invalid[0][0].is_null()) {
        throw MigrationError(absl::StrCat(
            "invalid indexes remain after it: ", invalid[0][0].as<std::string>(),
            " (a CREATE INDEX CONCURRENTLY failed or was interrupted: DROP INDEX CONCURRENTLY "
            "each, then migrate again)"));
      }
      return;
    }
    case MigrationFile::Mode::kBackfill: {
      const std::string sql =
          absl::StrReplaceAll(m.sql, {{kBatchRowsToken, absl::StrCat(m.backfill_batch_rows)}});
      while (true) {
        pqxx::work txn(conn);
        pqxx::result batch = txn.exec(sql);
        txn.commit();
        if (batch.affected_rows() == 0) return;
      }
    }
  }
}

}  // namespace

std::string MigrationFile::FileName() const {
  return path.empty() ? absl::StrCat(version, "_", name, ".sql") : path.filename().string();
}

std::string Sha256Hex(absl::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(data.data(), data.size(), digest, &length, EVP_sha256(), nullptr);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(length * 2);
  for (unsigned int i = 0; i < length; ++i) {
    hex.push_back(kHex[digest[i] >> 4]);
    hex.push_back(kHex[digest[i] & 0xf]);
  }
  return hex;
}

absl::Status ParseMigrationDirective(MigrationFile* file) {
  file->mode = MigrationFile::Mode::kTransaction;
  file->backfill_batch_rows = 0;
  int line_number = 0;
  bool seen = false;
  for (absl::string_view line : absl::StrSplit(file->sql, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    if (!absl::ConsumePrefix(&line, "--")) break;  // the leading comments end here
    line = absl::StripLeadingAsciiWhitespace(line);
    if (!absl::ConsumePrefix(&line, "goodput:")) continue;
    auto bad = [&](absl::string_view why) {
      return absl::InvalidArgumentError(
          absl::StrCat("migration file ", file->FileName(), " line ", line_number, ": ", why));
    };
    if (seen) return bad("holds a second `-- goodput:` directive; a file has at most one");
    seen = true;
    std::vector<absl::string_view> words =
        absl::StrSplit(absl::StripAsciiWhitespace(line), ' ', absl::SkipWhitespace());
    if (words.size() == 1 && words[0] == "no-transaction") {
      file->mode = MigrationFile::Mode::kNoTransaction;
    } else if (!words.empty() && words[0] == "backfill") {
      file->mode = MigrationFile::Mode::kBackfill;
      absl::string_view rows = words.size() == 2 ? words[1] : "";
      if (!absl::ConsumePrefix(&rows, "batch_rows=") ||
          !absl::SimpleAtoi(rows, &file->backfill_batch_rows) || file->backfill_batch_rows < 1) {
        return bad("the backfill directive is `-- goodput: backfill batch_rows=N` with N >= 1");
      }
    } else {
      return bad(absl::StrCat("\"", absl::StripAsciiWhitespace(line),
                              "\" is not a directive (no-transaction, backfill batch_rows=N)"));
    }
  }
  if (file->mode == MigrationFile::Mode::kBackfill) {
    absl::StatusOr<std::vector<SqlStatement>> statements = SplitSqlStatements(file->sql);
    if (!statements.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("migration file ", file->FileName(), ": ", statements.status().message()));
    }
    if (statements->size() != 1 || !absl::StrContains((*statements)[0].text, kBatchRowsToken)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "migration file ", file->FileName(), ": a backfill holds exactly one statement using ",
          kBatchRowsToken, " (it holds ", statements->size(), " statement",
          statements->size() == 1 ? "" : "s", ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<MigrationFile>> LoadMigrationFiles(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return absl::NotFoundError(absl::StrCat("migrations folder ", dir.string(), " does not exist"));
  }
  static const std::regex kName(R"(^([0-9]{4,})_([a-z0-9_]+)\.sql$)");
  std::map<int64_t, MigrationFile> by_version;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string file = entry.path().filename().string();
    if (entry.path().extension() != ".sql") continue;
    std::smatch match;
    if (!std::regex_match(file, match, kName)) {
      return absl::InvalidArgumentError(
          absl::StrCat("migration file ", entry.path().string(),
                       ": name must be <version>_<lowercase_name>.sql "
                       "(version: YYYYMMDDHHMMSS, UTC)"));
    }
    MigrationFile m;
    if (!absl::SimpleAtoi(match[1].str(), &m.version) || m.version <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("migration file ", entry.path().string(),
                                                     ": version must be a positive number"));
    }
    m.name = match[2].str();
    m.path = entry.path();
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream content;
    content << in.rdbuf();
    if (!in)
      return absl::InternalError(
          absl::StrCat("cannot read migration file ", entry.path().string()));
    m.sql = content.str();
    m.sha256_hex = Sha256Hex(m.sql);
    if (absl::Status s = ParseMigrationDirective(&m); !s.ok()) return s;
    if (auto [it, inserted] = by_version.emplace(m.version, m); !inserted) {
      return absl::InvalidArgumentError(absl::StrCat("migration files ", it->second.FileName(),
                                                     " and ", file, " have the same version ",
                                                     m.version));
    }
  }
  if (ec) return absl::InternalError(absl::StrCat("listing ", dir.string(), ": ", ec.message()));
  std::vector<MigrationFile> files;
  for (auto& [version, m] : by_version) files.push_back(std::move(m));
  return files;
}

absl::StatusOr<MigrationReport> ApplyMigrations(const std::string& dsn, const fs::path& dir,
                                                const MigrationOptions& options) {
  auto files = LoadMigrationFiles(dir);
  if (!files.ok()) return files.status();

  std::unique_ptr<pqxx::connection> conn;
  try {
    conn = std::make_unique<pqxx::connection>(dsn);
  } catch (const std::exception& e) {
    return PgExceptionToStatus(e, "migrations: connecting to PostgreSQL");
  }

  const std::string lock_step =
      "migrations: waiting for the migration lock (another run in progress?)";
  try {
    pqxx::nontransaction session(*conn);
    session.exec("SET client_min_messages = warning");
    session.exec(
        absl::StrCat("SET lock_timeout = ", absl::ToInt64Milliseconds(options.lock_timeout)));
    session.exec(absl::StrCat("SELECT pg_advisory_lock(", kMigrationLockKey, ")"));
    session.exec("SET lock_timeout = 0");
    session.exec(kCreateTableSql);
    session.exec(kWidenVersionSql);
  } catch (const std::exception& e) {
    absl::Status status = PgExceptionToStatus(e, lock_step);
    if (status.code() == absl::StatusCode::kUnavailable &&
        std::string(e.what()).find("lock timeout") != std::string::npos) {
      return absl::UnavailableError(absl::StrCat(lock_step, ": not obtained within ",
                                                 absl::FormatDuration(options.lock_timeout)));
    }
    return status;
  }
  // From here on the session holds the lock; it is released when the connection closes.

  std::map<int64_t, std::pair<std::string, std::string>> recorded;  // version -> (name, checksum)
  try {
    pqxx::nontransaction read(*conn);
    for (const auto& row :
         read.exec("SELECT version, name, checksum FROM schema_migrations ORDER BY version")) {
      recorded[row[0].as<int64_t>()] = {row[1].as<std::string>(), row[2].as<std::string>()};
    }
  } catch (const std::exception& e) {
    return PgExceptionToStatus(e, "migrations: reading schema_migrations");
  }

  MigrationReport report;
  std::vector<const MigrationFile*> pending;
  std::map<int64_t, const MigrationFile*> on_disk;
  for (const auto& m : *files) on_disk[m.version] = &m;
  for (const auto& [version, entry] : recorded) {
    const auto& [name, checksum] = entry;
    auto it = on_disk.find(version);
    if (it == on_disk.end()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "migration ", version, "_", name, ".sql is recorded as applied but is not in ",
          dir.string(), "; refusing to migrate a database that is ahead of this release"));
    }
    if (it->second->sha256_hex != checksum) {
      return absl::FailedPreconditionError(
          absl::StrCat("migration ", it->second->path.string(),
                       " was edited after it was applied (recorded sha256 ", checksum,
                       ", file now ", it->second->sha256_hex,
                       "); applied migrations must not change: add a new migration instead"));
    }
  }
  for (const auto& m : *files) {
    if (recorded.contains(m.version)) {
      report.already_applied.push_back(m);
    } else {
      pending.push_back(&m);
    }
  }

  for (const MigrationFile* m : pending) {
    const absl::Time start = absl::Now();
    try {
      RunMigration(*conn, *m);
      pqxx::work txn(*conn);
      txn.exec_params(kRecordSql, m->version, m->name, m->sha256_hex,
                      absl::ToInt64Milliseconds(absl::Now() - start));
      txn.commit();
    } catch (const std::exception& e) {
      absl::Status status = PgExceptionToStatus(e, absl::StrCat("migration ", m->path.string()));
      const std::string done =
          report.applied.empty()
              ? ""
              : absl::StrCat(" (applied before it: ", FileNames(report.applied), ")");
      return absl::Status(status.code() == absl::StatusCode::kInternal
                              ? absl::StatusCode::kFailedPrecondition
                              : status.code(),
                          absl::StrCat(status.message(), done));
    }
    report.applied.push_back(*m);
  }
  return report;
}

}  // namespace goodput::platform
