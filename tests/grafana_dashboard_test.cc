// The Grafana dashboard (charts/goodput/dashboards/goodput.json) against a real PostgreSQL
// with every migration applied: each panel's and variable's SQL, with Grafana's PostgreSQL
// macros expanded the way Grafana expands them, runs without error on an empty database and
// returns rows once a job has a few OFU windows and MFU reports.
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "services/platform/migrations.h"
#include "tests/support/postgres_server.h"
#include "tests/support/service_process.h"

namespace goodput::testing {
namespace {

using Json = nlohmann::json;

Json LoadDashboard() {
  std::ifstream in(SourceDir() / "charts/goodput/dashboards/goodput.json");
  std::stringstream text;
  text << in.rdbuf();
  return Json::parse(text.str(), nullptr, false);
}

struct Query {
  std::string where;  // "panel 3 (Fleet OFU) target A"
  std::string sql;
};

// Every SQL the dashboard runs: panel targets (also inside collapsed rows) and query variables.
std::vector<Query> Queries(const Json& dashboard) {
  std::vector<Query> queries;
  std::vector<const Json*> panels;
  for (const Json& p : dashboard["panels"]) {
    panels.push_back(&p);
    if (p.contains("panels")) {
      for (const Json& inner : p["panels"]) panels.push_back(&inner);
    }
  }
  for (const Json* p : panels) {
    if (!p->contains("targets")) continue;
    for (const Json& t : (*p)["targets"]) {
      queries.push_back({absl::StrCat("panel ", (*p)["id"].dump(), " (",
                                      (*p)["title"].get<std::string>(), ") target ",
                                      t["refId"].get<std::string>()),
                         t["rawSql"].get<std::string>()});
    }
  }
  for (const Json& v : dashboard["templating"]["list"]) {
    if (v["type"] == "query") {
      queries.push_back({absl::StrCat("variable ", v["name"].get<std::string>()), v["query"]});
    }
  }
  return queries;
}

// Grafana's PostgreSQL macros and template variables, expanded as Grafana does for a 24-hour
// range, a one-minute interval and multi-value variables (quoted, comma-separated).
std::string Expand(std::string sql, absl::Time from, absl::Time to) {
  auto ts = [](absl::Time t) {
    return absl::StrCat("'", absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", t, absl::UTCTimeZone()), "'");
  };
  sql = absl::StrReplaceAll(sql, {{"$__interval", "1m"},
                                  {"$__timeFrom()", ts(from)},
                                  {"$__timeTo()", ts(to)},
                                  {"$cluster", "'eos','other'"},
                                  {"$job", "'eos/42'"}});
  sql = std::regex_replace(sql, std::regex(R"(\$__timeFilter\(([^)]+)\))"),
                           "$1 BETWEEN " + ts(from) + " AND " + ts(to));
  // $__timeGroupAlias(col, 1m): buckets of the interval, in epoch seconds, named "time".
  sql = std::regex_replace(sql, std::regex(R"(\$__timeGroupAlias\(([^,]+),\s*1m\))"),
                           "floor(extract(epoch from $1)/60)*60 AS \"time\"");
  return sql;
}

class GrafanaDashboard : public ::testing::Test {
 protected:
  void SetUp() override {
    dashboard_ = LoadDashboard();
    ASSERT_FALSE(dashboard_.is_discarded()) << "the dashboard is not JSON";
    absl::StatusOr<std::unique_ptr<PostgresServer>> pg = PostgresServer::Create();
    ASSERT_TRUE(pg.ok()) << pg.status();
    pg_ = *std::move(pg);
    ASSERT_TRUE(pg_->CreateDatabase("goodput").ok());
    absl::StatusOr<platform::MigrationReport> migrated =
        platform::ApplyMigrations(pg_->Dsn("goodput"), (SourceDir() / "migrations").string());
    ASSERT_TRUE(migrated.ok()) << migrated.status();
  }

  Json dashboard_;
  std::unique_ptr<PostgresServer> pg_;
};

TEST_F(GrafanaDashboard, IsAPostgresDashboardWithUniquePanelsAndTheExpectedViews) {
  std::set<int> ids;
  std::set<std::string> titles;
  for (const Json& p : dashboard_["panels"]) {
    EXPECT_TRUE(ids.insert(p["id"].get<int>()).second) << "duplicate panel id " << p["id"];
    EXPECT_TRUE(p.contains("gridPos")) << p["title"];
    EXPECT_EQ(p["datasource"]["type"], "grafana-postgresql-datasource") << p["title"];
    titles.insert(p["title"].get<std::string>());
  }
  for (const char* title : {"Fleet OFU over time", "Per-job OFU", "Waste in GPU-hours",
                            "App MFU vs OFU by job", "App MFU vs OFU over time"}) {
    EXPECT_TRUE(titles.contains(title)) << title;
  }
  EXPECT_GE(Queries(dashboard_).size(), 10u);
}

TEST_F(GrafanaDashboard, EveryQueryRunsOnAnEmptyDatabaseAndReturnsRowsOnceThereAreWindows) {
  const absl::Time to = absl::Now();
  const absl::Time from = to - absl::Hours(24);
  const std::vector<Query> queries = Queries(dashboard_);
  for (const Query& q : queries) {
    absl::Status status = pg_->Execute("goodput", Expand(q.sql, from, to));
    EXPECT_TRUE(status.ok()) << q.where << ": " << status << "\n" << Expand(q.sql, from, to);
  }

  // One 8-GPU job: an hour of one-minute windows at 40% OFU (one GPU idle in the second
  // half), and framework reports claiming 80% MFU (a 2x overcount).
  ASSERT_TRUE(pg_->Execute("goodput", R"sql(
    INSERT INTO jobs (cluster, job_id, team, user_name, gpu_model, start_time, state)
    VALUES ('eos', '42', 'ml-infra', 'alice', 'NVIDIA H100 80GB HBM3', now() - interval '2 hours',
            'running');
    INSERT INTO ofu_windows (job, start_time, window_s, gpu_model, ofu, sample_count,
                             gpus_reporting, gpus_allocated, gpu_coverage, idle_gpu_count)
    SELECT (SELECT id FROM jobs WHERE job_id = '42'),
           date_trunc('minute', now()) - interval '90 minutes' + i * interval '1 minute', 60,
           'NVIDIA H100 80GB HBM3', 0.4 + 0.01 * (i % 3), 16, 8, 8, 1, CASE WHEN i > 30 THEN 1 ELSE 0 END
    FROM generate_series(0, 59) AS i;
    INSERT INTO mfu_reports (report_id, cluster, job_id, interval_start, interval_end, report,
                             app_mfu, peak_tflops, gpu_model)
    SELECT 'r' || i, 'eos', '42', now() - interval '90 minutes' + i * interval '5 minutes',
           now() - interval '85 minutes' + i * interval '5 minutes', '\x00'::bytea, 0.8, 989.4,
           'NVIDIA H100 80GB HBM3'
    FROM generate_series(0, 11) AS i;
  )sql")
                  .ok());
  for (const Query& q : queries) {
    const std::string sql = Expand(q.sql, from, to);
    absl::StatusOr<std::string> rows =
        pg_->QueryValue("goodput", absl::StrCat("SELECT count(*) FROM (", sql, ") AS panel"));
    ASSERT_TRUE(rows.ok()) << q.where << ": " << rows.status();
    int64_t n = 0;
    ASSERT_TRUE(absl::SimpleAtoi(*rows, &n));
    EXPECT_GT(n, 0) << q.where << " returned no rows\n" << sql;
  }
  // The figures are the ones the data implies: fleet OFU ~41%, MFU / OFU ~1.95.
  for (const Query& q : queries) {
    if (q.where.find("(Fleet OFU) target A") != std::string::npos) {
      absl::StatusOr<std::string> v = pg_->QueryValue("goodput", Expand(q.sql, from, to));
      ASSERT_TRUE(v.ok()) << v.status();
      double ofu = 0;
      ASSERT_TRUE(absl::SimpleAtod(*v, &ofu)) << *v;
      EXPECT_NEAR(ofu, 0.41, 0.01);
    }
    if (q.where.find("(Median app MFU / OFU)") != std::string::npos) {
      absl::StatusOr<std::string> v = pg_->QueryValue("goodput", Expand(q.sql, from, to));
      ASSERT_TRUE(v.ok()) << v.status();
      double ratio = 0;
      ASSERT_TRUE(absl::SimpleAtod(*v, &ratio)) << *v;
      EXPECT_NEAR(ratio, 0.8 / 0.41, 0.05);
    }
  }
}

}  // namespace
}  // namespace goodput::testing
