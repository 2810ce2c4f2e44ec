// goodput-ofu against a real PostgreSQL (and Redis): samples inserted into `samples` as
// ingest stores them become windows whose OFU matches the simulator's truth; a consumer
// killed mid-stream and restarted writes the same windows as one that ran through; samples
// of concurrent writers that commit out of seq order are neither skipped nor counted twice;
// queries paginate, downsample and answer NOT_FOUND for unknown jobs; the latest window
// comes from Redis and from PostgreSQL when Redis is down.

#include "services/ofu/ofu_service.h"

#include <atomic>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "services/api/api_convert.h"
#include "services/ofu/ofu_consumer.h"
#include "services/ofu/ofu_live.h"
#include "services/ofu/ofu_store.h"
#include "services/ofu/proto_convert.h"
#include "services/platform/migrations.h"
#include "services/platform/pg_pool.h"
#include "services/platform/redis_client.h"
#include "tests/support/postgres_server.h"
#include "tests/support/redis_server.h"
#include "tests/support/service_process.h"
#include "tools/fleetsim/fleet_sim.h"

namespace goodput::ofu {
namespace {

using ::goodput::testing::PostgresServer;
using ::goodput::testing::RedisServer;

constexpr char kCluster[] = "sim";
constexpr char kH100[] = "NVIDIA H100 80GB HBM3";

struct Row {
  int64_t t_ms;
  std::string host;
  int gpu_index;
  double tensor_active, sm_clock_mhz, dram_active, gr_engine_active, fb_used_mib, power_w,
      energy_mj;
  double true_ofu;
};

// One simulated job, recorded from the fleet simulator.
struct SimJob {
  std::string job_id;
  int gpus = 0;
  int64_t start_ms = 0, end_ms = 0;
  std::vector<Row> rows;
  double true_ofu = 0;
};

class Recorder : public sim::FleetSink {
 public:
  explicit Recorder(SimJob* job) : job_(job) {}
  void OnJobStart(const sim::JobTruth& j) override {
    if (!job_->job_id.empty()) return;
    job_->job_id = j.job_id;
    job_->gpus = j.gpu_count;
    job_->start_ms = j.start_s * 1000;
    job_->end_ms = j.end_s * 1000;
  }
  void OnSamples(const sim::JobTruth& j, int64_t, int64_t,
                 const std::vector<sim::GpuSample>& samples) override {
    if (j.job_id != job_->job_id) return;
    for (const sim::GpuSample& s : samples) {
      job_->rows.push_back({s.timestamp_ms, s.hostname, s.device, s.tensor_active, s.sm_clock_mhz,
                            s.dram_active, s.gr_engine_active, s.fb_used_mib, s.power_w,
                            s.energy_mj, s.true_ofu});
    }
  }

 private:
  SimJob* job_;
};

SimJob SimulateOneJob(uint64_t seed) {
  sim::FleetConfig c = sim::SmallFleetConfig(seed);
  c.workloads = 1;
  c.jobs_per_workload_min = c.jobs_per_workload_max = 1;
  c.job_duration_min_s = c.job_duration_max_s = 3600;
  c.gpu_counts = {{16, 1}};
  c.models = {{.model_name = kH100}};
  c.sample_interval_s = 10;
  auto simulator = sim::FleetSimulator::Create(c);
  EXPECT_TRUE(simulator.ok()) << simulator.status();
  SimJob job;
  Recorder recorder(&job);
  while ((*simulator)->Step(recorder)) {
  }
  double sum = 0;
  for (const Row& r : job.rows) sum += r.true_ofu;
  job.true_ofu = job.rows.empty() ? 0 : sum / static_cast<double>(job.rows.size());
  return job;
}

std::string Num(double v) { return std::isfinite(v) ? absl::StrFormat("%.9g", v) : "NULL"; }

class OfuIntegration : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = PostgresServer::Create();
    ASSERT_TRUE(server.ok()) << server.status();
    pg_ = *std::move(server);
  }

  // A migrated database and a pool on it.
  std::unique_ptr<platform::PgPool> NewDatabase(const std::string& name) {
    EXPECT_TRUE(pg_->CreateDatabase(name).ok());
    auto report =
        platform::ApplyMigrations(pg_->Dsn(name), goodput::testing::SourceDir() / "migrations");
    EXPECT_TRUE(report.ok()) << report.status();
    auto pool = platform::PgPool::Create({.dsn = pg_->Dsn(name)});
    EXPECT_TRUE(pool.ok()) << pool.status();
    return pool.ok() ? *std::move(pool) : nullptr;
  }

