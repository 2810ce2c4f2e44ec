// The pipeline end to end: a private PostgreSQL and Redis, the four service binaries wired as
// the local stack wires them (ingest; ofu forwarding to mfu and alerting; mfu forwarding to
// alerting), and a synthetic fleet pushed through IngestService.PushSamples at a series of
// fixed rates. Per rate it prints what was acknowledged, how far ofu, mfu and alerting lag
// behind, how long a regression planted in a few jobs takes to reach a local Alertmanager, the
// CPU each process spent and what PostgreSQL wrote, per sample. In the same run:
// the rate ingest alone acknowledges (ofu, mfu and alerting not started yet) and a raw COPY
// of the same rows. It prints; it asserts nothing about time.
//
//   goodput_pipeline_bench [--rates 5000,10000,20000,50000] [--step-s 60] [--window-s 12]
//                          [--scrape-s 2] [--batch 1000] [--senders 8] [--ingest-only-s 20]
//                          [--pg-statements N] [--plant-jobs 3] [--short]
//
// Time is scaled: windows of `--window-s` (12 s) with a sample per GPU every `--scrape-s`
// (2 s) hold the same six samples per GPU as production's 60 s windows of 10 s scrapes, so a
// rate costs what it costs at full scale (a rate of R samples/s is a fleet of R x scrape_s
// GPUs: 50,000/s here stands for 500,000 GPUs scraped every 10 s) while a run takes minutes.
// Fixed delays (ofu's 1 s poll, forwarding round trips) weigh five times more against the
// window than they would at production scale, so the lag columns are pessimistic.
//
// Lag of a job: now minus the end of its newest job-level window in ofu (ofu_windows), in mfu
// (mfu_ofu_windows) and evaluated by alerting (alert_job_state.last_window_end); sampled every
// two seconds from two windows into a step on, p50/p99 over jobs and samples. A job with no
// window yet counts from the step's start. A rate is sustained when ingest acknowledged at
// least 95% of it and the p99 lag of ofu and mfu stays under two windows.
//
// Regression to notification: in each step the OFU of `--plant-jobs` jobs falls 2.5x (their
// tensor activity divided by 2.5) from a window boundary 18 windows into the step, when the
// in-job detector has its warm-up and reference windows. goodput-alerting sends every alert
// to a private Alertmanager; per planted job the bench takes the time from that onset (data
// time, which follows the wall clock) to alerting recording the alert (alerts.start_time) and
// to the alert appearing in Alertmanager's GET /api/v2/alerts (polled every half second),
// until the end of the step's catch-up time. alerting's settings in seconds (settle_s, the
// sweep, ...) are scaled with the windows.
//
// CPU: utime + stime of each process and its descendants (/proc/PID/stat), per 1,000 samples
// acknowledged. PostgreSQL: rows inserted, updated or deleted (pg_stat_user_tables), growth of
// every table with its indexes and TOAST (pg_total_relation_size) and WAL bytes, per sample,
// from the start of a step until the pipeline has caught up with it.

#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <pqxx/pqxx>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "goodput/v1/ingest.grpc.pb.h"
#include "goodput/v1/job.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "httplib.h"
#include "services/platform/migrations.h"
#include "tests/support/alertmanager_server.h"
#include "tests/support/postgres_server.h"
#include "tests/support/redis_server.h"
#include "tests/support/service_process.h"
#include "tools/fleetsim/fleet_proto.h"
#include "tools/fleetsim/fleet_sim.h"

namespace goodput {
namespace {

using testing::BuiltBinary;
using testing::ServiceProcess;

struct Params {
  std::vector<int> rates = {5'000, 10'000, 20'000, 50'000};
  int step_s = 60;
  int window_s = 12;
  int scrape_s = 2;
  int batch = 1'000;
  int senders = 8;
  int ingest_only_s = 20;
  int max_catch_up_s = 90;
  // With N > 0: pg_stat_statements loaded, and the N statements that took PostgreSQL the
  // longest over the rate steps printed at the end (where the database's time goes).
  int pg_statements = 0;
  // Jobs of each step's fleet whose OFU falls 2.5x partway through the step.
  int plant_jobs = 3;
};

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  return v[i];
}

int64_t NowMs() { return absl::ToUnixMillis(absl::Now()); }

// ---------------------------------------------------------------------------------------------
// CPU of process trees from /proc.

struct ProcStat {
  pid_t ppid = 0;
  double self_s = 0;      // utime + stime
  double children_s = 0;  // cutime + cstime (reaped children)
};

std::optional<ProcStat> ReadProcStat(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return std::nullopt;
  // The command name may hold spaces: fields start after the last ')'.
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::vector<std::string> f = absl::StrSplit(line.substr(close + 2), ' ');
  if (f.size() < 15) return std::nullopt;
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  ProcStat s;
  s.ppid = static_cast<pid_t>(std::stol(f[1]));
  s.self_s = (std::stod(f[11]) + std::stod(f[12])) / tick;
  s.children_s = (std::stod(f[13]) + std::stod(f[14])) / tick;
  return s;
}

// CPU seconds of `root`, its live descendants and the children they reaped.
double TreeCpuSeconds(pid_t root) {
  std::map<pid_t, ProcStat> all;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    pid_t pid = 0;
    if (!absl::SimpleAtoi(entry.path().filename().string(), &pid)) continue;
    if (auto s = ReadProcStat(pid)) all[pid] = *s;
  }
  double total = 0;
  std::vector<pid_t> todo = {root};
  while (!todo.empty()) {
    const pid_t pid = todo.back();
    todo.pop_back();
    auto it = all.find(pid);
    if (it == all.end()) continue;
    total += it->second.self_s + it->second.children_s;
    for (const auto& [child, s] : all) {
      if (s.ppid == pid) todo.push_back(child);
    }
  }
  return total;
}

// ---------------------------------------------------------------------------------------------
// The synthetic fleet: GPUs on hosts of 8, in jobs of 8 to 128 GPUs, each GPU's DCGM fields
// taken from a simulated GPU of goodput-fleetsim (so every field a real exporter sends is
// there), its time set to the scrape tick, its energy counter advancing with its power.

struct FleetJob {
  std::string job_id;
  std::string gpu_model;
  std::vector<std::pair<std::string, int>> gpus;  // host, index
  size_t first_sample = 0;  // the job's GPUs are samples [first, first + gpus) of a scrape
};

struct Fleet {
  std::string cluster;
  std::vector<FleetJob> jobs;
  std::vector<v1::PushSamplesRequest> batches;  // templates: one scrape of every GPU
  int batch = 0;                                // samples per batch (the last may hold fewer)
  int64_t gpus = 0;
};

// A regression planted in some of a fleet's jobs: from `onset_ms` (data time) on, their
// tensor pipes are busy `factor` times less (the 2.5x of the debug-flag case: collectives
// injected into every step leave the tensor cores waiting), so their OFU falls by that factor
// while their SM clocks stay where they were.
struct PlantedRegression {
  std::vector<size_t> jobs = {};  // indexes into Fleet::jobs
  int64_t onset_ms = std::numeric_limits<int64_t>::max();
  double factor = 2.5;
};

// Simulated samples to copy fields from, grouped by the simulated job they come from. The
// simulated fleet is a healthy one: no stragglers, idle GPUs, stalls, checkpoints, evaluation
// passes or regressions of its own. Each bench GPU repeats one simulated sample scrape after
// scrape, so a straggler's sample would make a straggler for the whole run; with none, every
// alert on a job that is not planted is one the platform caused (under overload: late data).
struct SampleBank {
  struct Job {
    std::string gpu_model;
    std::vector<sim::GpuSample> samples;
  };
  std::vector<Job> jobs;
};

SampleBank MakeBank() {
  class Collect : public sim::FleetSink {
   public:
    void OnSamples(const sim::JobTruth& job, int64_t, int64_t,
                   const std::vector<sim::GpuSample>& samples) override {
      if (bank.jobs.size() >= 64 || samples.empty()) return;
      // Past its warm-up, so the values are those of a job at work.
      if (samples.front().timestamp_ms / 1000 < job.start_s + job.warmup_s) return;
      bank.jobs.push_back({job.gpu_model, samples});
    }
    SampleBank bank;
  };
  sim::FleetConfig config = sim::DefaultFleetConfig(7);
  config.straggler_job_probability = 0;
  config.idle_gpu_job_probability = 0;
  config.in_job_regression_probability = 0;
  config.debug_flag_probability = 0;
  config.eval_probability = 0;
  config.stalls_per_hour = 0;
  config.checkpoint_min_s = config.checkpoint_max_s = 0;
  auto simulator = sim::FleetSimulator::Create(config);
  Collect collect;
  if (!simulator.ok()) return {};
  while (collect.bank.jobs.size() < 64 && (*simulator)->Step(collect)) {
  }
  return std::move(collect.bank);
}

