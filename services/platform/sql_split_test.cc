#include "services/platform/sql_split.h"

#include <gtest/gtest.h>

namespace goodput::platform {
namespace {

std::vector<std::string> Texts(absl::string_view script) {
  absl::StatusOr<std::vector<SqlStatement>> s = SplitSqlStatements(script);
  EXPECT_TRUE(s.ok()) << s.status();
  std::vector<std::string> out;
  if (s.ok()) {
    for (const SqlStatement& st : *s) out.push_back(st.text);
  }
  return out;
}

TEST(SplitSqlStatements, SplitsAtSemicolonsAndKeepsTheFirstLineOfEach) {
  absl::StatusOr<std::vector<SqlStatement>> s =
      SplitSqlStatements("CREATE INDEX CONCURRENTLY a ON t (x);\n-- note\n\nDROP INDEX b;\n");
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->size(), 2u);
  EXPECT_EQ((*s)[0].text, "CREATE INDEX CONCURRENTLY a ON t (x)");
  EXPECT_EQ((*s)[0].line, 1);
  EXPECT_EQ((*s)[1].text, "-- note\n\nDROP INDEX b");
  EXPECT_EQ((*s)[1].line, 2);
}

TEST(SplitSqlStatements, SemicolonsInsideQuotesBodiesAndCommentsDoNotSplit) {
  EXPECT_EQ(Texts("SELECT 'a;b', 'it''s;';SELECT 2"),
            (std::vector<std::string>{"SELECT 'a;b', 'it''s;'", "SELECT 2"}));
  EXPECT_EQ(Texts("SELECT \"odd;name\" FROM t; SELECT E'\\';'"),
            (std::vector<std::string>{"SELECT \"odd;name\" FROM t", "SELECT E'\\';'"}));
  EXPECT_EQ(Texts("DO $$ BEGIN PERFORM 1; END $$; DO $body$ x; $$ y; $body$;"),
            (std::vector<std::string>{"DO $$ BEGIN PERFORM 1; END $$", "DO $body$ x; $$ y; $body$"}));
  EXPECT_EQ(Texts("SELECT 1 /* a; /* nested; */ still; */ ; -- c;\nSELECT $1"),
            (std::vector<std::string>{"SELECT 1 /* a; /* nested; */ still; */", "-- c;\nSELECT $1"}));
}

TEST(SplitSqlStatements, DropsStatementsThatAreOnlyCommentsAndSpace) {
  EXPECT_EQ(Texts("-- goodput: no-transaction\n;; /* x */ ;\n"), std::vector<std::string>{});
}

TEST(SplitSqlStatements, AnUnclosedSpanIsRefusedWithItsLine) {
  absl::StatusOr<std::vector<SqlStatement>> s = SplitSqlStatements("SELECT 1;\nSELECT 'open;\n");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.status().message(), "line 2: string literal is never closed");
  EXPECT_FALSE(SplitSqlStatements("DO $x$ never").ok());
  EXPECT_FALSE(SplitSqlStatements("/* never").ok());
}

TEST(NormalizeSql, UppercasesCodeCollapsesSpaceAndHidesLiteralsAndComments) {
  EXPECT_EQ(NormalizeSql("create  index\n concurrently -- why\n i on \"Mixed\" (x)"),
            "CREATE INDEX CONCURRENTLY I ON \"Mixed\" (X)");
  EXPECT_EQ(NormalizeSql("update t set note = 'delete from x' where $$update$$ = 1"),
            "UPDATE T SET NOTE = '' WHERE $$ $$ = 1");
}

}  // namespace
}  // namespace goodput::platform
