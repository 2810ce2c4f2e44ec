#include "services/platform/migration_lint.h"

#include <algorithm>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <tuple>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
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

// --- Citus readiness (LintDistribution) ---------------------------------------------------

// absl::ConsumePrefix for a std::string.
bool Consume(std::string* s, absl::string_view prefix) {
  if (!absl::StartsWith(*s, prefix)) return false;
  s->erase(0, prefix.size());
  return true;
}

// The index of the ')' matching the '(' at `open`, or npos.
size_t MatchParen(const std::string& s, size_t open) {
  int depth = 0;
  bool quoted = false;
  for (size_t i = open; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '"') quoted = !quoted;
    if (quoted) continue;
    if (c == '(') ++depth;
    if (c == ')' && --depth == 0) return i;
  }
  return std::string::npos;
}

// `s` split at the commas outside parentheses and quotes, each part trimmed.
std::vector<std::string> SplitTopLevel(const std::string& s) {
  std::vector<std::string> parts;
  int depth = 0;
  bool quoted = false;
  std::string cur;
  for (const char c : s) {
    if (c == '"') quoted = !quoted;
    if (!quoted) {
      if (c == '(') ++depth;
      if (c == ')') --depth;
      if (c == ',' && depth == 0) {
        parts.emplace_back(absl::StripAsciiWhitespace(cur));
        cur.clear();
        continue;
      }
    }
    cur.push_back(c);
  }
  if (!absl::StripAsciiWhitespace(cur).empty()) parts.emplace_back(absl::StripAsciiWhitespace(cur));
  return parts;
}

// `s` with everything inside parentheses blanked, so that keywords are matched at the top.
std::string TopLevelOnly(const std::string& s) {
  std::string out = s;
  int depth = 0;
  for (char& c : out) {
    if (c == ')') --depth;
    const bool inside = depth > 0;
    if (c == '(') ++depth;
    if (inside) c = ' ';
  }
  return out;
}

// The first word of `s` (up to a space or '('), as an unqualified upper-case name.
std::string FirstName(const std::string& s) {
  size_t end = 0;
  bool quoted = false;
  while (end < s.size()) {
    if (s[end] == '"') quoted = !quoted;
    if (!quoted && (s[end] == ' ' || s[end] == '(' || s[end] == ',')) break;
    ++end;
  }
  return Unqualified(s.substr(0, end));
}

// The text inside the first parenthesis at or after `from`, or nullopt.
std::optional<std::string> ParenAfter(const std::string& s, size_t from) {
  const size_t open = s.find('(', from);
  if (open == std::string::npos) return std::nullopt;
  const size_t close = MatchParen(s, open);
  if (close == std::string::npos) return std::nullopt;
  return s.substr(open + 1, close - open - 1);
}

// Column names of an index or key list; an expression counts as no column ("").
std::vector<std::string> Columns(const std::string& list) {
  std::vector<std::string> out;
  for (const std::string& item : SplitTopLevel(list)) {
    out.push_back(item.empty() || item.front() == '(' ? std::string() : FirstName(item));
  }
  return out;
}

std::string Lower(std::string s) { return absl::AsciiStrToLower(s); }

class DistributionLinter {
 public:
  explicit DistributionLinter(const std::vector<TableDistribution>& distribution) {
    for (const TableDistribution& d : distribution) {
      declared_[absl::AsciiStrToUpper(d.table)] = d;
    }
  }

  void Read(const MigrationFile& file) {
    absl::StatusOr<std::vector<SqlStatement>> statements = SplitSqlStatements(file.sql);
    if (!statements.ok()) return;  // LintMigration reports it
    for (const SqlStatement& s : *statements) {
      Where where{file.FileName(), s.line};
      Statement(where, NormalizeSql(s.text));
    }
  }

