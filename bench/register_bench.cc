// Job registration against goodput-ingest (the binary, a private PostgreSQL on this machine):
//
//  1. RegisterJob of a new job with 1, 100 and 1,000 GPU allocations (8 GPUs a host, with
//     UUIDs), median of several rounds, beside a baseline measured in the same run: one
//     INSERT of the same allocation rows straight into `job_gpus` (the floor any registration
//     pays for storing them).
//  2. PushSamples latency (one 100-sample batch a call, one call after another) alone, the
//     baseline, and while `--registrars` clients (4) register 1,000-allocation jobs one
//     after another: the registrations must not make sample ingest wait.
//
// Prints tables; asserts nothing about time.
//
//   goodput_register_bench [--rounds N] [--load-s N] [--registrars N] [--allocations N]

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <iostream>
#include <memory>
#include <pqxx/pqxx>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/bench_flags.h"
#include "goodput/v1/ingest.grpc.pb.h"
#include "goodput/v1/job.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "tests/support/postgres_server.h"
#include "tests/support/service_process.h"

namespace goodput {
namespace {

constexpr int kGpusPerHost = 8;

struct Params {
  int rounds = 5;
  int load_s = 20;
  int registrars = 4;
  int allocations = 1000;
};

// A job of `allocations` GPUs on hosts of its own ("<prefix>-<host>"), starting now.
v1::Job MakeJob(const std::string& job_id, int allocations, int64_t start_ms) {
  v1::Job job;
  job.mutable_key()->set_cluster("bench");
  job.mutable_key()->set_job_id(job_id);
  job.set_scheduler(v1::SCHEDULER_KIND_SLURM);
  job.set_user("bench");
  job.set_state(v1::JOB_STATE_RUNNING);
  job.mutable_start_time()->set_seconds(start_ms / 1000);
  for (int i = 0; i < allocations; ++i) {
    v1::GpuAllocation* a = job.add_allocations();
    a->mutable_gpu()->set_host(absl::StrCat("j", job_id, "-n", i / kGpusPerHost));
    a->mutable_gpu()->set_gpu_index(i % kGpusPerHost);
    char uuid[64];
    std::snprintf(uuid, sizeof uuid, "GPU-%08x-0000-0000-0000-%012d",
                  static_cast<unsigned>(std::hash<std::string>{}(job_id)), i);
    a->mutable_gpu()->set_uuid(uuid);
  }
  return job;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

// Milliseconds RegisterJob of `job` took, or a negative value (printed) when it failed.
double RegisterMs(v1::JobService::Stub* stub, const v1::Job& job) {
  v1::RegisterJobRequest request;
  *request.mutable_job() = job;
  v1::RegisterJobResponse response;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(300));
  const absl::Time start = absl::Now();
  grpc::Status status = stub->RegisterJob(&ctx, request, &response);
  const double ms = absl::ToDoubleMilliseconds(absl::Now() - start);
  if (!status.ok()) {
    std::cerr << "RegisterJob " << job.key().job_id() << ": " << status.error_message() << "\n";
    return -1;
  }
  return ms;
}

// Milliseconds one INSERT of `job`'s allocations into job_gpus took (a job row of its own).
double InsertMs(const std::string& dsn, const v1::Job& job, int64_t start_ms) {
  pqxx::connection conn(dsn);
  pqxx::work txn(conn);
  const int64_t id = txn.exec_params(
                            "INSERT INTO jobs (cluster, job_id, state, start_time) "
                            "VALUES ($1, $2, 'running', now()) RETURNING id",
                            job.key().cluster(), job.key().job_id())[0][0]
                         .as<int64_t>();
  std::string hosts = "{", indexes = "{", uuids = "{";
  for (int i = 0; i < job.allocations_size(); ++i) {
    const v1::GpuRef& g = job.allocations(i).gpu();
    const char* sep = i ? "," : "";
    absl::StrAppend(&hosts, sep, "\"", g.host(), "\"");
    absl::StrAppend(&indexes, sep, g.gpu_index());
    absl::StrAppend(&uuids, sep, "\"", g.uuid(), "\"");
  }
  const absl::Time start = absl::Now();
  txn.exec_params(
      "INSERT INTO job_gpus (job, cluster, host, gpu_index, gpu_uuid, valid) "
      "SELECT $1, 'bench', h, i, u, tstzrange(to_timestamp($5::bigint / 1000.0), NULL, '[)') "
      "FROM unnest($2::text[], $3::int[], $4::text[]) AS r(h, i, u)",
      id, hosts + "}", indexes + "}", uuids + "}", start_ms);
  txn.commit();
  return absl::ToDoubleMilliseconds(absl::Now() - start);
}

// One PushSamples call of 100 samples (new batch id); its milliseconds, negative on failure.
double PushMs(v1::IngestService::Stub* stub, int call, int64_t now_ms) {
  v1::PushSamplesRequest batch;
  batch.set_batch_id(absl::StrCat("push-", call));
  batch.set_cluster("bench");
  for (int i = 0; i < 100; ++i) {
    v1::GpuSample* s = batch.add_samples();
    s->mutable_gpu()->set_host(absl::StrCat("telemetry-", i / kGpusPerHost));
    s->mutable_gpu()->set_gpu_index(i % kGpusPerHost);
    s->set_time_unix_ms(now_ms - 1000);
    s->set_gpu_model("NVIDIA H100 80GB HBM3");
    s->set_tensor_active(0.4);
    s->set_sm_clock_mhz(1700);
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  v1::PushSamplesResponse response;
  const absl::Time start = absl::Now();
  auto writer = stub->PushSamples(&ctx, &response);
  writer->Write(batch);
  writer->WritesDone();
  grpc::Status status = writer->Finish();
  const double ms = absl::ToDoubleMilliseconds(absl::Now() - start);
  if (!status.ok()) {
    std::cerr << "PushSamples: " << status.error_message() << "\n";
    return -ms;
  }
  return ms;
}

struct PushFigures {
  std::vector<double> ms;
  int failed = 0;
  int registered = 0;
  int register_failed = 0;
  double register_ms_median = 0;
};

// PushSamples one call after another for `seconds`, with `registrars` threads registering
// jobs of `allocations` GPUs one after another meanwhile.
PushFigures PushUnderLoad(const testing::ServiceProcess& ingest, int seconds, int registrars,
                          int allocations, const std::string& tag) {
  PushFigures figures;
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  std::vector<std::vector<double>> register_ms(registrars);
  std::atomic<int> failed_registrations{0};
  for (int t = 0; t < registrars; ++t) {
    threads.emplace_back([&, t] {
      auto stub = v1::JobService::NewStub(ingest.Channel());
      for (int n = 0; !stop.load(); ++n) {
        const double ms =
            RegisterMs(stub.get(), MakeJob(absl::StrCat(tag, "-", t, "-", n), allocations,
                                           absl::ToUnixMillis(absl::Now())));
        if (ms < 0) {
          failed_registrations.fetch_add(1);
        } else {
          register_ms[t].push_back(ms);
        }
      }
    });
  }
  auto stub = v1::IngestService::NewStub(ingest.Channel());
  // Let the registrations start before measuring.
  if (registrars > 0) absl::SleepFor(absl::Milliseconds(500));
  const absl::Time end = absl::Now() + absl::Seconds(seconds);
  for (int call = 0; absl::Now() < end; ++call) {
    const double ms = PushMs(stub.get(), call + (tag == "alone" ? 0 : 1'000'000),
                             absl::ToUnixMillis(absl::Now()));
    if (ms < 0) ++figures.failed;
    figures.ms.push_back(std::abs(ms));
  }
  stop.store(true);
  for (std::thread& t : threads) t.join();
  std::vector<double> all;
  for (const auto& v : register_ms) all.insert(all.end(), v.begin(), v.end());
  figures.registered = static_cast<int>(all.size());
  figures.register_failed = failed_registrations.load();
  figures.register_ms_median = Median(all);
  return figures;
}

int Run(const Params& p) {
  absl::StatusOr<std::unique_ptr<testing::PostgresServer>> pg = testing::PostgresServer::Create();
  if (!pg.ok()) {
    std::cerr << "PostgreSQL: " << pg.status() << "\n";
    return 1;
  }
  if (absl::Status s = (*pg)->CreateDatabase("goodput"); !s.ok()) {
    std::cerr << s << "\n";
    return 1;
  }
  const std::string dsn = (*pg)->Dsn("goodput");
  absl::StatusOr<std::unique_ptr<testing::ServiceProcess>> ingest = testing::ServiceProcess::Start(
      {.binary = testing::BuiltBinary("services/ingest/goodput-ingest"),
       .config_yaml = absl::StrCat("postgres:\n  dsn: \"", dsn, "\"\n"),
       .extra_args = {"--migrate", "--migrations-dir",
                      (testing::SourceDir() / "migrations").string()}});
  if (!ingest.ok()) {
    std::cerr << "goodput-ingest: " << ingest.status() << "\n";
    return 1;
  }
  auto jobs = v1::JobService::NewStub((*ingest)->Channel());
  // Warm-up: connections opened, statements planned once.
  RegisterMs(jobs.get(), MakeJob("warmup", 8, absl::ToUnixMillis(absl::Now())));

  std::printf("RegisterJob of a new job, median of %d rounds (PostgreSQL %s)\n", p.rounds,
              "private, this machine");
  std::printf("%-12s %14s %16s %20s %10s\n", "allocations", "RegisterJob ms", "per allocation us",
              "baseline INSERT ms", "ratio");
  for (int allocations : {1, 100, 1000}) {
    std::vector<double> reg, ins;
    for (int round = 0; round < p.rounds; ++round) {
      const int64_t now_ms = absl::ToUnixMillis(absl::Now());
      const double ms = RegisterMs(
          jobs.get(), MakeJob(absl::StrCat("r", allocations, "-", round), allocations, now_ms));
      if (ms >= 0) reg.push_back(ms);
      ins.push_back(InsertMs(
          dsn, MakeJob(absl::StrCat("b", allocations, "-", round), allocations, now_ms), now_ms));
    }
    const double r = Median(reg), b = Median(ins);
    std::printf("%-12d %14.1f %16.0f %20.2f %9.1fx\n", allocations, r, r * 1000 / allocations, b,
                b > 0 ? r / b : 0);
    std::fflush(stdout);
  }

  std::printf("\nPushSamples (100 samples a call, calls back to back) for %d s\n", p.load_s);
  std::printf("%-40s %7s %9s %9s %9s %7s %12s %16s\n", "", "calls", "p50 ms", "p99 ms", "max ms",
              "failed", "registered", "register p50 ms");
  const PushFigures alone = PushUnderLoad(**ingest, p.load_s, 0, 0, "alone");
  const PushFigures loaded = PushUnderLoad(**ingest, p.load_s, p.registrars, p.allocations, "load");
  auto row = [](const std::string& name, const PushFigures& f) {
    std::printf("%-40s %7zu %9.1f %9.1f %9.1f %7d %12d %16.0f\n", name.c_str(), f.ms.size(),
                Quantile(f.ms, 0.5), Quantile(f.ms, 0.99), Quantile(f.ms, 1.0), f.failed,
                f.registered, f.register_ms_median);
  };
  row("alone (baseline)", alone);
  row(absl::StrCat("with ", p.registrars, " x ", p.allocations, "-GPU registrations"), loaded);
  if (loaded.register_failed > 0) {
    std::printf("(%d registrations failed, see stderr)\n", loaded.register_failed);
  }
  std::printf(
      "p99 ratio to the baseline: %.1fx\n",
      Quantile(alone.ms, 0.99) > 0 ? Quantile(loaded.ms, 0.99) / Quantile(alone.ms, 0.99) : 0);
  return 0;
}

}  // namespace
}  // namespace goodput

int main(int argc, char** argv) {
  goodput::Params p;
  if (!goodput::bench::ParsePositiveIntFlags(argc, argv,
                                             {{"--rounds", &p.rounds},
                                              {"--load-s", &p.load_s},
                                              {"--registrars", &p.registrars},
                                              {"--allocations", &p.allocations}})) {
    return 2;
  }
  return goodput::Run(p);
}
