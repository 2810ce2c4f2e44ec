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
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "services/platform/pg_pool.h"

namespace goodput::platform {
namespace {

namespace fs = std::filesystem;

// Key of the session advisory lock held while migrating ("goodput" + 0x01).
constexpr int64_t kMigrationLockKey = 0x676f6f6470757401;

constexpr const char* kCreateTableSql = R"sql(
CREATE TABLE IF NOT EXISTS schema_migrations (
  version     integer     PRIMARY KEY,
  name        text        NOT NULL,
  checksum    text        NOT NULL,
  applied_at  timestamptz NOT NULL DEFAULT now(),
  duration_ms bigint      NOT NULL DEFAULT 0
))sql";

constexpr const char* kRecordSql =
    "INSERT INTO schema_migrations (version, name, checksum, duration_ms) VALUES ($1, $2, $3, $4)";

std::string FileNames(const std::vector<MigrationFile>& files) {
  return absl::StrJoin(files, ", ",
                       [](std::string* out, const MigrationFile& f) { out->append(f.FileName()); });
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

absl::StatusOr<std::vector<MigrationFile>> LoadMigrationFiles(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return absl::NotFoundError(absl::StrCat("migrations folder ", dir.string(), " does not exist"));
  }
  static const std::regex kName(R"(^([0-9]{4,})_([a-z0-9_]+)\.sql$)");
  std::map<int, MigrationFile> by_version;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string file = entry.path().filename().string();
    if (entry.path().extension() != ".sql") continue;
    std::smatch match;
    if (!std::regex_match(file, match, kName)) {
      return absl::InvalidArgumentError(absl::StrCat("migration file ", entry.path().string(),
                                                     ": name must be NNNN_<lowercase_name>.sql"));
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

  std::map<int, std::pair<std::string, std::string>> recorded;  // version -> (name, checksum)
  try {
    pqxx::nontransaction read(*conn);
    for (const auto& row :
         read.exec("SELECT version, name, checksum FROM schema_migrations ORDER BY version")) {
      recorded[row[0].as<int>()] = {row[1].as<std::string>(), row[2].as<std::string>()};
    }
  } catch (const std::exception& e) {
    return PgExceptionToStatus(e, "migrations: reading schema_migrations");
  }

  MigrationReport report;
  std::vector<const MigrationFile*> pending;
  std::map<int, const MigrationFile*> on_disk;
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
      pqxx::work txn(*conn);
      txn.exec(m->sql);
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