  std::vector<MigrationProblem> Problems() {
    std::vector<MigrationProblem> out;
    for (const auto& [name, table] : tables_) {
      auto d = declared_.find(name);
      if (d == declared_.end()) {
        out.push_back({table.where.file, table.where.line, "citus-undeclared-table",
                       absl::StrCat("table ", Lower(name),
                                    " is not declared distributed or reference: add it to "
                                    "services/platform/table_distribution.cc")});
        continue;
      }
      const bool distributed = d->second.kind == TableDistribution::Kind::kDistributed;
      const std::string column = absl::AsciiStrToUpper(d->second.column);
      if (distributed && !table.columns.contains(column)) {
        out.push_back({table.where.file, table.where.line, "citus-no-distribution-column",
                       absl::StrCat("table ", Lower(name), " is distributed by ", Lower(column),
                                    ", which it has no column of")});
      }
      for (const Key& k : table.keys) {
        if (k.kind == Key::kForeign) {
          CheckForeignKey(name, d->second, k, &out);
          continue;
        }
        if (!distributed) continue;
        const auto& cols = k.kind == Key::kExclude ? k.equal_columns : k.columns;
        if (std::find(cols.begin(), cols.end(), column) != cols.end()) continue;
        out.push_back(
            {k.where.file, k.where.line, "citus-key-without-distribution-column",
             absl::StrCat(KindName(k.kind), " ", Lower(k.name), " of ", Lower(name), " (",
                          Lower(absl::StrJoin(k.columns, ", ")), ") does not include ", Lower(name),
                          "'s distribution column ", Lower(column),
                          k.kind == Key::kExclude ? " compared with =" : "",
                          ": each shard enforces it alone; include the column, or declare the "
                          "table reference")});
      }
    }
    std::sort(out.begin(), out.end(), [](const MigrationProblem& a, const MigrationProblem& b) {
      return std::tie(a.file, a.line, a.rule, a.why) < std::tie(b.file, b.line, b.rule, b.why);
    });
    return out;
  }

 private:
  struct Where {
    std::string file;
    int line = 0;
  };
  struct Key {
    enum Kind { kPrimary, kUnique, kUniqueIndex, kExclude, kForeign } kind = kPrimary;
    std::string name = {};
    std::vector<std::string> columns = {};
    std::vector<std::string> equal_columns = {};  // an exclusion constraint's columns WITH =
    std::string ref_table = {};
    std::vector<std::string> ref_columns = {};  // empty: the referenced table's primary key
    Where where = {};
  };
  struct Table {
    Where where;
    std::set<std::string> columns;
    std::vector<Key> keys;
  };

  static const char* KindName(Key::Kind kind) {
    switch (kind) {
      case Key::kPrimary:
        return "primary key";
      case Key::kUnique:
        return "unique constraint";
      case Key::kUniqueIndex:
        return "unique index";
      case Key::kExclude:
        return "exclusion constraint";
      case Key::kForeign:
        return "foreign key";
    }
    return "key";
  }

  void CheckForeignKey(const std::string& table, const TableDistribution& from, const Key& k,
                       std::vector<MigrationProblem>* out) {
    auto to = declared_.find(k.ref_table);
    if (to == declared_.end()) return;  // undeclared: reported with its table
    const bool from_distributed = from.kind == TableDistribution::Kind::kDistributed;
    const bool to_distributed = to->second.kind == TableDistribution::Kind::kDistributed;
    if (!to_distributed) return;  // to a reference table: legal from anywhere
    std::string why;
    if (!from_distributed) {
      why = absl::StrCat("foreign key ", Lower(k.name), " from the reference table ", Lower(table),
                         " to the distributed table ", Lower(k.ref_table),
                         ": a reference table may only reference reference tables");
    } else {
      const std::string from_col = absl::AsciiStrToUpper(from.column);
      const std::string to_col = absl::AsciiStrToUpper(to->second.column);
      std::vector<std::string> ref_cols = k.ref_columns;
      if (ref_cols.empty()) {
        for (const Key& other : tables_[k.ref_table].keys) {
          if (other.kind == Key::kPrimary) ref_cols = other.columns;
        }
      }
      bool paired = false;
      for (size_t i = 0; i < k.columns.size() && i < ref_cols.size(); ++i) {
        paired = paired || (k.columns[i] == from_col && ref_cols[i] == to_col);
      }
      if (paired) return;
      why = absl::StrCat("foreign key ", Lower(k.name), " of ", Lower(table), " to ",
                         Lower(k.ref_table), " does not pair the distribution columns (",
                         Lower(from_col), " = ", Lower(to_col),
                         "): between distributed tables it must, so both rows are in one shard");
    }
    out->push_back({k.where.file, k.where.line, "citus-foreign-key", why});
  }

