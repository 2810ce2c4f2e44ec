// Splits a PostgreSQL script into its statements, for what must run one statement at a time:
// a migration outside a transaction (CREATE INDEX CONCURRENTLY refuses to run in the implicit
// transaction of a multi-statement query string) and the migration lint.
//
//   absl::StatusOr<std::vector<SqlStatement>> s = SplitSqlStatements(
//       "CREATE INDEX CONCURRENTLY a ON t (x);\n-- comment\nDROP INDEX CONCURRENTLY b;");
//   // s->size() == 2, (*s)[1].line == 3
//
// The lexer knows what PostgreSQL's own psql splitter knows: '...' strings (with '' and E'\''
// escapes), "..." identifiers, $tag$...$tag$ bodies, -- and nested /* */ comments. A ';' inside
// any of them does not end a statement. Statements that are only whitespace and comments are
// dropped.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace goodput::platform {

struct SqlStatement {
  std::string text;  // without the terminating ';', surrounding whitespace trimmed
  int line = 1;      // 1-based line of the statement's first character in the script
};

// The statements of `script`. INVALID_ARGUMENT naming the line for a string, identifier,
// dollar-quoted body or comment that is never closed.
absl::StatusOr<std::vector<SqlStatement>> SplitSqlStatements(absl::string_view script);

// `statement` without its comments, with every run of whitespace made one space and
// upper-cased outside quotes, for matching by rule ("CREATE INDEX CONCURRENTLY ..."). String
// literals become '' and dollar-quoted bodies $$ $$, so a keyword inside them never matches.
std::string NormalizeSql(absl::string_view statement);

}  // namespace goodput::platform