  static void Exec(platform::PgPool& pool, const std::string& sql) {
    absl::Status s = pool.RunTransaction([&](pqxx::work& txn) {
      txn.exec(sql);
      return absl::OkStatus();
    });
    ASSERT_TRUE(s.ok()) << s;
  }

  // Registers the job as a scheduler would: the job row and its GPU allocation.
  static int64_t RegisterJob(platform::PgPool& pool, const SimJob& job) {
    auto id = pool.RunTransactionFor<int64_t>([&](pqxx::work& txn) -> absl::StatusOr<int64_t> {
      txn.exec(absl::StrCat("SELECT samples_create_partitions(timestamptz 'epoch' + ",
                            job.start_ms - 86'400'000,
                            " * interval '1 millisecond', timestamptz 'epoch' + ",
                            job.end_ms + 86'400'000, " * interval '1 millisecond')"));
      pqxx::result r = txn.exec_params(
          "INSERT INTO jobs (cluster, job_id, scheduler, team, gpu_model, start_time, end_time) "
          "VALUES ($1, $2, 'slurm', 'robotics', $3, timestamptz 'epoch' + $4 * interval '1 "
          "millisecond', timestamptz 'epoch' + $5 * interval '1 millisecond') RETURNING id",
          kCluster, job.job_id, kH100, job.start_ms, job.end_ms);
      const int64_t id = r[0][0].as<int64_t>();
      std::vector<std::pair<std::string, int>> gpus;
      for (const Row& row : job.rows) {
        std::pair<std::string, int> g{row.host, row.gpu_index};
        if (std::find(gpus.begin(), gpus.end(), g) == gpus.end()) gpus.push_back(g);
      }
      for (const auto& [host, index] : gpus) {
        txn.exec_params(
            "INSERT INTO job_gpus (job, cluster, host, gpu_index, valid) VALUES ($1, $2, $3, $4, "
            "tstzrange(timestamptz 'epoch' + $5 * interval '1 millisecond', timestamptz 'epoch' "
            "+ $6 * interval '1 millisecond'))",
            id, kCluster, host, index, job.start_ms, job.end_ms + 1);
      }
      return id;
    });
    EXPECT_TRUE(id.ok()) << id.status();
    return id.ok() ? *id : 0;
  }

  // Stores rows [from, to) of the job's samples as ingest does (attributed to `job`).
  static void InsertSamples(platform::PgPool& pool, int64_t job, const SimJob& sim, size_t from,
                            size_t to) {
    constexpr size_t kChunk = 1000;
    for (size_t i = from; i < to; i += kChunk) {
      std::vector<std::string> values;
      for (size_t k = i; k < std::min(to, i + kChunk); ++k) {
        const Row& r = sim.rows[k];
        values.push_back(absl::StrCat(
            "(timestamptz 'epoch' + ", r.t_ms, " * interval '1 millisecond', '", kCluster, "', '",
            r.host, "', ", r.gpu_index, ", '", kH100, "', ", job, ", ", Num(r.tensor_active), ", ",
            Num(r.sm_clock_mhz), ", ", Num(r.dram_active), ", ", Num(r.gr_engine_active), ", ",
            Num(r.fb_used_mib), ", ", Num(r.power_w), ", ", Num(r.energy_mj), ")"));
      }
      Exec(pool, absl::StrCat("INSERT INTO samples (sample_time, cluster, host, gpu_index, "
                              "gpu_model, job, tensor_active, sm_clock_mhz, dram_active, "
                              "gr_engine_active, fb_used_mib, power_w, energy_mj) VALUES ",
                              absl::StrJoin(values, ",")));
    }
  }

  // Steps the consumer until the samples committed so far are consumed.
  static void Drain(OfuConsumer& consumer) {
    for (int i = 0; i < 10'000; ++i) {
      absl::StatusOr<bool> done = consumer.StepOnce();
      ASSERT_TRUE(done.ok()) << done.status();
      if (*done) return;
    }
    FAIL() << "consumer did not catch up";
  }