  void Statement(const Where& where, const std::string& sql) {
    std::smatch m;
    static const std::regex kCreateTable(
        std::string(R"(^CREATE (?:UNLOGGED |TEMP |TEMPORARY )?TABLE (?:IF NOT EXISTS )?()") +
        kName + ") ?");
    if (std::regex_search(sql, m, kCreateTable)) {
      const std::string name = Unqualified(m[1].str());
      const size_t after = static_cast<size_t>(m.position(0) + m.length(0));
      if (absl::StartsWith(sql.substr(after), "PARTITION OF")) return;  // a partition
      std::optional<std::string> body = ParenAfter(sql, after);
      if (!body) return;
      Table& table = tables_[name];
      table = Table{where, {}, {}};
      for (const std::string& item : SplitTopLevel(*body)) TableItem(where, name, item);
      return;
    }
    static const std::regex kAlter(std::string(R"(^ALTER TABLE (?:IF EXISTS )?(?:ONLY )?()") +
                                   kName + ") ");
    if (std::regex_search(sql, m, kAlter)) {
      const std::string name = Unqualified(m[1].str());
      if (!tables_.contains(name)) return;
      const std::string actions = sql.substr(static_cast<size_t>(m.position(0) + m.length(0)));
      for (std::string action : SplitTopLevel(actions)) {
        if (Consume(&action, "DROP CONSTRAINT ")) {
          Consume(&action, "IF EXISTS ");
          const std::string key = FirstName(action);
          auto& keys = tables_[name].keys;
          keys.erase(
              std::remove_if(keys.begin(), keys.end(), [&](const Key& k) { return k.name == key; }),
              keys.end());
        } else if (Consume(&action, "ADD ")) {
          if (!absl::StartsWith(action, "CONSTRAINT ") && !absl::StartsWith(action, "PRIMARY ") &&
              !absl::StartsWith(action, "UNIQUE") && !absl::StartsWith(action, "EXCLUDE") &&
              !absl::StartsWith(action, "FOREIGN ") && !absl::StartsWith(action, "CHECK")) {
            Consume(&action, "COLUMN ");
            Consume(&action, "IF NOT EXISTS ");
          }
          TableItem(where, name, action);
        }
      }
      return;
    }
    static const std::regex kUniqueIndex(
        std::string(
            R"(^CREATE UNIQUE INDEX (?:CONCURRENTLY )?(?:IF NOT EXISTS )?(?:([^ ]+) )?ON (?:ONLY )?()") +
        kName + ")");
    if (std::regex_search(sql, m, kUniqueIndex)) {
      const std::string table = Unqualified(m[2].str());
      std::optional<std::string> list =
          ParenAfter(sql, static_cast<size_t>(m.position(0) + m.length(0)));
      if (!list || !tables_.contains(table)) return;
      Key k{.kind = Key::kUniqueIndex,
            .name = m[1].matched ? Unqualified(m[1].str()) : std::string(),
            .columns = Columns(*list),
            .where = where};
      tables_[table].keys.push_back(std::move(k));
      return;
    }
    std::string rest = sql;
    if (Consume(&rest, "DROP INDEX ")) {
      Consume(&rest, "CONCURRENTLY ");
      Consume(&rest, "IF EXISTS ");
      for (const std::string& index : SplitTopLevel(TopLevelOnly(rest))) {
        const std::string key = FirstName(index);
        for (auto& [name, table] : tables_) {
          table.keys.erase(std::remove_if(table.keys.begin(), table.keys.end(),
                                          [&](const Key& k) {
                                            return k.kind == Key::kUniqueIndex && k.name == key;
                                          }),
                           table.keys.end());
        }
      }
      return;
    }
    if (Consume(&rest, "DROP TABLE ")) {
      Consume(&rest, "IF EXISTS ");
      for (const std::string& t : SplitTopLevel(rest)) tables_.erase(FirstName(t));
    }
  }

