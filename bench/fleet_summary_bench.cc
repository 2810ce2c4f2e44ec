// The fleet summary (OfuService.GetFleetSummary, what the dashboard's fleet page and its live
// poll ask) over a day of a large fleet: from hourly figures (ofu_fleet_hours, with the partial
// hours at the range's ends read window by window) against the baseline of reading and summing
// every job-level window, as the service did before migration 0061. Also what keeping the
// hourly figures costs when windows are committed.
//
//   goodput_fleet_summary_bench [--jobs 2000] [--hours 24] [--window-s 60] [--rounds 3]
//
// Starts a private PostgreSQL, applies the migrations, and writes the jobs and their windows
// with SQL (OFU spread over every decile, some windows without OFU, idle GPUs). Progress goes
// to stderr, the table to stdout.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/bench_flags.h"
#include "services/ofu/ofu_queries.h"
#include "services/ofu/ofu_store.h"
#include "services/platform/migrations.h"
#include "services/platform/pg_pool.h"
#include "tests/support/postgres_server.h"

namespace goodput {
namespace {

struct Params {
  int jobs = 2000;
  int hours = 24;
  int window_s = 60;
  int rounds = 3;
};

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int Fail(const absl::Status& status) {
  std::cerr << "goodput_fleet_summary_bench: " << status << "\n";
  return 1;
}

int Run(const Params& p) {
  auto pg = testing::PostgresServer::Create(
      {.settings = {{"shared_buffers", "512MB"}, {"max_wal_size", "4GB"}}});
  if (!pg.ok()) return Fail(pg.status());
  if (auto s = (*pg)->CreateDatabase("goodput"); !s.ok()) return Fail(s);
  const std::string dsn = (*pg)->Dsn("goodput");
  auto migrated = platform::ApplyMigrations(dsn, std::string(GOODPUT_SOURCE_DIR) + "/migrations");
  if (!migrated.ok()) return Fail(migrated.status());
  auto pool = platform::PgPool::Create(
      // No statement timeout: the baseline can take longer than the services' 60 s.
      {.dsn = dsn, .max_connections = 4, .statement_timeout = absl::ZeroDuration()});
  if (!pool.ok()) return Fail(pool.status());

  constexpr int64_t kHourMs = 3'600'000;
  const int64_t start_ms = (absl::ToUnixMillis(absl::Now()) / kHourMs - p.hours) * kHourMs;
  const int64_t windows_per_job = int64_t{p.hours} * 3600 / p.window_s;
  std::cerr << "writing " << p.jobs << " jobs of 8 GPUs with " << windows_per_job
            << " windows each (" << p.jobs * windows_per_job << " windows)...\n";
  const auto seeded = std::chrono::steady_clock::now();
  std::vector<int64_t> ids;
  {
    pqxx::connection c(dsn);
    pqxx::work txn(c);
    for (const pqxx::row& r : txn.exec_params(
             "INSERT INTO jobs (cluster, job_id, scheduler, team, user_name, gpu_model, "
             "start_time) SELECT 'bench', 'job-' || g, 'slurm', 'team-' || (g % 20), 'user-' || "
             "(g % 200), 'NVIDIA H100 80GB HBM3', timestamptz 'epoch' + $1 * interval '1 "
             "millisecond' FROM generate_series(1, $2) g RETURNING id",
             start_ms, p.jobs)) {
      ids.push_back(r[0].as<int64_t>());
    }
    txn.commit();
  }
  std::sort(ids.begin(), ids.end());
  // One transaction per 100 jobs, so that progress shows and no transaction is huge.
  for (size_t i = 0; i < ids.size(); i += 100) {
    pqxx::connection c(dsn);
    pqxx::work txn(c);
    txn.exec_params(
        "INSERT INTO ofu_windows (job, gpu, start_time, window_s, gpu_model, ofu, sample_count, "
        "gpus_reporting, gpus_allocated, gpu_equivalents, idle_gpus, idle_gpu_count, finalized) "
        "SELECT j, '', timestamptz 'epoch' + ($1::bigint + k * $2 * 1000) * interval '1 "
        "millisecond', "
        "$2, 'NVIDIA H100 80GB HBM3', "
        "CASE WHEN (j + k) % 23 = 0 THEN NULL ELSE ((j * 7919 + k * 104729) % 1000) / 1000.0 "
        "END, 48, 8, 8, 8, CASE WHEN (j * 3 + k) % 11 = 0 THEN ARRAY['h/1/'] ELSE '{}' END, "
        "CASE WHEN (j * 3 + k) % 11 = 0 THEN 1 ELSE 0 END, true "
        "FROM (SELECT id AS j FROM jobs WHERE id BETWEEN $3 AND $4) jj, "
        "generate_series(0, $5 - 1) k",
        start_ms, p.window_s, ids[i], ids[std::min(ids.size(), i + 100) - 1], windows_per_job);
    txn.commit();
    std::cerr << "\r  " << std::min(ids.size(), i + 100) << "/" << ids.size() << " jobs"
              << std::flush;
  }
  std::cerr << " (" << absl::StrFormat("%.0f", Seconds(seeded)) << " s)\n";
  std::cerr << "hourly figures of the windows written (what migration 0061 does once)...\n";
  const auto backfill_start = std::chrono::steady_clock::now();
  int64_t hour_rows = 0;
  {
    pqxx::connection c(dsn);
    pqxx::work txn(c);
    txn.exec(
        "INSERT INTO ofu_fleet_hours SELECT * FROM ofu_fleet_sums(NULL, '-infinity', "
        "'infinity', 0.2::float8)");
    hour_rows = txn.exec("SELECT count(*) FROM ofu_fleet_hours")[0][0].as<int64_t>();
    txn.commit();
  }
  const double backfill_s = Seconds(backfill_start);
  {
    pqxx::connection c(dsn);
    pqxx::nontransaction n(c);
    n.exec("VACUUM ANALYZE ofu_windows");
    n.exec("VACUUM ANALYZE ofu_fleet_hours");
    n.exec("VACUUM ANALYZE jobs");
  }

  ofu::OfuStore store(pool->get(), ofu::ShardConfig{});
  // A day that does not start or end on an hour, as the dashboard asks (now - 24 h, now).
  const int64_t from = start_ms + 17 * 60'000;
  const int64_t to = start_ms + int64_t{p.hours} * kHourMs - 13 * 60'000;
  const std::vector<ofu::FleetDimension> by_user = {ofu::FleetDimension::kUser};
  std::vector<double> every_s, hourly_s;
  size_t windows_read = 0, pieces_read = 0;
  ofu::FleetGroupFigures every_total, hourly_total;
  for (int round = 0; round < p.rounds; ++round) {
    std::cerr << "round " << round + 1 << "/" << p.rounds << "\n";
    auto t = std::chrono::steady_clock::now();
    auto windows = store.FleetWindows(from, to);
    if (!windows.ok()) return Fail(windows.status());
    every_total =
        ofu::SummarizeFleet(*windows, {}, by_user, ofu::kFleetHoursLowEfficiencyOfu).second;
    every_s.push_back(Seconds(t));
    windows_read = windows->size();
    windows->clear();
    windows->shrink_to_fit();

    t = std::chrono::steady_clock::now();
    auto pieces = store.FleetPieces(from, to, ofu::kFleetHoursLowEfficiencyOfu);
    if (!pieces.ok()) return Fail(pieces.status());
    hourly_total = ofu::SummarizeFleet(*pieces, {}, by_user).second;
    hourly_s.push_back(Seconds(t));
    pieces_read = pieces->size();
  }

  // Keeping the figures: one more window for every job, committed as ofu commits a round,
  // against the baseline of as many per-GPU windows (the same upsert, no hourly figures).
  auto state = store.LoadState();
  if (!state.ok()) return Fail(state.status());
  auto next_windows = [&](bool per_gpu) {
    std::vector<ofu::WindowResult> next;
    for (int64_t id : ids) {
      ofu::WindowResult w;
      w.job = id;
      if (per_gpu) w.gpu = "h/0/";
      w.start_ms = start_ms + windows_per_job * p.window_s * 1000;
      w.end_ms = w.start_ms + p.window_s * 1000;
      w.gpu_model = "NVIDIA H100 80GB HBM3";
      w.ofu = 0.4;
      w.sample_count = 48;
      w.gpus_reporting = w.gpus_allocated = per_gpu ? 1 : 8;
      w.gpu_equivalents = w.gpus_allocated;
      next.push_back(w);
    }
    return next;
  };
  auto t = std::chrono::steady_clock::now();
  if (auto s = store.Commit(next_windows(true), {}, {}, *state, p.window_s); !s.ok()) {
    return Fail(s);
  }
  const double per_gpu_commit_s = Seconds(t);
  t = std::chrono::steady_clock::now();
  if (auto s = store.Commit(next_windows(false), {}, {}, *state, p.window_s); !s.ok()) {
    return Fail(s);
  }
  const double commit_s = Seconds(t);

  const double every = Median(every_s), hourly = Median(hourly_s);
  std::printf(
      "fleet summary by user over %.1f h of %d jobs x 8 GPUs (%d GPUs), %d s windows, "
      "median of %d rounds\n",
      static_cast<double>(to - from) / kHourMs, p.jobs, p.jobs * 8, p.window_s, p.rounds);
  std::printf("%-52s %12s %10s %10s\n", "path", "rows read", "ms", "speed-up");
  std::printf("%-52s %12zu %10.1f %10s\n", "every job-level window (baseline: before 0061)",
              windows_read, every * 1000, "1.0");
  std::printf("%-52s %12zu %10.1f %10.1f\n", "whole hours from ofu_fleet_hours + partial hours",
              pieces_read, hourly * 1000, every / hourly);
  std::printf("GPU-hours %.6f vs %.6f, OFU %.9f vs %.9f (relative difference %.1e)\n",
              every_total.gpu_hours, hourly_total.gpu_hours, every_total.ofu_mean,
              hourly_total.ofu_mean,
              std::abs(every_total.ofu_mean - hourly_total.ofu_mean) /
                  std::max(1e-300, std::abs(every_total.ofu_mean)));
  std::printf("hourly figures of %zu windows written once (migration 0061): %.1f s, %lld rows\n",
              static_cast<size_t>(p.jobs * windows_per_job), backfill_s,
              static_cast<long long>(hour_rows));
  std::printf(
      "committing one window for each of %d jobs: job-level (with their hours' figures) "
      "%.1f ms, per-GPU (baseline, none) %.1f ms\n",
      p.jobs, commit_s * 1000, per_gpu_commit_s * 1000);
  return 0;
}

}  // namespace
}  // namespace goodput

int main(int argc, char** argv) {
  goodput::Params p;
  if (!goodput::bench::ParsePositiveIntFlags(argc, argv,
                                             {{"--jobs", &p.jobs},
                                              {"--hours", &p.hours},
                                              {"--window-s", &p.window_s},
                                              {"--rounds", &p.rounds}})) {
    return 2;
  }
  return goodput::Run(p);
}