  // All windows of the database, one line each, for comparing runs.
  static std::string DumpWindows(platform::PgPool& pool) {
    auto dump =
        pool.RunTransactionFor<std::string>([](pqxx::work& txn) -> absl::StatusOr<std::string> {
          std::string out;
          for (const pqxx::row& r : txn.exec(
                   // A per-GPU window is final with its job (OfuStore::Windows).
                   "SELECT w.job, gpu, start_time, sample_count, round(ofu::numeric, 12), "
                   "gpus_reporting, gpus_allocated, flags, "
                   "finalized OR coalesce(start_time < st.final_before, false), "
                   "w.late_sample_count, round(energy_j::numeric, 3) FROM ofu_windows w "
                   "LEFT JOIN ofu_job_state st ON st.job = w.job "
                   "ORDER BY w.job, start_time, gpu")) {
            for (const pqxx::field& f : r) absl::StrAppend(&out, f.c_str(), "|");
            out += "\n";
          }
          return out;
        });
    EXPECT_TRUE(dump.ok()) << dump.status();
    return dump.ok() ? *dump : "";
  }

  std::unique_ptr<PostgresServer> pg_;
};

struct Harness {
  Harness(platform::PgPool* pool, std::atomic<int64_t>* now, int page_limit,
          platform::RedisClient* redis = nullptr) {
    store = std::make_unique<OfuStore>(pool, ShardConfig{});
    cache = std::make_unique<LatestCache>(redis, absl::Hours(1));
    EngineOptions engine;
    consumer = std::make_unique<OfuConsumer>(
        store.get(), &core::GpuCatalog::BuiltIn(), engine,
        ConsumerOptions{.page_limit = page_limit},
        [this](const CommittedWindows& c) {
          cache->Publish(c, 60);
          hub.Publish(c, 60);
        },
        platform::Logger(), [now] { return now->load(); });
    service = std::make_unique<OfuServiceImpl>(store.get(), consumer.get(), cache.get(), &hub,
                                               &core::GpuCatalog::BuiltIn(),
                                               OfuServiceOptions{.window_s = 60});
  }
  std::unique_ptr<OfuStore> store;
  std::unique_ptr<LatestCache> cache;
  StreamHub hub;
  std::unique_ptr<OfuConsumer> consumer;
  std::unique_ptr<OfuServiceImpl> service;
};

v1::JobKey Key(const std::string& job_id) {
  v1::JobKey k;
  k.set_cluster(kCluster);
  k.set_job_id(job_id);
  return k;
}

TEST_F(OfuIntegration, ReplayedJobYieldsTheSimulatorsTrueOfuWithinHalfAPoint) {
  const SimJob sim = SimulateOneJob(7);
  ASSERT_GT(sim.rows.size(), 1000u);
  auto pool = NewDatabase("goodput");
  const int64_t job = RegisterJob(*pool, sim);
  std::atomic<int64_t> now{absl::ToUnixMillis(absl::Now())};
  Harness h(pool.get(), &now, 5000);
  ASSERT_TRUE(h.consumer->Restore().ok());
  InsertSamples(*pool, job, sim, 0, sim.rows.size());
  Drain(*h.consumer);
  now += 3'600'000;  // the job went quiet: its last windows are flushed
  Drain(*h.consumer);

  v1::GetJobSummaryRequest req;
  *req.mutable_job() = Key(sim.job_id);
  v1::GetJobSummaryResponse resp;
  ASSERT_TRUE(h.service->DoGetJobSummary(req, &resp).ok());
  const v1::JobOfuSummary& s = resp.summary();
  EXPECT_NEAR(s.ofu(), sim.true_ofu, 0.005) << "truth " << sim.true_ofu;
  EXPECT_EQ(s.sample_count(), static_cast<int64_t>(sim.rows.size()));
  EXPECT_EQ(s.gpus_allocated(), sim.gpus);
  EXPECT_TRUE(s.finalized());
  EXPECT_TRUE(s.has_steady_state_ofu());
  EXPECT_GE(s.steady_state_ofu(), s.ofu());
  EXPECT_NEAR(s.gpu_hours(), sim.gpus * (sim.end_ms - sim.start_ms) / 3.6e6, 0.3);
  EXPECT_NEAR(s.effective_gpu_hours(), s.gpu_hours() * s.ofu(), 0.1 * s.gpu_hours());
  EXPECT_GT(s.energy_j(), 0);
  EXPECT_LE(s.ofu_ci95_low(), s.ofu());
  EXPECT_GE(s.ofu_ci95_high(), s.ofu());
  std::cout << "ofu=" << s.ofu() << " truth=" << sim.true_ofu << " steady=" << s.steady_state_ofu()
            << " samples=" << s.sample_count() << "\n";
}