  // One item of CREATE TABLE's list or of ALTER TABLE ... ADD: a table constraint or a
  // column definition (with its inline constraints).
  void TableItem(const Where& where, const std::string& table, std::string item) {
    std::string name;
    if (Consume(&item, "CONSTRAINT ")) {
      name = FirstName(item);
      item = std::string(absl::StripAsciiWhitespace(item.substr(item.find(' ') + 1)));
    }
    Table& t = tables_[table];
    auto key_name = [&](const std::string& suffix, const std::vector<std::string>& cols) {
      if (!name.empty()) return name;
      return suffix == "PKEY" ? absl::StrCat(table, "_PKEY")
                              : absl::StrCat(table, "_", absl::StrJoin(cols, "_"), "_", suffix);
    };
    if (absl::StartsWith(item, "PRIMARY KEY") || absl::StartsWith(item, "UNIQUE")) {
      const bool primary = absl::StartsWith(item, "PRIMARY");
      Key k{.kind = primary ? Key::kPrimary : Key::kUnique, .where = where};
      const size_t using_index = item.find("USING INDEX ");
      if (using_index != std::string::npos) {
        // The constraint takes over a unique index built before (CONCURRENTLY).
        const std::string index = FirstName(item.substr(using_index + 12));
        for (auto it = t.keys.begin(); it != t.keys.end(); ++it) {
          if (it->kind == Key::kUniqueIndex && it->name == index) {
            k.columns = it->columns;
            t.keys.erase(it);
            break;
          }
        }
      } else if (std::optional<std::string> list = ParenAfter(item, 0)) {
        k.columns = Columns(*list);
      }
      k.name = key_name(primary ? "PKEY" : "KEY", k.columns);
      t.keys.push_back(std::move(k));
      return;
    }
    if (absl::StartsWith(item, "EXCLUDE")) {
      Key k{.kind = Key::kExclude, .where = where};
      if (std::optional<std::string> list = ParenAfter(item, 0)) {
        for (const std::string& element : SplitTopLevel(*list)) {
          const std::string col =
              element.empty() || element.front() == '(' ? std::string() : FirstName(element);
          k.columns.push_back(col);
          const size_t with = element.rfind(" WITH ");
          if (with != std::string::npos &&
              absl::StripAsciiWhitespace(element.substr(with + 6)) == "=") {
            k.equal_columns.push_back(col);
          }
        }
      }
      k.name = key_name("EXCL", k.columns);
      t.keys.push_back(std::move(k));
      return;
    }
    if (absl::StartsWith(item, "FOREIGN KEY")) {
      Key k{.kind = Key::kForeign, .where = where};
      if (std::optional<std::string> list = ParenAfter(item, 0)) k.columns = Columns(*list);
      const size_t ref = item.find(" REFERENCES ");
      if (ref != std::string::npos) ForeignTarget(item.substr(ref + 12), &k);
      k.name = key_name("FKEY", k.columns);
      t.keys.push_back(std::move(k));
      return;
    }
    if (absl::StartsWith(item, "CHECK") || absl::StartsWith(item, "LIKE ")) return;
    // A column definition.
    const std::string column = FirstName(item);
    if (column.empty()) return;
    t.columns.insert(column);
    const std::string top = TopLevelOnly(item);
    if (absl::StrContains(top, " PRIMARY KEY")) {
      t.keys.push_back({.kind = Key::kPrimary,
                        .name = absl::StrCat(table, "_PKEY"),
                        .columns = {column},
                        .where = where});
    }
    if (std::regex_search(top, std::regex(" UNIQUE( |$)"))) {
      t.keys.push_back({.kind = Key::kUnique,
                        .name = absl::StrCat(table, "_", column, "_KEY"),
                        .columns = {column},
                        .where = where});
    }
    const size_t ref = item.find(" REFERENCES ");
    if (ref != std::string::npos) {
      Key k{.kind = Key::kForeign,
            .name = absl::StrCat(table, "_", column, "_FKEY"),
            .columns = {column},
            .where = where};
      ForeignTarget(item.substr(ref + 12), &k);
      t.keys.push_back(std::move(k));
    }
  }

  // "t (a, b) ON DELETE ..." or "t ON DELETE ...".
  static void ForeignTarget(const std::string& target, Key* k) {
    k->ref_table = FirstName(target);
    const size_t open = target.find('(');
    if (open != std::string::npos && open <= k->ref_table.size() + 3) {
      if (std::optional<std::string> list = ParenAfter(target, open))
        k->ref_columns = Columns(*list);
    }
  }

  std::map<std::string, TableDistribution> declared_;
  std::map<std::string, Table> tables_;
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
  std::vector<MigrationProblem> more = LintDistribution(
      files, options.distribution != nullptr ? *options.distribution : ProjectTableDistribution());
  problems.insert(problems.end(), more.begin(), more.end());
  return problems;
}

std::vector<MigrationProblem> LintDistribution(const std::vector<MigrationFile>& files,
                                               const std::vector<TableDistribution>& distribution) {
  DistributionLinter linter(distribution);
  for (const MigrationFile& file : files) linter.Read(file);
  return linter.Problems();
}

}  // namespace goodput::platform