std::string FakeUuid(const std::string& host, int index) {
  const size_t h = std::hash<std::string>{}(absl::StrCat(host, "/", index));
  return absl::StrFormat("GPU-%08x-%04x-%04x-%04x-%012x", h & 0xffffffff, (h >> 32) & 0xffff,
                         (h >> 48) & 0xffff, index, h & 0xffffffffffff);
}

Fleet MakeFleet(const SampleBank& bank, const std::string& cluster, int64_t gpus, int batch) {
  static constexpr std::array<int, 5> kJobSizes = {8, 16, 32, 64, 128};
  Fleet fleet;
  fleet.cluster = cluster;
  int64_t placed = 0;
  int host = 0;
  std::vector<v1::GpuSample> all;
  all.reserve(gpus);
  for (int j = 0; placed < gpus; ++j) {
    const int size = static_cast<int>(
        std::min<int64_t>(kJobSizes[j % kJobSizes.size()], (gpus - placed + 7) / 8 * 8));
    const SampleBank::Job& source = bank.jobs[j % bank.jobs.size()];
    FleetJob job{absl::StrCat("job-", j), source.gpu_model, {}, all.size()};
    for (int g = 0; g < size; ++g) {
      const std::string host_name = absl::StrCat(cluster, "-node-", host + g / 8);
      job.gpus.emplace_back(host_name, g % 8);
      v1::GpuSample sample;
      sim::SampleToProto(source.samples[g % source.samples.size()], source.gpu_model, &sample);
      sample.mutable_gpu()->set_host(host_name);
      sample.mutable_gpu()->set_gpu_index(g % 8);
      sample.mutable_gpu()->set_uuid(FakeUuid(host_name, g % 8));
      all.push_back(std::move(sample));
    }
    host += size / 8;
    placed += size;
    fleet.jobs.push_back(std::move(job));
  }
  fleet.gpus = static_cast<int64_t>(all.size());
  fleet.batch = batch;
  for (size_t first = 0; first < all.size(); first += batch) {
    v1::PushSamplesRequest b;
    b.set_cluster(cluster);
    b.set_source("pipeline-bench");
    for (size_t i = first; i < std::min(all.size(), first + batch); ++i) {
      *b.add_samples() = all[i];
    }
    fleet.batches.push_back(std::move(b));
  }
  return fleet;
}

// The batch `k` of scrape `tick`: the template with the scrape's time, ids and counters, and
// the planted regression's jobs slowed down from its onset on.
v1::PushSamplesRequest ScrapeBatch(const Fleet& fleet, int64_t tick, size_t k, int64_t time_ms,
                                   int scrape_s, const PlantedRegression& plant) {
  v1::PushSamplesRequest b = fleet.batches[k];
  b.set_batch_id(absl::StrCat(fleet.cluster, "-t", tick, "-b", k));
  for (int i = 0; i < b.samples_size(); ++i) {
    v1::GpuSample* s = b.mutable_samples(i);
    s->set_time_unix_ms(time_ms);
    s->set_total_energy_mj(s->total_energy_mj() +
                           static_cast<double>(tick) * s->power_w() * scrape_s * 1000.0);
    // A little movement, as real counters have.
    const double wobble = 0.01 * static_cast<double>((tick + i) % 5) - 0.02;
    s->set_tensor_active(std::clamp(s->tensor_active() + wobble, 0.0, 1.0));
  }
  if (time_ms < plant.onset_ms) return b;
  const size_t first = k * static_cast<size_t>(fleet.batch);
  const size_t end = first + static_cast<size_t>(b.samples_size());
  for (const size_t j : plant.jobs) {
    const FleetJob& job = fleet.jobs[j];
    const size_t from = std::max(first, job.first_sample);
    const size_t to = std::min(end, job.first_sample + job.gpus.size());
    for (size_t i = from; i < to; ++i) {
      // Lower activity stays within [0, 1]; the SM clock, power and memory are unchanged.
      v1::GpuSample* s = b.mutable_samples(static_cast<int>(i - first));
      s->set_tensor_active(s->tensor_active() / plant.factor);
      if (s->has_pipe_fp16_active()) s->set_pipe_fp16_active(s->pipe_fp16_active() / plant.factor);
    }
  }
  return b;
}

// The job registry for `fleet`, written with SQL as JobStore writes it: RegisterJob checks
// every GPU of an allocation against the registry one statement at a time (milliseconds per
// GPU), so registering a fleet of 100,000 GPUs through the API would take longer than the
// measurement it prepares.
void RegisterFleet(pqxx::connection& c, const Fleet& fleet, int64_t start_ms) {
  pqxx::work txn(c);
  for (size_t j = 0; j < fleet.jobs.size(); ++j) {
    const FleetJob& job = fleet.jobs[j];
    const int64_t id =
        txn.exec_params(
               "INSERT INTO jobs (cluster, job_id, scheduler, user_name, team, name, "
               "workload_fingerprint, gpu_model, state, start_time, gpu_count) VALUES "
               "($1, $2, 'slurm', $3, $4, $5, $5, $6, 'running', "
               "to_timestamp($7::bigint / 1000.0), $8) RETURNING id",
               fleet.cluster, job.job_id, absl::StrCat("user-", j % 40),
               absl::StrCat("team-", j % 7),
               absl::StrCat("workload-", j % 24, "-", job.gpus.size()), job.gpu_model, start_ms,
               static_cast<int>(job.gpus.size()))[0][0]
            .as<int64_t>();
    std::string hosts = "{", indexes = "{";
    for (size_t g = 0; g < job.gpus.size(); ++g) {
      absl::StrAppend(&hosts, g ? "," : "", job.gpus[g].first);
      absl::StrAppend(&indexes, g ? "," : "", job.gpus[g].second);
    }
    txn.exec_params(
        "INSERT INTO job_gpus (job, cluster, host, gpu_index, valid) "
        "SELECT $1, $2, h, i, tstzrange(to_timestamp($5::bigint / 1000.0), NULL, '[)') "
        "FROM unnest($3::text[], $4::integer[]) AS a(h, i)",
        id, fleet.cluster, hosts + "}", indexes + "}", start_ms);
  }
  txn.commit();
}

// Ends the fleet's jobs as EndJob does (state, end time, allocations closed).
void EndFleet(pqxx::connection& c, const Fleet& fleet) {
  pqxx::work txn(c);
  txn.exec_params(
      "UPDATE job_gpus SET valid = tstzrange(lower(valid), now(), '[)') "
      "WHERE cluster = $1 AND upper_inf(valid)",
      fleet.cluster);
  txn.exec_params(
      "UPDATE jobs SET state = 'completed', end_time = now(), updated_at = now() "
      "WHERE cluster = $1",
      fleet.cluster);
  txn.commit();
}

// ---------------------------------------------------------------------------------------------
// Driving: scrapes of the fleet pushed by `senders` threads, one PushSamples call per batch,
// paced so that batch k of scrape t leaves at start + t * scrape_s + k * scrape_s / batches
// (or as fast as acknowledgements come when `paced` is false).

struct DriveResult {
  int64_t acked = 0;
  int64_t failed_batches = 0;
  int64_t last_tick_ms = 0;
  // The longest a batch took from its data time to its acknowledgement: beyond a scrape
  // interval, ingest is behind the offered rate and every later stage inherits the delay.
  double max_ack_late_s = 0;
  std::string first_error;
  double seconds = 0;
};