TEST_F(OfuIntegration, KilledAndRestartedConsumerWritesTheSameWindowsAsAnUninterruptedOne) {
  const SimJob sim = SimulateOneJob(11);
  auto straight_pool = NewDatabase("straight");
  auto killed_pool = NewDatabase("killed");
  const int64_t job_a = RegisterJob(*straight_pool, sim);
  const int64_t job_b = RegisterJob(*killed_pool, sim);
  ASSERT_EQ(job_a, job_b);
  std::atomic<int64_t> now{absl::ToUnixMillis(absl::Now())};

  Harness straight(straight_pool.get(), &now, 700);
  ASSERT_TRUE(straight.consumer->Restore().ok());
  auto victim = std::make_unique<Harness>(killed_pool.get(), &now, 700);
  ASSERT_TRUE(victim->consumer->Restore().ok());

  const size_t chunks = 12;
  const size_t per_chunk = sim.rows.size() / chunks + 1;
  for (size_t c = 0; c < chunks; ++c) {
    const size_t from = c * per_chunk, to = std::min(sim.rows.size(), from + per_chunk);
    InsertSamples(*straight_pool, job_a, sim, from, to);
    InsertSamples(*killed_pool, job_b, sim, from, to);
    Drain(*straight.consumer);
    if (c == 5 || c == 9) {
      // Part of a round, then the process dies: nothing but the last commit survives.
      ASSERT_TRUE(victim->consumer->StepOnce().ok());
      victim.reset();
      victim = std::make_unique<Harness>(killed_pool.get(), &now, 700);
      ASSERT_TRUE(victim->consumer->Restore().ok());
    }
    Drain(*victim->consumer);
  }
  now += 3'600'000;
  Drain(*straight.consumer);
  Drain(*victim->consumer);
  const std::string a = DumpWindows(*straight_pool);
  const std::string b = DumpWindows(*killed_pool);
  EXPECT_GT(a.size(), 1000u);
  EXPECT_EQ(a, b);
  auto total = killed_pool->RunTransactionFor<int64_t>([](pqxx::work& txn)
                                                           -> absl::StatusOr<int64_t> {
    return txn.exec("SELECT sum(sample_count) FROM ofu_windows WHERE gpu = ''")[0][0].as<int64_t>();
  });
  ASSERT_TRUE(total.ok());
  EXPECT_EQ(*total, static_cast<int64_t>(sim.rows.size()));
}

TEST_F(OfuIntegration, WritersCommittingOutOfSeqOrderAreNeitherSkippedNorCountedTwice) {
  SimJob sim = SimulateOneJob(3);
  sim.rows.resize(400);
  auto pool = NewDatabase("goodput");
  const int64_t job = RegisterJob(*pool, sim);
  std::atomic<int64_t> now{absl::ToUnixMillis(absl::Now())};
  Harness h(pool.get(), &now, 100);
  ASSERT_TRUE(h.consumer->Restore().ok());

  // Writer A takes seq numbers first but commits last.
  auto slow = pool->Acquire();
  ASSERT_TRUE(slow.ok());
  pqxx::work a(slow->connection());
  a.exec(
      absl::StrCat("INSERT INTO samples (sample_time, cluster, host, gpu_index, gpu_model, job, "
                   "tensor_active, sm_clock_mhz) SELECT timestamptz 'epoch' + ",
                   sim.rows[0].t_ms, " * interval '1 millisecond', 'sim', 'slow-host', g, '", kH100,
                   "', ", job, ", 0.5, 1830 FROM generate_series(0, 49) g"));
  InsertSamples(*pool, job, sim, 0, sim.rows.size());  // writer B commits
  Drain(*h.consumer);
  // B's transaction id is above A's, which is still running: B waits rather than letting the
  // watermark pass A's rows.
  EXPECT_EQ(h.consumer->Stats().samples_consumed, 0);
  a.commit();
  Drain(*h.consumer);
  Drain(*h.consumer);
  EXPECT_EQ(h.consumer->Stats().samples_consumed, 450);
  Drain(*h.consumer);
  EXPECT_EQ(h.consumer->Stats().samples_consumed, 450);
}

