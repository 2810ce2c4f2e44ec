#include "services/platform/migration_lint.h"

#include <regex>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "services/platform/sql_split.h"

namespace goodput::platform {
namespace {

// A table name as normalized SQL spells it: schema-qualified or not, quoted or not; compared
// without its schema.
constexpr const char* kName =
    R"((?:"[^"]+"|[A-Z_][A-Z0-9_$]*)(?:\.(?:"[^"]+"|[A-Z_][A-Z0-9_$]*))?)";

std::string Unqualified(std::string name) {
  if (size_t dot = name.rfind('.'); dot != std::string::npos) name = name.substr(dot + 1);
  if (name.size() >= 2 && name.front() == '"') return name.substr(1, name.size() - 2);
  return absl::AsciiStrToUpper(name);
}

bool IsTimestampVersion(int64_t version) {
  // YYYYMMDDHHMMSS with a plausible date and time.
  if (version < 20000101000000 || version > 29991231235959) return false;
  const int64_t month = version / 100000000 % 100, day = version / 1000000 % 100;
  const int64_t hour = version / 10000 % 100, minute = version / 100 % 100, second = version % 100;
  return month >= 1 && month <= 12 && day >= 1 && day <= 31 && hour <= 23 && minute <= 59 &&
         second <= 59;
}

class Linter {
 public:
  Linter(const MigrationFile& file, std::vector<MigrationProblem>* out) : file_(file), out_(out) {}

  void Run() {
    if (!IsTimestampVersion(file_.version)) {
      Add(0, "version-not-timestamp",
          absl::StrCat("version ", file_.version,
                       " is not a UTC timestamp YYYYMMDDHHMMSS; name new migrations by the time "
                       "they were written (`date -u +%Y%m%d%H%M%S`) so branches never collide"));
    }
    absl::StatusOr<std::vector<SqlStatement>> statements = SplitSqlStatements(file_.sql);
    if (!statements.ok()) {
      Add(0, "unparsable", std::string(statements.status().message()));
      return;
    }
    // Tables this file creates: they are empty, so building on them is cheap.
    static const std::regex kCreateTable(
        std::string(R"(^CREATE (?:UNLOGGED |TEMP |TEMPORARY )?TABLE (?:IF NOT EXISTS )?()") +
        kName + ")");
    for (const SqlStatement& s : *statements) {
      std::smatch m;
      const std::string sql = NormalizeSql(s.text);
      if (std::regex_search(sql, m, kCreateTable)) created_.insert(Unqualified(m[1].str()));
    }
    for (const SqlStatement& s : *statements) Check(s.line, NormalizeSql(s.text));
  }

 private:
  bool Existing(const std::string& table) const { return !created_.contains(Unqualified(table)); }

  void Add(int line, std::string rule, std::string why) {
    out_->push_back({file_.FileName(), line, std::move(rule), std::move(why)});
  }

  void Check(int line, const std::string& sql) {
    const bool in_transaction = file_.mode != MigrationFile::Mode::kNoTransaction;
    std::smatch m;

    static const std::regex kIndex(
        std::string(
            R"(^CREATE (?:UNIQUE )?INDEX (CONCURRENTLY )?(?:IF NOT EXISTS )?(?:[^ ]+ )?ON (ONLY )?()") +
        kName + ")");
    if (std::regex_search(sql, m, kIndex)) {
      const bool concurrent = m[1].matched, only = m[2].matched;
      if (concurrent && in_transaction) {
        Add(line, "concurrent-in-transaction",
            "CREATE INDEX CONCURRENTLY cannot run in a transaction: start the file with "
            "`-- goodput: no-transaction`");
      } else if (!concurrent && !only && Existing(m[3].str())) {
        Add(line, "index-not-concurrent",
            absl::StrCat("CREATE INDEX on the existing table ", m[3].str(),
                         " blocks its writes while the index builds: use CREATE INDEX "
                         "CONCURRENTLY in a `-- goodput: no-transaction` file (for a "
                         "partitioned table: ON ONLY the parent, CONCURRENTLY on each "
                         "partition, then ALTER INDEX ... ATTACH PARTITION)"));
      }
      return;
    }
    if (absl::StartsWith(sql, "DROP INDEX CONCURRENTLY") && in_transaction) {
      Add(line, "concurrent-in-transaction",
          "DROP INDEX CONCURRENTLY cannot run in a transaction: start the file with "
          "`-- goodput: no-transaction`");
      return;
    }
    if (absl::StartsWith(sql, "REINDEX") && !absl::StrContains(sql, "CONCURRENTLY")) {
      Add(line, "reindex-locks", "REINDEX blocks writes: REINDEX ... CONCURRENTLY");
      return;
    }
    if (absl::StartsWith(sql, "VACUUM FULL") || absl::StartsWith(sql, "CLUSTER")) {
      Add(line, "table-rewrite",
          "VACUUM FULL and CLUSTER rewrite the table under an exclusive "
          "lock; not in a migration");
      return;
    }
    if (absl::StartsWith(sql, "LOCK ")) {
      Add(line, "explicit-lock", "LOCK TABLE in a migration stalls the services; not allowed");
      return;
    }

    static const std::regex kAlter(std::string(R"(^ALTER TABLE (?:IF EXISTS )?(?:ONLY )?()") +
                                   kName + ")");
    if (std::regex_search(sql, m, kAlter)) {
      const std::string table = m[1].str();
      if (!Existing(table)) return;
      if (std::regex_search(sql, std::regex(R"(ALTER (?:COLUMN )?[^ ]+ (?:SET DATA )?TYPE )"))) {
        Add(line, "table-rewrite",
            absl::StrCat("changing a column's type rewrites ", table,
                         " under an exclusive lock: add a new column, backfill it in batches, "
                         "switch readers"));
      }
      if (std::regex_search(
              sql,
              std::regex(
                  R"(ADD (?:COLUMN )?.*(?:CLOCK_TIMESTAMP|RANDOM|GEN_RANDOM_UUID|NEXTVAL|UUID_GENERATE_V4|TIMEOFDAY) ?\()")) ||
          std::regex_search(
              sql,
              std::regex(R"(ADD (?:COLUMN )?(?:IF NOT EXISTS )?[^ ]+ (?:BIG|SMALL)?SERIAL)")) ||
          std::regex_search(sql,
                            std::regex(R"(ADD (?:COLUMN )?.*GENERATED ALWAYS AS .* STORED)"))) {
        Add(line, "table-rewrite",
            absl::StrCat("a column with a volatile default or a stored generated column rewrites ",
                         table, ": add it without the default, then backfill in batches"));
      }
      if (absl::StrContains(sql, "SET NOT NULL")) {
        Add(line, "scan-under-lock",
            absl::StrCat("SET NOT NULL scans ", table,
                         " under an exclusive lock: ADD CONSTRAINT ... CHECK (col IS NOT NULL) "
                         "NOT VALID, then VALIDATE CONSTRAINT in a later migration"));
      }
      if (std::regex_search(sql,
                            std::regex(R"(ADD (?:CONSTRAINT [^ ]+ )?(?:FOREIGN KEY|CHECK))")) &&
          !absl::StrContains(sql, "NOT VALID")) {
        Add(line, "scan-under-lock",
            absl::StrCat("a FOREIGN KEY or CHECK constraint scans ", table,
                         " under a lock: add it NOT VALID, then VALIDATE CONSTRAINT in a later "
                         "migration"));
      }
      if (std::regex_search(sql,
                            std::regex(R"(ADD (?:CONSTRAINT [^ ]+ )?(?:PRIMARY KEY|UNIQUE))")) &&
          !absl::StrContains(sql, "USING INDEX")) {
        Add(line, "index-not-concurrent",
            absl::StrCat("a PRIMARY KEY or UNIQUE constraint builds its index on ", table,
                         " under a lock: CREATE UNIQUE INDEX CONCURRENTLY first, then ADD "
                         "CONSTRAINT ... USING INDEX"));
      }
      return;
    }

    static const std::regex kWrite(
        std::string(R"(^(?:WITH .* )?(UPDATE (?:ONLY )?|DELETE FROM (?:ONLY )?|INSERT INTO )()") +
        kName + ")");
    if (std::regex_search(sql, m, kWrite)) {
      const bool insert = absl::StartsWith(m[1].str(), "INSERT");
      if (insert && !absl::StrContains(sql, "SELECT")) return;  // seed rows (VALUES)
      if (!Existing(m[2].str())) return;
      if (file_.mode != MigrationFile::Mode::kBackfill) {
        Add(line, "backfill-in-migration",
            absl::StrCat(m[1].str(), m[2].str(),
                         " changes existing rows in the migration's transaction: put it in a "
                         "`-- goodput: backfill batch_rows=N` file with LIMIT :batch_rows"));
      }
    }
  }

  const MigrationFile& file_;
  std::vector<MigrationProblem>* out_;
  std::set<std::string> created_;
};

}  // namespace

std::string MigrationProblem::Message() const {
  return line > 0 ? absl::StrCat(file, " line ", line, ": [", rule, "] ", why)
                  : absl::StrCat(file, ": [", rule, "] ", why);
}

std::vector<MigrationProblem> LintMigration(const MigrationFile& file,
                                            const MigrationLintOptions& options) {
  std::vector<MigrationProblem> problems;
  if (file.version <= options.legacy_last_version) return problems;
  Linter(file, &problems).Run();
  return problems;
}

std::vector<MigrationProblem> LintMigrations(const std::vector<MigrationFile>& files,
                                             const MigrationLintOptions& options) {
  std::vector<MigrationProblem> problems;
  for (const MigrationFile& file : files) {
    std::vector<MigrationProblem> more = LintMigration(file, options);
    problems.insert(problems.end(), more.begin(), more.end());
  }
  return problems;
}

}  // namespace goodput::platform