DriveResult Drive(v1::IngestService::Stub* stub, const Fleet& fleet, const Params& p,
                  absl::Duration duration, bool paced, int64_t first_tick_ms,
                  const PlantedRegression& plant = {}) {
  const absl::Time start = absl::Now();
  const absl::Time end = start + duration;
  const size_t per_tick = fleet.batches.size();
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> acked{0};
  std::atomic<int64_t> failed{0};
  std::atomic<int64_t> last_tick_ms{0};
  std::atomic<int64_t> max_ack_late_ms{0};
  absl::Mutex mu;
  std::string first_error;
  std::vector<std::thread> threads;
  for (int t = 0; t < p.senders; ++t) {
    threads.emplace_back([&] {
      while (true) {
        const int64_t i = next++;
        const int64_t tick = i / static_cast<int64_t>(per_tick);
        const size_t k = static_cast<size_t>(i % static_cast<int64_t>(per_tick));
        const int64_t tick_ms = first_tick_ms + tick * p.scrape_s * 1000;
        if (paced) {
          const absl::Time due =
              start + absl::Seconds(tick * p.scrape_s) +
              absl::Seconds(p.scrape_s) * static_cast<double>(k) / static_cast<double>(per_tick);
          if (due >= end) return;
          absl::SleepFor(due - absl::Now());
        } else if (absl::Now() >= end) {
          return;
        }
        v1::PushSamplesRequest request = ScrapeBatch(fleet, tick, k, tick_ms, p.scrape_s, plant);
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
        v1::PushSamplesResponse response;
        auto writer = stub->PushSamples(&ctx, &response);
        writer->Write(request);
        writer->WritesDone();
        grpc::Status s = writer->Finish();
        if (!s.ok()) {
          ++failed;
          absl::MutexLock lock(&mu);
          if (first_error.empty()) first_error = s.error_message();
          continue;
        }
        acked += response.stored_count();
        const int64_t late_ms = NowMs() - tick_ms;
        int64_t latest = max_ack_late_ms.load();
        while (latest < late_ms && !max_ack_late_ms.compare_exchange_weak(latest, late_ms)) {
        }
        int64_t seen = last_tick_ms.load();
        while (seen < tick_ms && !last_tick_ms.compare_exchange_weak(seen, tick_ms)) {
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  DriveResult r;
  r.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  r.acked = acked.load();
  r.failed_batches = failed.load();
  r.last_tick_ms = last_tick_ms.load();
  r.max_ack_late_s = static_cast<double>(max_ack_late_ms.load()) / 1000.0;
  r.first_error = first_error;
  return r;
}

// ---------------------------------------------------------------------------------------------
// Raw COPY of the same rows ingest writes (every column, the job attributed), one transaction
// per batch, over as many connections as ingest's pool.

std::string Num(double v) {
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, end);
}
std::string Real(double v) { return Num(static_cast<float>(v)); }

double RawCopy(const std::string& dsn, const Fleet& fleet, const Params& p, int connections,
               int64_t samples, int64_t first_tick_ms,
               const absl::flat_hash_map<std::string, int64_t>& job_of_gpu, int64_t* copied) {
  static const std::vector<std::string> kColumns = {"sample_time",      "batch_id",
                                                    "cluster",          "host",
                                                    "gpu_index",        "gpu_uuid",
                                                    "gpu_model",        "job",
                                                    "tensor_active",    "sm_clock_mhz",
                                                    "sm_active",        "sm_occupancy",
                                                    "dram_active",      "fp16_active",
                                                    "fp32_active",      "fp64_active",
                                                    "gr_engine_active", "fb_used_mib",
                                                    "power_w",          "energy_mj",
                                                    "temperature_c",    "clock_throttle_reasons"};
  const int64_t per_tick = static_cast<int64_t>(fleet.batches.size());
  const int64_t batches = (samples + p.batch - 1) / p.batch;
  // Requests built before timing, as the service's are built by its senders.
  std::vector<v1::PushSamplesRequest> requests;
  for (int64_t i = 0; i < batches; ++i) {
    const int64_t tick = i / per_tick;
    requests.push_back(ScrapeBatch(fleet, tick, static_cast<size_t>(i % per_tick),
                                   first_tick_ms + tick * p.scrape_s * 1000, p.scrape_s, {}));
    requests.back().set_batch_id(absl::StrCat("raw-", i));
    *copied += requests.back().samples_size();
  }
  std::vector<std::unique_ptr<pqxx::connection>> conns;
  for (int c = 0; c < connections; ++c) conns.push_back(std::make_unique<pqxx::connection>(dsn));
  std::atomic<int64_t> next{0};
  const absl::Time start = absl::Now();
  std::vector<std::thread> threads;
  for (int c = 0; c < connections; ++c) {
    threads.emplace_back([&, c] {
      for (int64_t i = next++; i < batches; i = next++) {
        const v1::PushSamplesRequest& b = requests[i];
        pqxx::work txn(*conns[c]);
        txn.exec_params(
            "INSERT INTO ingest_batches (cluster, batch_id, source, sample_count, stored_count, "
            "refused_count, unattributed_count) VALUES ($1, $2, 'grpc', $3, $3, 0, 0)",
            b.cluster(), b.batch_id(), b.samples_size());
        pqxx::stream_to copy(txn, "samples", kColumns);
        for (const v1::GpuSample& s : b.samples()) {
          std::array<std::optional<std::string>, 22> row = {
              absl::FormatTime("%Y-%m-%d %H:%M:%E3S+00", absl::FromUnixMillis(s.time_unix_ms()),
                               absl::UTCTimeZone()),
              b.batch_id(),
              b.cluster(),
              s.gpu().host(),
              absl::StrCat(s.gpu().gpu_index()),
              s.gpu().uuid(),
              s.gpu_model(),
              absl::StrCat(job_of_gpu.at(absl::StrCat(s.gpu().host(), "/", s.gpu().gpu_index()))),
              Num(s.tensor_active()),
              Num(s.sm_clock_mhz()),
              Real(s.sm_active()),
              Real(s.sm_occupancy()),
              Real(s.dram_active()),
              Real(s.pipe_fp16_active()),
              Real(s.pipe_fp32_active()),
              Real(s.pipe_fp64_active()),
              Real(s.gr_engine_active()),
              Real(s.fb_used_mib()),
              Num(s.power_w()),
              Num(s.total_energy_mj()),
              Real(s.gpu_temp_c()),
              absl::StrCat(s.clock_throttle_reasons())};
          copy << row;
        }
        copy.complete();
        txn.commit();
      }
    });
  }
  for (auto& t : threads) t.join();
  return absl::ToDoubleSeconds(absl::Now() - start);
}

// ---------------------------------------------------------------------------------------------
// What PostgreSQL has written, summed over the user tables (partitions included).

struct PgWrites {
  int64_t rows = 0;
  int64_t bytes = 0;
  int64_t wal_lsn = 0;
  std::map<std::string, int64_t> rows_by_table;  // partitions under their parent's name
};

PgWrites ReadPgWrites(pqxx::connection& c) {
  PgWrites w;
  pqxx::nontransaction txn(c);
  for (const auto& r :
       txn.exec("SELECT coalesce(i.inhparent::regclass::text, s.relname), "
                "n_tup_ins + n_tup_upd + n_tup_del, pg_total_relation_size(s.relid) "
                "FROM pg_stat_user_tables s LEFT JOIN pg_inherits i ON i.inhrelid = s.relid")) {
    const int64_t rows = r[1].as<int64_t>();
    w.rows += rows;
    w.bytes += r[2].as<int64_t>();
    w.rows_by_table[r[0].as<std::string>()] += rows;
  }
  w.wal_lsn =
      txn.exec("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint")[0][0].as<int64_t>();
  return w;
}

// Statistics reach pg_stat_user_tables when a backend flushes them (within a second while busy,
// ten when idle): waits until two reads a second apart agree (at most 15 s).
PgWrites SettledPgWrites(pqxx::connection& c) {
  PgWrites last = ReadPgWrites(c);
  for (int i = 0; i < 15; ++i) {
    absl::SleepFor(absl::Seconds(1));
    PgWrites now = ReadPgWrites(c);
    if (now.rows == last.rows) return now;
    last = std::move(now);
  }
  return last;
}

// ---------------------------------------------------------------------------------------------
// Lag per job in each service, in seconds.

struct Lags {
  std::vector<double> ofu, mfu, alerting;
};

void SampleLags(pqxx::connection& c, const std::string& cluster, int64_t floor_ms, Lags* out) {
  pqxx::nontransaction txn(c);
  const int64_t now = NowMs();
  auto collect = [&](const std::string& sql, std::vector<double>* into) {
    for (const auto& r : txn.exec_params(sql, cluster)) {
      const int64_t newest = r[0].is_null() ? floor_ms : std::max(floor_ms, r[0].as<int64_t>());
      into->push_back(static_cast<double>(now - newest) / 1000.0);
    }
  };
  collect(
      "SELECT (extract(epoch FROM (SELECT max(w.start_time + w.window_s * interval '1 second') "
      "FROM ofu_windows w WHERE w.job = j.id AND w.gpu = '')) * 1000)::bigint "
      "FROM jobs j WHERE j.cluster = $1",
      &out->ofu);
  collect(
      "SELECT (extract(epoch FROM (SELECT max(w.end_time) FROM mfu_ofu_windows w "
      "WHERE w.cluster = j.cluster AND w.job_id = j.job_id)) * 1000)::bigint "
      "FROM jobs j WHERE j.cluster = $1",
      &out->mfu);
  collect(
      "SELECT (extract(epoch FROM s.last_window_end) * 1000)::bigint FROM jobs j "
      "LEFT JOIN alert_job_state s ON s.cluster = j.cluster AND s.job_id = j.job_id "
      "WHERE j.cluster = $1",
      &out->alerting);
}

struct Progress {
  int64_t ofu_consumed = 0;
  int64_t ofu_commit_seq = 0;
  int64_t mfu_acked = 0;
  int64_t alerting_acked = 0;
};

Progress ReadProgress(pqxx::connection& c) {
  pqxx::nontransaction txn(c);
  Progress p;
  auto r = txn.exec(
      "SELECT coalesce(sum(samples_consumed), 0)::bigint, coalesce(max(commit_seq), 0)::bigint "
      "FROM ofu_consumer_state");
  p.ofu_consumed = r[0][0].as<int64_t>();
  p.ofu_commit_seq = r[0][1].as<int64_t>();
  for (const auto& row :
       txn.exec("SELECT target, max(acked_seq) FROM ofu_forward_state GROUP BY target")) {
    (row[0].as<std::string>() == "mfu" ? p.mfu_acked : p.alerting_acked) = row[1].as<int64_t>();
  }
  return p;
}

// ---------------------------------------------------------------------------------------------
// Regression to notification.

// The in-job detector (services/detect/regression.h) decides nothing before it has seen 10
// windows of warm-up (two runs of 5 whose medians agree) and then 5 reference windows beside
// its 10 test windows, and it confirms a drop once 8 of its 10 test windows are low at two
// windows in a row. A drop from the start of a job's 19th window (the first may be partial)
// has a full reference and is confirmed at the end of its 9th low window, the least the
// detector can do.
constexpr int kPlantAfterWindows = 18;  // onset: this many windows after the step's first
constexpr int kConfirmWindows = 9;

// Production's alerting settings in seconds, scaled with the windows (printed with the report).
struct ScaledSetting {
  std::string key = {};
  int64_t production_s = 0;
  int64_t floor_s = 0;  // the least the service accepts
};
const std::vector<ScaledSetting>& ScaledAlertingSettings() {
  static const auto* settings = new std::vector<ScaledSetting>{
      {.key = "settle_s", .production_s = 120},
      {.key = "sweep_interval_s", .production_s = 30, .floor_s = 1},
      {.key = "telemetry_stopped_after_s", .production_s = 600, .floor_s = 60},
      // A window plus ofu's lateness (the bench's ofu.allowed_lateness_s is scaled alike).
      {.key = "expected_window_delay_s", .production_s = 180},
      {.key = "platform_lag_alert_s", .production_s = 300, .floor_s = 30},
      {.key = "checkpoint_every_s", .production_s = 3600, .floor_s = 60},
      {.key = "delivery.initial_backoff_s", .production_s = 5, .floor_s = 1},
      {.key = "resend_interval_s", .production_s = 300, .floor_s = 1},  // the Alertmanager target
  };
  return *settings;
}
int64_t Scaled(const ScaledSetting& s, int window_s) {
  return std::max(s.floor_s, s.production_s * window_s / 60);
}
int64_t ScaledSeconds(const std::string& key, int window_s) {
  for (const ScaledSetting& s : ScaledAlertingSettings()) {
    if (s.key == key) return Scaled(s, window_s);
  }
  return 0;
}

// When each planted job's regression alert first appears in Alertmanager's API
// (GET /api/v2/alerts, polled every half second), from a thread of its own.
class AlertmanagerWatch {
 public:
  AlertmanagerWatch(int port, std::string cluster, std::set<std::string> job_ids)
      : port_(port), cluster_(std::move(cluster)), job_ids_(std::move(job_ids)) {
    thread_ = std::thread([this] { Run(); });
  }
  AlertmanagerWatch(const AlertmanagerWatch&) = delete;
  AlertmanagerWatch& operator=(const AlertmanagerWatch&) = delete;
  ~AlertmanagerWatch() { Stop(); }

  void Stop() {
    {
      absl::MutexLock lock(&mu_);
      stop_requested_ = true;
    }
    if (thread_.joinable()) thread_.join();
  }
  // Job id -> wall time (ms) it was first seen.
  std::map<std::string, int64_t> seen_ms() const {
    absl::MutexLock lock(&mu_);
    return seen_ms_;
  }
  bool all_seen() const {
    absl::MutexLock lock(&mu_);
    return seen_ms_.size() == job_ids_.size();
  }
  std::string first_error() const {
    absl::MutexLock lock(&mu_);
    return first_error_;
  }

 private:
  void Run() {
    httplib::Client client("127.0.0.1", port_);
    client.set_connection_timeout(2);
    client.set_read_timeout(5);
    while (true) {
      const absl::Time next = absl::Now() + absl::Milliseconds(500);
      auto res = client.Get("/api/v2/alerts");
      const int64_t now = NowMs();
      const nlohmann::json alerts =
          res && res->status == 200 ? nlohmann::json::parse(res->body, nullptr, false) : nullptr;
      absl::MutexLock lock(&mu_);
      if (!alerts.is_array()) {
        if (first_error_.empty()) {
          first_error_ =
              res ? absl::StrCat("GET /api/v2/alerts: HTTP ", res->status)
                  : absl::StrCat("GET /api/v2/alerts: ", httplib::to_string(res.error()));
        }
      } else {
        for (const nlohmann::json& alert : alerts) {
          const nlohmann::json labels = alert.value("labels", nlohmann::json::object());
          if (labels.value("cluster", "") != cluster_ ||
              labels.value("kind", "") != "regression_in_job") {
            continue;
          }
          const std::string job = labels.value("job_id", "");
          if (job_ids_.count(job)) seen_ms_.try_emplace(job, now);
        }
      }
      if (mu_.AwaitWithDeadline(absl::Condition(&stop_requested_), next)) return;
    }
  }

  const int port_;
  const std::string cluster_;
  const std::set<std::string> job_ids_;
  mutable absl::Mutex mu_;
  bool stop_requested_ = false;  // under mu_: ends the poll loop at once
  std::map<std::string, int64_t> seen_ms_;
  std::string first_error_;
  std::thread thread_;
};

// What became of a step's planted regression: per planted job, seconds from the onset to
// alerting recording the alert (alerts.start_time, alerting's clock) and to the alert being
// in Alertmanager; +inf when it never was, within the step and its catch-up.
struct Notifications {
  int64_t onset_ms = 0;
  double onset_into_step_s = 0;
  bool step_long_enough = true;
  std::vector<std::string> jobs = {};
  std::vector<double> recorded_s = {};
  std::vector<double> notified_s = {};
  std::vector<double> onset_error_s = {};        // onset the detector found minus the planted one
  std::map<std::string, int> other_alerts = {};  // kind -> alerts on jobs not planted
  int platform_alerts = 0;  // platform_lagging alerts opened in the step (goodput behind)
  std::string watch_error = {};
};

// Reads the alerts alerting recorded for the step's cluster, and the platform's own alerts
// opened from `step_start_ms` on, into `n`.
void ReadRecordedAlerts(pqxx::connection& c, const std::string& cluster, int64_t step_start_ms,
                        const std::map<std::string, int64_t>& seen_ms, Notifications* n) {
  pqxx::nontransaction txn(c);
  n->platform_alerts =
      txn.exec_params1("SELECT count(*) FROM alerts WHERE kind = 'platform_lagging' AND "
                       "start_time >= timestamptz 'epoch' + $1::bigint * interval '1 millisecond'",
                       step_start_ms)[0]
          .as<int>();
  std::map<std::string, std::pair<int64_t, int64_t>> recorded;  // job -> start, onset
  for (const auto& r : txn.exec_params(
           "SELECT job_id, kind, (extract(epoch FROM start_time) * 1000)::bigint, "
           "(extract(epoch FROM onset_time) * 1000)::bigint FROM alerts WHERE cluster = $1 "
           "ORDER BY start_time",
           cluster)) {
    const std::string job = r[0].as<std::string>();
    const std::string kind = r[1].as<std::string>();
    const bool planted = std::find(n->jobs.begin(), n->jobs.end(), job) != n->jobs.end();
    if (planted && kind == "regression_in_job") {
      recorded.try_emplace(job, r[2].as<int64_t>(), r[3].is_null() ? 0 : r[3].as<int64_t>());
    } else {
      ++n->other_alerts[kind];
    }
  }
  constexpr double kNever = std::numeric_limits<double>::infinity();
  for (const std::string& job : n->jobs) {
    auto r = recorded.find(job);
    n->recorded_s.push_back(r == recorded.end() ? kNever
                                                : (r->second.first - n->onset_ms) / 1000.0);
    if (r != recorded.end()) n->onset_error_s.push_back((r->second.second - n->onset_ms) / 1000.0);
    auto s = seen_ms.find(job);
    n->notified_s.push_back(s == seen_ms.end() ? kNever : (s->second - n->onset_ms) / 1000.0);
  }
}

// ---------------------------------------------------------------------------------------------

struct Processes {
  std::vector<std::pair<std::string, pid_t>> roots;  // name, pid
};

std::map<std::string, double> CpuNow(const Processes& procs) {
  std::map<std::string, double> cpu;
  for (const auto& [name, pid] : procs.roots) {
    // The bench's own threads only: the servers are its children.
    cpu[name] =
        pid == getpid() ? ReadProcStat(pid).value_or(ProcStat{}).self_s : TreeCpuSeconds(pid);
  }
  return cpu;
}

struct StepResult {
  int rate = 0;
  int64_t gpus = 0;
  int64_t jobs = 0;
  DriveResult drive;
  double job_windows_per_s = 0, gpu_windows_per_s = 0;
  Lags lags;
  double catch_up_s = 0;
  bool caught_up = false;
  std::map<std::string, double> cpu_s;
  PgWrites writes_before, writes_after;
  bool sustained = false;
  Notifications notifications;
};

std::string Service(const std::string& name) {
  return BuiltBinary(absl::StrCat("services/", name, "/goodput-", name)).string();
}

int Run(const Params& p) {
  std::fprintf(stderr, "pipeline bench: starting PostgreSQL and Redis\n");
  testing::PostgresServerOptions pg_options;
  if (p.pg_statements > 0) {
    pg_options.settings = {{"shared_preload_libraries", "pg_stat_statements"}};
  }
  auto pg = testing::PostgresServer::Create(pg_options);
  if (!pg.ok()) {
    std::cerr << pg.status() << "\n";
    return 1;
  }
  if (auto s = (*pg)->CreateDatabase("goodput"); !s.ok()) {
    std::cerr << s << "\n";
    return 1;
  }
  auto redis = testing::RedisServer::Create();
  if (!redis.ok()) {
    std::cerr << redis.status() << "\n";
    return 1;
  }
  const std::string dsn = (*pg)->Dsn("goodput");
  if (auto m = platform::ApplyMigrations(dsn, (testing::SourceDir() / "migrations").string());
      !m.ok()) {
    std::cerr << m.status() << "\n";
    return 1;
  }
  pqxx::connection admin(dsn);
  pid_t postmaster = 0;
  {
    std::ifstream pidfile((*pg)->data_dir() / "postmaster.pid");
    pidfile >> postmaster;
  }
  // redis-server is a child of this process.
  pid_t redis_pid = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    pid_t pid = 0;
    if (!absl::SimpleAtoi(entry.path().filename().string(), &pid)) continue;
    std::ifstream cmd(entry.path() / "cmdline");
    std::string argv0;
    std::getline(cmd, argv0, '\0');
    auto stat = ReadProcStat(pid);
    if (stat && stat->ppid == getpid() && argv0.find("redis-server") != std::string::npos) {
      redis_pid = pid;
    }
  }

  auto common_yaml = [&](const std::string& name) {
    return absl::StrCat("service:\n  name: goodput-", name, "\ngrpc:\n  host: 127.0.0.1\n",
                        "http:\n  host: 127.0.0.1\npostgres:\n  dsn: \"", dsn,
                        "\"\n  pool_size: 4\nredis:\n  host: 127.0.0.1\n  port: ", (*redis)->port(),
                        "\nlog:\n  level: warn\n  format: json\n");
  };
  std::fprintf(stderr, "pipeline bench: starting goodput-ingest\n");
  auto ingest = ServiceProcess::Start({.binary = Service("ingest"),
                                       .config_yaml = common_yaml("ingest") +
                                                      "ingest:\n  jobs:\n    silent_after_s: "
                                                      "172800\n"});
  if (!ingest.ok()) {
    std::cerr << ingest.status() << "\n";
    return 1;
  }
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(64 << 20);
  auto channel = grpc::CreateCustomChannel((*ingest)->grpc_address(),
                                           grpc::InsecureChannelCredentials(), args);
  auto ingest_stub = v1::IngestService::NewStub(channel);
  Processes procs;
  procs.roots.emplace_back("ingest", (*ingest)->process().pid());

  std::fprintf(stderr, "pipeline bench: simulating a fleet for realistic DCGM fields\n");
  const SampleBank bank = MakeBank();
  if (bank.jobs.empty()) {
    std::cerr << "the fleet simulator produced no samples\n";
    return 1;
  }

  // --- Baselines: ingest alone, then a raw COPY of the same rows. -------------------------
  const int max_rate = *std::max_element(p.rates.begin(), p.rates.end());
  const int64_t baseline_gpus = std::max<int64_t>(8'000, int64_t{max_rate} * p.scrape_s / 2);
  Fleet base = MakeFleet(bank, "baseline", baseline_gpus, p.batch);
  // Hours in the past: as fast as ingest goes, a scrape's worth of time per pass of the fleet.
  const int64_t base_start_ms = NowMs() - 3 * 3600 * 1000;
  RegisterFleet(admin, base, base_start_ms - 60'000);
  std::fprintf(stderr, "pipeline bench: ingest alone, as fast as it acknowledges (%d s)\n",
               p.ingest_only_s);
  // Warm-up: partitions, pools, caches.
  Drive(ingest_stub.get(), base, p, absl::Seconds(2), /*paced=*/false, base_start_ms - 600'000);
  const double ingest_cpu0 = TreeCpuSeconds(procs.roots[0].second);
  const double pg_cpu0 = TreeCpuSeconds(postmaster);
  DriveResult ingest_only = Drive(ingest_stub.get(), base, p, absl::Seconds(p.ingest_only_s),
                                  /*paced=*/false, base_start_ms);
  const double ingest_only_cpu = TreeCpuSeconds(procs.roots[0].second) - ingest_cpu0;
  const double ingest_only_pg_cpu = TreeCpuSeconds(postmaster) - pg_cpu0;
  const double ingest_only_rate = static_cast<double>(ingest_only.acked) / ingest_only.seconds;
  absl::flat_hash_map<std::string, int64_t> job_of_gpu;
  {
    pqxx::nontransaction txn(admin);
    for (const auto& r : txn.exec_params(
             "SELECT g.host, g.gpu_index, g.job FROM job_gpus g JOIN jobs j ON j.id = g.job "
             "WHERE j.cluster = $1",
             base.cluster)) {
      job_of_gpu[absl::StrCat(r[0].as<std::string>(), "/", r[1].as<int>())] = r[2].as<int64_t>();
    }
  }
  std::fprintf(stderr, "pipeline bench: raw COPY of %" PRId64 " of the same rows\n",
               ingest_only.acked);
  const int64_t copy_rows = std::max<int64_t>(ingest_only.acked, p.batch);
  int64_t copied = 0;
  const double copy_s = RawCopy(dsn, base, p, 4, copy_rows, base_start_ms, job_of_gpu, &copied);
  const double copy_rate = static_cast<double>(copied) / copy_s;
  EndFleet(admin, base);
  {
    pqxx::work txn(admin);
    txn.exec("TRUNCATE samples, ingest_batches");
    txn.commit();
  }

  // --- The rest of the pipeline. -----------------------------------------------------------
  std::fprintf(stderr, "pipeline bench: starting Alertmanager\n");
  auto alertmanager = testing::AlertmanagerServer::Create();
  if (!alertmanager.ok()) {
    std::cerr << alertmanager.status() << "\n";
    return 1;
  }
  std::fprintf(stderr, "pipeline bench: starting goodput-alerting, goodput-mfu, goodput-ofu\n");
  // Every alert goes to the local Alertmanager; alerting's times in seconds are scaled with
  // the windows.
  std::string alerting_yaml = "alerting:\n  default_targets: [bench-alertmanager]\n";
  std::string target_yaml =
      absl::StrCat("    - name: bench-alertmanager\n      kind: alertmanager\n",
                   "      url: ", (*alertmanager)->Url(), "\n");
  std::string delivery_yaml = "  delivery:\n";
  for (const ScaledSetting& setting : ScaledAlertingSettings()) {
    const int64_t v = Scaled(setting, p.window_s);
    if (setting.key == "resend_interval_s") {
      absl::StrAppend(&target_yaml, "      resend_interval_s: ", v, "\n");
    } else if (absl::StartsWith(setting.key, "delivery.")) {
      absl::StrAppend(&delivery_yaml, "    ", setting.key.substr(9), ": ", v, "\n");
    } else {
      absl::StrAppend(&alerting_yaml, "  ", setting.key, ": ", v, "\n");
    }
  }
  absl::StrAppend(&alerting_yaml, delivery_yaml, "  targets:\n", target_yaml);
  auto alerting = ServiceProcess::Start(
      {.binary = Service("alerting"), .config_yaml = common_yaml("alerting") + alerting_yaml});
  if (!alerting.ok()) {
    std::cerr << alerting.status() << "\n";
    return 1;
  }
  auto mfu = ServiceProcess::Start(
      {.binary = Service("mfu"),
       .config_yaml = common_yaml("mfu") + absl::StrCat("mfu:\n  forward:\n    alerting_address: ",
                                                        (*alerting)->grpc_address(), "\n")});
  if (!mfu.ok()) {
    std::cerr << mfu.status() << "\n";
    return 1;
  }
  auto ofu = ServiceProcess::Start(
      {.binary = Service("ofu"),
       .config_yaml = common_yaml("ofu") +
                      absl::StrCat("ofu:\n  window_s: ", p.window_s, "\n  allowed_lateness_s: ",
                                   2 * p.window_s, "\n  idle_flush_s: ", 5 * p.window_s,
                                   "\n  forward:\n    mfu_address: ", (*mfu)->grpc_address(),
                                   "\n    alerting_address: ", (*alerting)->grpc_address(), "\n")});
  if (!ofu.ok()) {
    std::cerr << ofu.status() << "\n";
    return 1;
  }
  procs.roots.emplace_back("ofu", (*ofu)->process().pid());
  procs.roots.emplace_back("mfu", (*mfu)->process().pid());
  procs.roots.emplace_back("alerting", (*alerting)->process().pid());
  procs.roots.emplace_back("postgres", postmaster);
  if (redis_pid != 0) procs.roots.emplace_back("redis", redis_pid);
  procs.roots.emplace_back("bench", getpid());

  if (p.pg_statements > 0) {
    pqxx::nontransaction txn(admin);
    txn.exec("CREATE EXTENSION IF NOT EXISTS pg_stat_statements");
    txn.exec("SELECT pg_stat_statements_reset()");
  }
  std::vector<StepResult> steps;
  int64_t acked_total = 0;
  for (const int rate : p.rates) {
    StepResult step;
    step.rate = rate;
    const Fleet fleet =
        MakeFleet(bank, absl::StrCat("r", rate), int64_t{rate} * p.scrape_s, p.batch);
    step.gpus = fleet.gpus;
    step.jobs = static_cast<int64_t>(fleet.jobs.size());
    std::fprintf(stderr, "pipeline bench: %d samples/s: registering %zu jobs of %" PRId64 " GPUs\n",
                 rate, fleet.jobs.size(), fleet.gpus);
    const int64_t start_ms = NowMs();
    RegisterFleet(admin, fleet, start_ms - 600'000);
    step.writes_before = SettledPgWrites(admin);
    const auto cpu0 = CpuNow(procs);
    const int64_t drive_start_ms = NowMs();
    // The planted regression: jobs spread over the fleet, from a window boundary after the
    // detector's warm-up and reference windows.
    const int64_t window_ms = int64_t{p.window_s} * 1000;
    PlantedRegression plant;
    Notifications& notes = step.notifications;
    const size_t plant_jobs = std::min<size_t>(p.plant_jobs, fleet.jobs.size());
    for (size_t i = 0; i < plant_jobs; ++i) {
      plant.jobs.push_back((2 * i + 1) * fleet.jobs.size() / (2 * plant_jobs));
      notes.jobs.push_back(fleet.jobs[plant.jobs.back()].job_id);
    }
    plant.onset_ms = drive_start_ms / window_ms * window_ms + kPlantAfterWindows * window_ms;
    notes.onset_ms = plant.onset_ms;
    notes.onset_into_step_s = (plant.onset_ms - drive_start_ms) / 1000.0;
    // Data through the confirming windows and the settle time after them.
    notes.step_long_enough = drive_start_ms + int64_t{p.step_s} * 1000 >=
                             plant.onset_ms + kConfirmWindows * window_ms +
                                 ScaledSeconds("settle_s", p.window_s) * 1000 + window_ms;
    std::fprintf(stderr,
                 "pipeline bench: %d samples/s for %d s; OFU of %zu jobs falls %.1fx %.0f s "
                 "into the step%s\n",
                 rate, p.step_s, plant.jobs.size(), plant.factor, notes.onset_into_step_s,
                 notes.step_long_enough ? "" : " (the step is too short to confirm it)");
    AlertmanagerWatch watch((*alertmanager)->port(), fleet.cluster,
                            std::set<std::string>(notes.jobs.begin(), notes.jobs.end()));
    DriveResult drive;
    std::thread driver([&] {
      drive = Drive(ingest_stub.get(), fleet, p, absl::Seconds(p.step_s), /*paced=*/true,
                    drive_start_ms, plant);
    });
    const absl::Time drive_end = absl::FromUnixMillis(drive_start_ms) + absl::Seconds(p.step_s);
    while (absl::Now() < drive_end) {
      absl::SleepFor(absl::Seconds(2));
      if (NowMs() - drive_start_ms >= 2LL * p.window_s * 1000 && absl::Now() < drive_end) {
        SampleLags(admin, fleet.cluster, drive_start_ms, &step.lags);
        std::fprintf(stderr, "  %3" PRId64 " s  ofu lag p99 %.1f s\r",
                     (NowMs() - drive_start_ms) / 1000, Percentile(step.lags.ofu, 0.99));
      }
    }
    driver.join();
    step.drive = drive;
    acked_total += drive.acked;
    // Catch-up: ofu has consumed every acknowledged sample and mfu and alerting have
    // acknowledged ofu's newest commit.
    const absl::Time catch_up_start = absl::Now();
    while (absl::Now() - catch_up_start < absl::Seconds(p.max_catch_up_s)) {
      Progress pr = ReadProgress(admin);
      if (pr.ofu_consumed >= acked_total && pr.mfu_acked >= pr.ofu_commit_seq &&
          pr.alerting_acked >= pr.ofu_commit_seq) {
        step.caught_up = true;
        break;
      }
      absl::SleepFor(absl::Milliseconds(250));
    }
    step.catch_up_s = absl::ToDoubleSeconds(absl::Now() - catch_up_start);
    const auto cpu1 = CpuNow(procs);
    for (const auto& [name, s] : cpu1) step.cpu_s[name] = s - cpu0.at(name);
    step.writes_after = SettledPgWrites(admin);
    // Notifications still on their way get the rest of the catch-up time (none comes when the
    // step ended before the onset).
    while (plant.onset_ms < drive_start_ms + int64_t{p.step_s} * 1000 && !watch.all_seen() &&
           absl::Now() - catch_up_start < absl::Seconds(p.max_catch_up_s)) {
      absl::SleepFor(absl::Milliseconds(250));
    }
    watch.Stop();
    notes.watch_error = watch.first_error();
    ReadRecordedAlerts(admin, fleet.cluster, drive_start_ms, watch.seen_ms(), &notes);
    {
      pqxx::nontransaction txn(admin);
      auto r = txn.exec_params(
          "SELECT count(*) FILTER (WHERE w.gpu = ''), count(*) FILTER (WHERE w.gpu <> '') "
          "FROM ofu_windows w JOIN jobs j ON j.id = w.job WHERE j.cluster = $1",
          fleet.cluster);
      step.job_windows_per_s = r[0][0].as<double>() / drive.seconds;
      step.gpu_windows_per_s = r[0][1].as<double>() / drive.seconds;
    }
    const double two_windows = 2.0 * p.window_s;
    step.sustained = static_cast<double>(drive.acked) >= 0.95 * rate * drive.seconds &&
                     Percentile(step.lags.ofu, 0.99) < two_windows &&
                     Percentile(step.lags.mfu, 0.99) < two_windows;
    std::fprintf(stderr,
                 "pipeline bench: %d samples/s: %.0f acknowledged/s, ofu lag p99 %.1f s, "
                 "caught up %s in %.1f s%s\n",
                 rate, static_cast<double>(drive.acked) / drive.seconds,
                 Percentile(step.lags.ofu, 0.99), step.caught_up ? "" : "NOT", step.catch_up_s,
                 drive.first_error.empty() ? "" : (" (" + drive.first_error + ")").c_str());
    EndFleet(admin, fleet);
    steps.push_back(std::move(step));
    if (!steps.back().caught_up) {
      std::fprintf(stderr, "pipeline bench: not caught up; higher rates skipped\n");
      break;
    }
  }

  // --- Report. ----------------------------------------------------------------------------
  std::printf(
      "\npipeline throughput: windows of %d s, a sample per GPU every %d s (six per GPU "
      "window, as 60 s windows of 10 s scrapes), %d s per rate, batches of %d samples, %d "
      "senders, %u hardware threads\n",
      p.window_s, p.scrape_s, p.step_s, p.batch, p.senders, std::thread::hardware_concurrency());
  std::printf("\n%-40s %12s %10s\n", "baseline", "samples/s", "vs COPY");
  std::printf("%-40s %12.0f %10s\n", "raw COPY, same rows, 4 connections", copy_rate, "1.00");
  std::printf("%-40s %12.0f %10.2f\n", "ingest alone, PushSamples acknowledged", ingest_only_rate,
              ingest_only_rate / copy_rate);
  std::printf("%-40s ingest %.3f, postgres %.3f CPU s per 1,000 samples\n", "",
              1000 * ingest_only_cpu / std::max<int64_t>(1, ingest_only.acked),
              1000 * ingest_only_pg_cpu / std::max<int64_t>(1, ingest_only.acked));

  std::printf("\n%8s %8s %6s %9s %8s %8s %13s %13s %13s %8s %9s %13s %11s\n", "offered", "GPUs",
              "jobs", "acked/s", "jobwin/s", "gpuwin/s", "ofu lag", "mfu lag", "alerting lag",
              "catchup", "sustained", "notify", "notify");
  std::printf("%8s %8s %6s %9s %8s %8s %13s %13s %13s %8s %9s %13s %11s\n", "/s", "", "", "", "",
              "", "p50/p99 s", "p50/p99 s", "p50/p99 s", "s", "", "p50/max s", "p50/max win");
  // A regression never notified counts as infinitely late: '-'.
  auto figure = [](double v, const char* format) {
    return std::isfinite(v) ? absl::StrFormat(format, v) : std::string("-");
  };
  auto p50_max = [&](const std::vector<double>& v, double unit, const char* format) {
    if (v.empty()) return std::string("-");
    return absl::StrCat(figure(Percentile(v, 0.5) / unit, format), "/",
                        figure(*std::max_element(v.begin(), v.end()) / unit, format));
  };
  for (const StepResult& s : steps) {
    auto lag = [](const std::vector<double>& v) {
      return absl::StrFormat("%5.1f/%5.1f", Percentile(v, 0.5), Percentile(v, 0.99));
    };
    std::printf(
        "%8d %8" PRId64 " %6" PRId64 " %9.0f %8.1f %8.0f %13s %13s %13s %7.1f%s %9s %13s %11s\n",
        s.rate, s.gpus, s.jobs, static_cast<double>(s.drive.acked) / s.drive.seconds,
        s.job_windows_per_s, s.gpu_windows_per_s, lag(s.lags.ofu).c_str(), lag(s.lags.mfu).c_str(),
        lag(s.lags.alerting).c_str(), s.catch_up_s, s.caught_up ? " " : "+",
        s.sustained ? "yes" : "no", p50_max(s.notifications.notified_s, 1, "%.1f").c_str(),
        p50_max(s.notifications.notified_s, p.window_s, "%.1f").c_str());
  }

  // Regression to notification, in detail.
  const int64_t settle_s = ScaledSeconds("settle_s", p.window_s);
  std::printf(
      "\nregression to notification: OFU of %d jobs per step falls 2.5x (tensor activity / 2.5, "
      "SM clock unchanged) from a window boundary %d windows after the step's first; notify = "
      "from that onset (data time, which is wall time here) to the alert in Alertmanager's "
      "GET /api/v2/alerts (polled every 0.5 s); recorded = to alerting's alerts.start_time\n",
      p.plant_jobs, kPlantAfterWindows);
  std::printf("alerting settings scaled with the windows (production -> here, s):");
  for (const ScaledSetting& setting : ScaledAlertingSettings()) {
    std::printf(" %s %" PRId64 " -> %" PRId64 ";", setting.key.c_str(), setting.production_s,
                Scaled(setting, p.window_s));
  }
  std::printf("\n%8s %8s %9s %13s %13s %13s %12s %12s   %s\n", "offered", "onset", "notified",
              "recorded", "notify", "delivery", "onset found", "ingest late",
              "other alerts (jobs not planted)");
  std::printf("%8s %8s %9s %13s %13s %13s %12s %12s\n", "/s", "s in", "", "p50/max s", "p50/max s",
              "p50/max s", "p50 s", "max s");
  for (const StepResult& s : steps) {
    const Notifications& n = s.notifications;
    int notified = 0;
    std::vector<double> delivery;
    for (size_t i = 0; i < n.jobs.size(); ++i) {
      if (std::isfinite(n.notified_s[i])) ++notified;
      if (std::isfinite(n.notified_s[i]) && std::isfinite(n.recorded_s[i])) {
        delivery.push_back(n.notified_s[i] - n.recorded_s[i]);
      }
    }
    std::string others;
    for (const auto& [kind, count] : n.other_alerts) {
      absl::StrAppend(&others, others.empty() ? "" : ", ", kind, " ", count);
    }
    if (n.platform_alerts > 0) {
      absl::StrAppend(&others, others.empty() ? "" : "; ", "platform_lagging ", n.platform_alerts);
    }
    std::printf("%8d %8.0f %5d of %d %13s %13s %13s %12s %12.1f   %s\n", s.rate,
                n.onset_into_step_s, notified, static_cast<int>(n.jobs.size()),
                p50_max(n.recorded_s, 1, "%.1f").c_str(), p50_max(n.notified_s, 1, "%.1f").c_str(),
                p50_max(delivery, 1, "%.1f").c_str(),
                figure(Percentile(n.onset_error_s, 0.5), "%+.0f").c_str(), s.drive.max_ack_late_s,
                others.empty() ? "none" : others.c_str());
    if (!n.step_long_enough) {
      std::printf(
          "%8s the step ends before the detector can confirm the drop: it needs data "
          "until %d windows after the onset plus settle_s (--step-s %.0f or more)\n",
          "", kConfirmWindows, n.onset_into_step_s + (kConfirmWindows + 1) * p.window_s + settle_s);
    }
    if (n.onset_into_step_s >= s.drive.seconds) {
      std::printf("%8s no regression was planted: the step ended before its onset\n", "");
    } else if (notified < static_cast<int>(n.jobs.size())) {
      std::printf(
          "%8s %d planted regression(s) not in Alertmanager by the end of the catch-up "
          "(%d s after the step)%s%s\n",
          "", static_cast<int>(n.jobs.size()) - notified, p.max_catch_up_s,
          n.watch_error.empty() ? "" : "; ", n.watch_error.c_str());
    }
  }
  std::printf(
      "what the delay is made of: the detector confirms a drop once 8 of its 10 test windows "
      "are low at two windows in a row, at the end of the 9th low window (%d s); alerting "
      "evaluates a running job's window once a window ending settle_s (%" PRId64
      " s) later "
      "arrived; then ofu's lateness in closing and forwarding windows (the alerting lag "
      "column), and delivery (outbox to Alertmanager: 'delivery'). When ingest falls behind "
      "the offered rate, samples are acknowledged long after their data time ('ingest late') "
      "and every figure after it carries that delay. Floor: %" PRId64
      " s = %.1f windows; the 10-window persistence is production's 10 minutes, by design.\n",
      kConfirmWindows * p.window_s, settle_s, kConfirmWindows * p.window_s + settle_s,
      static_cast<double>(kConfirmWindows * p.window_s + settle_s) / p.window_s);

  std::printf("\nCPU seconds per 1,000 samples acknowledged (process and its children)\n");
  std::printf("%8s", "offered");
  for (const auto& [name, pid] : procs.roots) std::printf(" %9s", name.c_str());
  std::printf(" %9s\n", "total");
  for (const StepResult& s : steps) {
    const double k = 1000.0 / static_cast<double>(std::max<int64_t>(1, s.drive.acked));
    std::printf("%8d", s.rate);
    double total = 0;
    for (const auto& [name, pid] : procs.roots) {
      const double v = s.cpu_s.count(name) ? s.cpu_s.at(name) : 0;
      total += v;
      std::printf(" %9.3f", v * k);
    }
    std::printf(" %9.3f\n", total * k);
  }

  std::printf("\nPostgreSQL writes per sample acknowledged (step start to caught up)\n");
  std::printf("%8s %10s %12s %12s   %s\n", "offered", "rows", "table bytes", "WAL bytes",
              "rows per 1,000 samples by table (top 6)");
  for (const StepResult& s : steps) {
    const double n = static_cast<double>(std::max<int64_t>(1, s.drive.acked));
    std::vector<std::pair<int64_t, std::string>> by_table;
    for (const auto& [table, rows] : s.writes_after.rows_by_table) {
      auto before = s.writes_before.rows_by_table.find(table);
      const int64_t d = rows - (before == s.writes_before.rows_by_table.end() ? 0 : before->second);
      if (d > 0) by_table.emplace_back(d, table);
    }
    std::sort(by_table.rbegin(), by_table.rend());
    std::string top;
    for (size_t i = 0; i < std::min<size_t>(6, by_table.size()); ++i) {
      absl::StrAppend(&top, i ? ", " : "", by_table[i].second, " ",
                      absl::StrFormat("%.0f", 1000.0 * by_table[i].first / n));
    }
    std::printf("%8d %10.3f %12.1f %12.1f   %s\n", s.rate,
                static_cast<double>(s.writes_after.rows - s.writes_before.rows) / n,
                static_cast<double>(s.writes_after.bytes - s.writes_before.bytes) / n,
                static_cast<double>(s.writes_after.wal_lsn - s.writes_before.wal_lsn) / n,
                top.c_str());
  }

  // On disk at the end of the run, per GPU-day at production scale: every stored sample
  // stands for one 10 s scrape of one GPU (8,640 a GPU-day), and the windows hold six samples
  // per GPU each here as there, so table bytes x 8,640 / samples stored is a GPU-day's share.
  {
    pqxx::nontransaction txn(admin);
    const auto samples = txn.exec1("SELECT count(*) FROM samples")[0].as<double>();
    std::printf(
        "\non disk after the run, per GPU-day at production scale (10 s scrapes: a stored sample "
        "is 1/8,640 of a GPU-day), tables with their indexes and TOAST; %.0f samples stored\n",
        samples);
    std::printf("%-34s %14s %14s %14s\n", "table", "rows", "bytes/row", "bytes/GPU-day");
    double total = 0;
    for (const char* table : {"samples", "ofu_windows", "ofu_fleet_hours", "mfu_ofu_windows",
                              "mfu_reconciliation_points", "alert_windows"}) {
      const double bytes =
          // pg_partition_tree lists nothing for a table that is not partitioned.
          txn.exec_params1("SELECT (pg_total_relation_size($1::regclass) + coalesce((SELECT "
                           "sum(pg_total_relation_size(relid)) FROM pg_partition_tree($1::regclass) "
                           "WHERE relid <> $1::regclass), 0))::float8",
                           std::string(table))[0]
              .as<double>();
      const double rows =
          txn.exec1(absl::StrCat("SELECT count(*) FROM ", table))[0].as<double>();
      const double per_day = samples > 0 ? bytes * 8640 / samples : 0;
      total += per_day;
      std::printf("%-34s %14.0f %14.1f %14.0f\n", table, rows, rows > 0 ? bytes / rows : 0,
                  per_day);
    }
    std::printf("%-34s %14s %14s %14.0f\n", "total", "", "", total);
  }

  if (p.pg_statements > 0) {
    std::printf("\nPostgreSQL statements over the rate steps, by total execution time (top %d)\n",
                p.pg_statements);
    std::printf("%10s %10s %12s %9s  %s\n", "total s", "calls", "rows", "mean ms", "statement");
    pqxx::nontransaction txn(admin);
    for (const auto& r :
         txn.exec_params("SELECT total_exec_time / 1000, calls, rows, mean_exec_time, "
                         "regexp_replace(query, '\\s+', ' ', 'g') FROM pg_stat_statements "
                         "ORDER BY total_exec_time DESC LIMIT $1",
                         p.pg_statements)) {
      std::string query = r[4].as<std::string>();
      if (query.size() > 110) query = query.substr(0, 107) + "...";
      std::printf("%10.1f %10" PRId64 " %12" PRId64 " %9.2f  %s\n", r[0].as<double>(),
                  r[1].as<int64_t>(), r[2].as<int64_t>(), r[3].as<double>(), query.c_str());
    }
  }

  int best = 0;
  for (const StepResult& s : steps) {
    if (s.sustained) best = std::max(best, s.rate);
  }
  int best_with_alerting = 0;
  for (const StepResult& s : steps) {
    if (s.sustained && Percentile(s.lags.alerting, 0.99) < 2.0 * p.window_s) {
      best_with_alerting = std::max(best_with_alerting, s.rate);
    }
  }
  std::printf(
      "\nheadline: highest rate sustained end to end (ofu and mfu p99 lag under two windows): "
      "%d samples/s = %.2f x ingest alone (%.0f/s); with alerting's lag under two windows too: "
      "%d samples/s\n",
      best, best / ingest_only_rate, ingest_only_rate, best_with_alerting);
  return 0;
}

}  // namespace
}  // namespace goodput

int main(int argc, char** argv) {
  goodput::Params p;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--short") {
      p.rates = {2'000, 5'000};
      p.step_s = 30;
      p.ingest_only_s = 8;
      continue;
    }
    if (i + 1 >= argc) {
      std::cerr << flag << " needs a value\n";
      return 2;
    }
    const std::string value = argv[++i];
    if (flag == "--rates") {
      p.rates.clear();
      for (absl::string_view r : absl::StrSplit(value, ',')) {
        int rate = 0;
        if (!absl::SimpleAtoi(r, &rate) || rate <= 0) {
          std::cerr << "--rates: \"" << r << "\" is not a positive integer\n";
          return 2;
        }
        p.rates.push_back(rate);
      }
      continue;
    }
    int v = 0;
    if (!absl::SimpleAtoi(value, &v) || v <= 0) {
      std::cerr << flag << ": \"" << value << "\" is not a positive integer\n";
      return 2;
    }
    if (flag == "--step-s") {
      p.step_s = v;
    } else if (flag == "--window-s") {
      p.window_s = v;
    } else if (flag == "--scrape-s") {
      p.scrape_s = v;
    } else if (flag == "--batch") {
      p.batch = v;
    } else if (flag == "--senders") {
      p.senders = v;
    } else if (flag == "--ingest-only-s") {
      p.ingest_only_s = v;
    } else if (flag == "--pg-statements") {
      p.pg_statements = v;
    } else if (flag == "--plant-jobs") {
      p.plant_jobs = v;
    } else {
      std::cerr << "unknown flag " << flag << "\n";
      return 2;
    }
  }
  return goodput::Run(p);
}