TEST_F(OfuIntegration, QueriesPaginateDownsampleAndRefuseUnknownJobs) {
  const SimJob sim = SimulateOneJob(5);
  auto pool = NewDatabase("goodput");
  const int64_t job = RegisterJob(*pool, sim);
  std::atomic<int64_t> now{absl::ToUnixMillis(absl::Now())};
  Harness h(pool.get(), &now, 20'000);
  ASSERT_TRUE(h.consumer->Restore().ok());
  InsertSamples(*pool, job, sim, 0, sim.rows.size());
  Drain(*h.consumer);
  now += 3'600'000;
  Drain(*h.consumer);

  // Native windows, page by page.
  std::vector<v1::OfuWindow> all;
  std::string token;
  int pages = 0;
  do {
    v1::GetJobOfuRequest req;
    *req.mutable_job() = Key(sim.job_id);
    req.set_page_size(7);
    req.set_page_token(token);
    v1::GetJobOfuResponse resp;
    ASSERT_TRUE(h.service->DoGetJobOfu(req, &resp).ok());
    EXPECT_LE(resp.windows_size(), 7);
    EXPECT_EQ(resp.effective_window_s(), 60);
    for (const auto& w : resp.windows()) all.push_back(w);
    token = resp.next_page_token();
    ++pages;
  } while (!token.empty() && pages < 100);
  ASSERT_GE(all.size(), 60u);
  // Warm-up is marked on the windows before the summary's steady-state start, and only there.
  {
    v1::GetJobSummaryRequest sreq;
    *sreq.mutable_job() = Key(sim.job_id);
    v1::GetJobSummaryResponse sresp;
    ASSERT_TRUE(h.service->DoGetJobSummary(sreq, &sresp).ok());
    const int64_t steady_ms = api::TimestampToUnixMs(sresp.summary().steady_state_start_time());
    for (const auto& w : all)
      EXPECT_EQ(w.warmup(), api::TimestampToUnixMs(w.start_time()) < steady_ms);
    EXPECT_FALSE(all.back().warmup());
  }
  EXPECT_EQ(pages, static_cast<int>((all.size() + 6) / 7));
  for (size_t i = 1; i < all.size(); ++i) {
    EXPECT_EQ(api::TimestampToUnixMs(all[i].start_time()) -
                  api::TimestampToUnixMs(all[i - 1].start_time()),
              60'000);
  }

  // 5-minute buckets: sample-weighted means of the native windows, paginated too.
  std::vector<v1::OfuWindow> buckets;
  token.clear();
  do {
    v1::GetJobOfuRequest req;
    *req.mutable_job() = Key(sim.job_id);
    req.set_resolution_s(290);  // rounded up to 300
    req.set_page_size(4);
    req.set_page_token(token);
    req.set_include_per_gpu(buckets.empty());
    v1::GetJobOfuResponse resp;
    ASSERT_TRUE(h.service->DoGetJobOfu(req, &resp).ok());
    EXPECT_EQ(resp.effective_window_s(), 300);
    if (buckets.empty()) {
      EXPECT_EQ(resp.gpu_windows_size(), resp.windows_size() * sim.gpus);
    }
    for (const auto& w : resp.windows()) buckets.push_back(w);
    token = resp.next_page_token();
  } while (!token.empty());
  int64_t native_samples = 0, bucket_samples = 0;
  for (const auto& w : all) native_samples += w.sample_count();
  for (const auto& b : buckets) {
    bucket_samples += b.sample_count();
    EXPECT_EQ(api::TimestampToUnixMs(b.start_time()) % 300'000, 0);
    double weighted = 0;
    int64_t n = 0;
    for (const auto& w : all) {
      if (api::TimestampToUnixMs(w.start_time()) >= api::TimestampToUnixMs(b.start_time()) &&
          api::TimestampToUnixMs(w.start_time()) < api::TimestampToUnixMs(b.end_time())) {
        weighted += w.ofu() * w.sample_count();
        n += w.sample_count();
      }
    }
    EXPECT_EQ(b.sample_count(), n);
    EXPECT_NEAR(b.ofu(), weighted / n, 1e-9);
  }
  EXPECT_EQ(native_samples, bucket_samples);

  // A time range selects the windows inside it.
  v1::GetJobOfuRequest ranged;
  *ranged.mutable_job() = Key(sim.job_id);
  *ranged.mutable_time_range()->mutable_start_time() = all[10].start_time();
  *ranged.mutable_time_range()->mutable_end_time() = all[20].start_time();
  v1::GetJobOfuResponse ranged_resp;
  ASSERT_TRUE(h.service->DoGetJobOfu(ranged, &ranged_resp).ok());
  EXPECT_EQ(ranged_resp.windows_size(), 10);

  // Unknown job.
  v1::GetJobOfuRequest unknown;
  *unknown.mutable_job() = Key("no-such-job");
  v1::GetJobOfuResponse unknown_resp;
  EXPECT_EQ(h.service->DoGetJobOfu(unknown, &unknown_resp).code(), absl::StatusCode::kNotFound);
  v1::GetJobSummaryRequest unknown_summary;
  *unknown_summary.mutable_job() = Key("no-such-job");
  v1::GetJobSummaryResponse unknown_summary_resp;
  EXPECT_EQ(h.service->DoGetJobSummary(unknown_summary, &unknown_summary_resp).code(),
            absl::StatusCode::kNotFound);

  // Fleet view.
  v1::GetFleetSummaryRequest fleet;
  *fleet.mutable_time_range()->mutable_start_time() =
      api::UnixMsToTimestamp(sim.start_ms - 3'600'000);
  *fleet.mutable_time_range()->mutable_end_time() = api::UnixMsToTimestamp(sim.end_ms + 3'600'000);
  fleet.add_group_by(v1::FLEET_GROUP_BY_TEAM);
  v1::GetFleetSummaryResponse fleet_resp;
  ASSERT_TRUE(h.service->DoGetFleetSummary(fleet, &fleet_resp).ok());
  ASSERT_EQ(fleet_resp.groups_size(), 1);
  EXPECT_EQ(fleet_resp.groups(0).team(), "robotics");
  EXPECT_EQ(fleet_resp.groups(0).job_count(), 1);
  EXPECT_NEAR(fleet_resp.total().gpu_hours(), sim.gpus * 1.0, 0.3);
}

// The fleet summary reads whole hours from ofu_fleet_hours and only the partial hours at the
// range's ends window by window: it must equal the summary of every window, for any range,
// after revisions (a window's OFU or GPU model changed), and at another threshold.
TEST_F(OfuIntegration, FleetSummaryFromHourlyFiguresEqualsTheOneFromEveryWindow) {
  auto pool = NewDatabase("goodput");
  constexpr int64_t kHourMs = 3'600'000;
  const int64_t hour0 = (int64_t{1'790'000'000'000} / kHourMs) * kHourMs;
  const int64_t t0 = hour0 + 10 * 60'000;  // windows from 00:10 for 3.5 hours
  constexpr int kWindows = 210;
  struct JobSpec {
    std::string job_id, user, team, model;
  };
  const std::vector<JobSpec> specs = {{"a", "alice", "vision", kH100},
                                      {"b", "bob", "vision", kH100},
                                      {"c", "alice", "speech", ""}};  // model from its windows
  std::vector<int64_t> ids;
  for (const JobSpec& spec : specs) {
    auto id = pool->RunTransactionFor<int64_t>([&](pqxx::work& txn) -> absl::StatusOr<int64_t> {
      return txn
          .exec_params(
              "INSERT INTO jobs (cluster, job_id, scheduler, team, user_name, gpu_model, "
              "start_time) VALUES ($1, $2, 'slurm', $3, $4, $5, timestamptz 'epoch' + $6 * "
              "interval '1 millisecond') RETURNING id",
              kCluster, spec.job_id, spec.team, spec.user, spec.model, t0)[0][0]
          .as<int64_t>();
    });
    ASSERT_TRUE(id.ok()) << id.status();
    ids.push_back(*id);
  }
  // OFU over all deciles, some windows without OFU, idle GPUs, MIG-like fractional GPUs; job
  // c's windows switch GPU model in its second hour.
  auto window = [&](size_t j, int k, double shift) {
    WindowResult w;
    w.job = ids[j];
    w.start_ms = t0 + k * 60'000;
    w.end_ms = w.start_ms + 60'000;
    w.gpu_model = j == 2 && w.start_ms >= hour0 + kHourMs && w.start_ms < hour0 + 2 * kHourMs
                      ? "NVIDIA A100-SXM4-80GB"
                      : kH100;
    if ((k + static_cast<int>(j)) % 17 != 0) {
      w.ofu = std::fmod((k * 37 + static_cast<int>(j) * 11) / 100.0 + shift, 1.0);
    }
    w.sample_count = 64;
    w.gpus_allocated = j == 1 ? 16 : 8;
    w.gpu_equivalents = j == 2 ? 7.0 + 3.0 / 7.0 : w.gpus_allocated;
    if (k % 5 == 0) w.idle_gpus = {"h/1/", "h/2/"};
    return w;
  };
  OfuStore store(pool.get(), ShardConfig{});
  absl::StatusOr<ConsumerState> state = store.LoadState();
  ASSERT_TRUE(state.ok()) << state.status();
  auto commit = [&](const std::vector<WindowResult>& results) {
    absl::Status s = store.Commit(results, {}, {}, *state, 60);
    ASSERT_TRUE(s.ok()) << s;
  };
  // Written in three batches, the last windows first.
  for (int part = 2; part >= 0; --part) {
    std::vector<WindowResult> batch;
    for (size_t j = 0; j < ids.size(); ++j) {
      for (int k = part * kWindows / 3; k < (part + 1) * kWindows / 3; ++k) {
        batch.push_back(window(j, k, 0));
      }
    }
    commit(batch);
  }

  auto expect_same = [&](int64_t from, int64_t to, double threshold, const FleetFilter& filter,
                         const std::string& what) {
    SCOPED_TRACE(what);
    absl::StatusOr<std::vector<FleetPiece>> pieces = store.FleetPieces(from, to, threshold);
    ASSERT_TRUE(pieces.ok()) << pieces.status();
    absl::StatusOr<std::vector<std::pair<JobRow, StoredWindow>>> windows =
        store.FleetWindows(from, to);
    ASSERT_TRUE(windows.ok()) << windows.status();
    for (const auto& dims : std::vector<std::vector<FleetDimension>>{
             {}, {FleetDimension::kUser}, {FleetDimension::kGpuModel, FleetDimension::kTeam}}) {
      auto [groups, total] = SummarizeFleet(*pieces, filter, dims);
      auto [want_groups, want_total] = SummarizeFleet(*windows, filter, dims, threshold);
      auto same = [](const FleetGroupFigures& got, const FleetGroupFigures& want) {
        const std::string key = absl::StrCat(got.user, "/", got.team, "/", got.gpu_model);
        EXPECT_EQ(key, absl::StrCat(want.user, "/", want.team, "/", want.gpu_model));
        EXPECT_EQ(got.job_count, want.job_count) << key;
        auto near = [&](double a, double b, const char* name) {
          EXPECT_NEAR(a, b, 1e-12 * std::max(1.0, std::abs(b))) << key << " " << name;
        };
        near(got.gpu_hours, want.gpu_hours, "gpu_hours");
        near(got.effective_gpu_hours, want.effective_gpu_hours, "effective");
        near(got.ofu_mean, want.ofu_mean, "ofu_mean");
        near(got.idle_gpu_hours, want.idle_gpu_hours, "idle");
        near(got.low_efficiency_gpu_hours, want.low_efficiency_gpu_hours, "low efficiency");
        for (int d = 0; d < 10; ++d) {
          near(got.gpu_hours_by_ofu_decile[d], want.gpu_hours_by_ofu_decile[d],
               absl::StrCat("decile ", d).c_str());
        }
      };
      ASSERT_EQ(groups.size(), want_groups.size());
      for (size_t g = 0; g < groups.size(); ++g) same(groups[g], want_groups[g]);
      same(total, want_total);
    }
  };
  const std::vector<std::tuple<int64_t, int64_t, std::string>> ranges = {
      {hour0 - kHourMs, hour0 + 5 * kHourMs, "all windows, whole hours"},
      {hour0 + 30 * 60'000, hour0 + 2 * kHourMs + 15 * 60'000, "partial hours at both ends"},
      {hour0 + 5 * 60'000, hour0 + 50 * 60'000, "inside one hour"},
      {hour0 + kHourMs, hour0 + 3 * kHourMs, "whole hours only"},
      {hour0 + 6 * kHourMs, hour0 + 7 * kHourMs, "no windows"}};
  for (const auto& [from, to, what] : ranges) {
    expect_same(from, to, kFleetHoursLowEfficiencyOfu, {}, what);
    expect_same(from, to, kFleetHoursLowEfficiencyOfu, {.gpu_model = "NVIDIA A100-SXM4-80GB"},
                what + ", A100 only");
    expect_same(from, to, 0.45, {}, what + ", another threshold");
  }
  // One piece per job and GPU model; whole hours come from ofu_fleet_hours (a row changed by
  // hand shows in the default threshold's summary, not in another threshold's).
  auto gpu_hours = [&](double threshold) {
    absl::StatusOr<std::vector<FleetPiece>> pieces =
        store.FleetPieces(hour0, hour0 + 4 * kHourMs, threshold);
    EXPECT_TRUE(pieces.ok()) << pieces.status();
    if (threshold == kFleetHoursLowEfficiencyOfu) {
      EXPECT_EQ(pieces.ok() ? pieces->size() : 0, 4u);  // a, b, c on H100, c on A100
    }
    return pieces.ok() ? SummarizeFleet(*pieces, {}, {}).second.gpu_hours : 0.0;
  };
  const double before = gpu_hours(kFleetHoursLowEfficiencyOfu);
  ASSERT_NEAR(before, gpu_hours(0.45), 1e-9);
  auto changed = pool->RunTransaction([&](pqxx::work& txn) -> absl::Status {
    txn.exec_params(
        "UPDATE ofu_fleet_hours SET gpu_hours = gpu_hours + 1000 WHERE job = $1 AND "
        "hour = $2",
        ids[1], hour0 / kHourMs + 1);
    return absl::OkStatus();
  });
  ASSERT_TRUE(changed.ok()) << changed;
  EXPECT_NEAR(gpu_hours(kFleetHoursLowEfficiencyOfu), before + 1000, 1e-9);
  EXPECT_NEAR(gpu_hours(0.45), before, 1e-9);
  commit({window(1, 60, 0)});  // a window of that hour written again refreshes it
  EXPECT_NEAR(gpu_hours(kFleetHoursLowEfficiencyOfu), before, 1e-9);

  // Revisions: job a's second hour gets other OFU, job c's A100 hour becomes H100.
  std::vector<WindowResult> revised;
  for (int k = 50; k < 110; ++k) {
    revised.push_back(window(0, k, 0.31));
    WindowResult c = window(2, k, 0);
    c.gpu_model = kH100;
    revised.push_back(c);
  }
  commit(revised);
  for (const auto& [from, to, what] : ranges) {
    expect_same(from, to, kFleetHoursLowEfficiencyOfu, {}, what + ", after revisions");
  }
  auto a100_rows =
      pool->RunTransactionFor<int64_t>([&](pqxx::work& txn) -> absl::StatusOr<int64_t> {
        return txn.exec("SELECT count(*) FROM ofu_fleet_hours WHERE gpu_model LIKE '%A100%'")[0][0]
            .as<int64_t>();
      });
  ASSERT_TRUE(a100_rows.ok()) << a100_rows.status();
  EXPECT_EQ(*a100_rows, 0) << "the revised hour's old GPU model row is gone";
}

TEST_F(OfuIntegration, LatestWindowComesFromRedisAndFromPostgresWhenRedisIsDown) {
  SimJob sim = SimulateOneJob(9);
  auto pool = NewDatabase("goodput");
  const int64_t job = RegisterJob(*pool, sim);
  auto redis_server = RedisServer::Create();
  ASSERT_TRUE(redis_server.ok()) << redis_server.status();
  auto redis = platform::RedisClient::Create(
      {.host = (*redis_server)->host(), .port = (*redis_server)->port()});
  ASSERT_TRUE(redis.ok());
  std::atomic<int64_t> now{absl::ToUnixMillis(absl::Now())};
  Harness h(pool.get(), &now, 20'000, redis->get());
  ASSERT_TRUE(h.consumer->Restore().ok());
  InsertSamples(*pool, job, sim, 0, sim.rows.size() / 2);
  Drain(*h.consumer);

  auto cached = (*redis)->Get(LatestCache::Key(kCluster, sim.job_id));
  ASSERT_TRUE(cached.ok());
  ASSERT_TRUE(cached->has_value());
  v1::GetLatestOfuRequest req;
  *req.add_jobs() = Key(sim.job_id);
  *req.add_jobs() = Key("no-such-job");
  v1::GetLatestOfuResponse from_redis;
  ASSERT_TRUE(h.service->DoGetLatestOfu(req, &from_redis).ok());
  ASSERT_EQ(from_redis.jobs_size(), 2);
  ASSERT_TRUE(from_redis.jobs(0).has_window());
  EXPECT_FALSE(from_redis.jobs(1).has_window());

  ASSERT_TRUE((*redis_server)->Stop().ok());
  v1::GetLatestOfuResponse from_pg;
  ASSERT_TRUE(h.service->DoGetLatestOfu(req, &from_pg).ok());
  ASSERT_TRUE(from_pg.jobs(0).has_window());
  EXPECT_EQ(api::TimestampToUnixMs(from_pg.jobs(0).window().start_time()),
            api::TimestampToUnixMs(from_redis.jobs(0).window().start_time()));
  EXPECT_NEAR(from_pg.jobs(0).window().ofu(), from_redis.jobs(0).window().ofu(), 1e-9);
}

}  // namespace
}  // namespace goodput::ofu
