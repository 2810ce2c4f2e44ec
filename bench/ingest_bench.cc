// Ingest throughput: GPU samples per second acknowledged-durable through PushSamples
// (gRPC client streaming -> validation -> attribution -> COPY -> commit -> acknowledgement)
// next to a raw COPY of the same rows into the same table, measured in the same run against
// a private PostgreSQL on this machine. Prints a table with the median of several rounds
// and the ratio; it asserts nothing about time.
//
//   goodput_ingest_bench [--samples N] [--batch N] [--streams N] [--rounds N]

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/bench_flags.h"
#include "goodput/v1/ingest.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "services/core/gpu_catalog.h"
#include "services/ingest/ingest_service.h"
#include "services/ingest/sample_store.h"
#include "services/ingest/scraper.h"
#include "services/platform/grpc_server.h"
#include "services/platform/migrations.h"
#include "services/platform/pg_pool.h"
#include "tests/support/postgres_server.h"

namespace goodput {
namespace {

constexpr char kModel[] = "NVIDIA H100 80GB HBM3";

struct Params {
  int samples = 400'000;
  int batch = 5'000;
  int streams = 2;
  int rounds = 3;
};

// The rows every round stores: `gpus_per_host` GPUs on enough hosts, one sample per GPU per
// 10 s step, ending a minute ago.
struct Row {
  std::string host;
  int gpu;
  int64_t time_ms;
  double tensor_active;
  double sm_clock_mhz;
  double power_w;
};

std::vector<Row> MakeRows(int count, int64_t end_ms) {
  std::vector<Row> rows;
  rows.reserve(count);
  const int gpus = 1024;
  for (int i = 0; i < count; ++i) {
    const int gpu = i % gpus;
    const int step = i / gpus;
    rows.push_back(Row{absl::StrCat("node-", gpu / 8), gpu % 8,
                       end_ms - 60'000 - static_cast<int64_t>(step) * 10'000,
                       0.3 + 0.001 * (i % 300), 1200.0 + (i % 360), 400.0 + (i % 250)});
  }
  return rows;
}

std::string Num(double v) {
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, end);
}

// COPY over `p.streams` connections in parallel (the same parallelism PushSamples gets),
// one transaction per batch.
double RawCopy(const std::string& dsn, const std::vector<Row>& rows, const Params& p) {
  const std::vector<std::string> columns = {"sample_time",   "batch_id",     "cluster",
                                            "host",          "gpu_index",    "gpu_model",
                                            "tensor_active", "sm_clock_mhz", "power_w"};
  std::vector<std::unique_ptr<pqxx::connection>> conns;
  for (int t = 0; t < p.streams; ++t) conns.push_back(std::make_unique<pqxx::connection>(dsn));
  const absl::Time start = absl::Now();
  std::vector<std::thread> threads;
  for (int t = 0; t < p.streams; ++t) {
    threads.emplace_back([&, t] {
      for (size_t first = static_cast<size_t>(t) * p.batch; first < rows.size();
           first += static_cast<size_t>(p.streams) * p.batch) {
        pqxx::work txn(*conns[t]);
        pqxx::stream_to copy(txn, "samples", columns);
        const size_t last = std::min(rows.size(), first + p.batch);
        const std::string batch_id = absl::StrCat("raw-", first);
        for (size_t i = first; i < last; ++i) {
          const Row& r = rows[i];
          std::array<std::optional<std::string>, 9> fields = {
              absl::FormatTime("%Y-%m-%d %H:%M:%E3S+00", absl::FromUnixMillis(r.time_ms),
                               absl::UTCTimeZone()),
              batch_id,
              std::string("bench"),
              r.host,
              absl::StrCat(r.gpu),
              std::string(kModel),
              Num(r.tensor_active),
              Num(r.sm_clock_mhz),
              Num(r.power_w)};
          copy << fields;
        }
        copy.complete();
        txn.commit();
      }
    });
  }
  for (auto& t : threads) t.join();
  return absl::ToDoubleSeconds(absl::Now() - start);
}

// With `faults`, every sample also carries what dcgm-exporter's default counters add: the
// XID gauge, the PCIe replay counter, uncorrectable remapped rows and the clock-event mask
// (0x4, SW power cap: no fault), all steady, so ingest's edge detection reads and locks each
// GPU's fault state and writes nothing (services/ingest/fault_events.h).
double ThroughPushSamples(v1::IngestService::Stub* stub, const std::vector<Row>& rows,
                          const Params& p, int round, bool faults = false) {
  // Requests are built before timing: the sender's encoding cost is not the service's.
  std::vector<v1::PushSamplesRequest> batches;
  for (size_t first = 0; first < rows.size(); first += p.batch) {
    v1::PushSamplesRequest b;
    b.set_batch_id(absl::StrCat("round-", round, faults ? "-faults-" : "-", first));
    b.set_cluster("bench");
    const size_t last = std::min(rows.size(), first + p.batch);
    for (size_t i = first; i < last; ++i) {
      v1::GpuSample* s = b.add_samples();
      s->mutable_gpu()->set_host(rows[i].host);
      s->mutable_gpu()->set_gpu_index(rows[i].gpu);
      s->set_time_unix_ms(rows[i].time_ms);
      s->set_gpu_model(kModel);
      s->set_tensor_active(rows[i].tensor_active);
      s->set_sm_clock_mhz(rows[i].sm_clock_mhz);
      s->set_power_w(rows[i].power_w);
      if (faults) {
        s->set_clock_throttle_reasons(0x4);
        for (v1::FaultSignal signal : {v1::FAULT_SIGNAL_XID, v1::FAULT_SIGNAL_PCIE_REPLAYS,
                                       v1::FAULT_SIGNAL_REMAPPED_ROWS_UNCORRECTABLE}) {
          v1::GpuFaultReading* f = s->add_faults();
          f->set_signal(signal);
          f->set_value(0);
        }
      }
    }
    batches.push_back(std::move(b));
  }
  std::atomic<int64_t> stored{0};
  std::atomic<bool> failed{false};
  const absl::Time start = absl::Now();
  std::vector<std::thread> threads;
  for (int t = 0; t < p.streams; ++t) {
    threads.emplace_back([&, t] {
      // One stream per 4 batches, as a node agent flushing periodically would.
      for (size_t first = t * 4; first < batches.size(); first += p.streams * 4) {
        grpc::ClientContext ctx;
        v1::PushSamplesResponse response;
        auto writer = stub->PushSamples(&ctx, &response);
        for (size_t i = first; i < std::min(batches.size(), first + 4); ++i)
          writer->Write(batches[i]);
        writer->WritesDone();
        grpc::Status status = writer->Finish();
        if (!status.ok()) {
          std::cerr << "PushSamples failed: " << status.error_message() << "\n";
          failed = true;
          return;
        }
        stored += response.stored_count();
      }
    });
  }
  for (auto& t : threads) t.join();
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  if (failed || stored.load() != static_cast<int64_t>(rows.size())) {
    std::cerr << "only " << stored.load() << " of " << rows.size() << " samples stored\n";
  }
  return seconds;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int Run(const Params& p) {
  auto pg = testing::PostgresServer::Create(
      {.settings = {{"shared_buffers", "256MB"}, {"max_wal_size", "2GB"}}});
  if (!pg.ok()) {
    std::cerr << pg.status() << "\n";
    return 1;
  }
  if (auto s = (*pg)->CreateDatabase("goodput"); !s.ok()) return 1;
  const std::string dsn = (*pg)->Dsn("goodput");
  auto migrated = platform::ApplyMigrations(dsn, std::string(GOODPUT_SOURCE_DIR) + "/migrations");
  if (!migrated.ok()) {
    std::cerr << migrated.status() << "\n";
    return 1;
  }
  auto pool = platform::PgPool::Create({.dsn = dsn, .max_connections = 4});
  if (!pool.ok()) return 1;
  ingest::SampleStore store(pool->get());
  ingest::IngestPipeline pipeline(
      &store, &core::GpuCatalog::BuiltIn(), {}, [] { return absl::ToUnixMillis(absl::Now()); },
      nullptr);
  ingest::IngestServiceImpl ingest_service(&pipeline);
  ingest::ScrapingIngestService service(&ingest_service, nullptr);
  platform::GrpcServerOptions options;
  options.host = "127.0.0.1";
  options.handle_signals = false;
  options.max_receive_message_bytes = 64 << 20;
  platform::GrpcServer server(options);
  server.AddService(&service, v1::IngestService::service_full_name());
  if (auto s = server.Start(); !s.ok()) {
    std::cerr << s << "\n";
    return 1;
  }
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(64 << 20);
  auto channel = grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", server.port()),
                                           grpc::InsecureChannelCredentials(), args);
  auto stub = v1::IngestService::NewStub(channel);

  const std::vector<Row> rows = MakeRows(p.samples, absl::ToUnixMillis(absl::Now()));
  pqxx::connection admin(dsn);
  auto truncate = [&] {
    pqxx::work txn(admin);
    txn.exec("TRUNCATE samples, ingest_batches, gpu_fault_state, gpu_fault_events");
    txn.commit();
  };
  // Warm-up: creates partitions, fills caches, opens connections.
  truncate();
  ThroughPushSamples(stub.get(), std::vector<Row>(rows.begin(), rows.begin() + p.batch * 2), p, -1);
  std::vector<double> copy_s, push_s, fault_s;
  for (int round = 0; round < p.rounds; ++round) {
    truncate();
    copy_s.push_back(RawCopy(dsn, rows, p));
    truncate();
    push_s.push_back(ThroughPushSamples(stub.get(), rows, p, round));
    truncate();
    fault_s.push_back(ThroughPushSamples(stub.get(), rows, p, round, /*faults=*/true));
  }
  server.Shutdown();

  const double copy_rate = p.samples / Median(copy_s);
  const double push_rate = p.samples / Median(push_s);
  std::printf(
      "ingest throughput, %d GPU samples per round, batches of %d, %d streams, "
      "median of %d rounds (%u hardware threads)\n",
      p.samples, p.batch, p.streams, p.rounds, std::thread::hardware_concurrency());
  std::printf("%-44s %14s %12s\n", "path", "samples/s", "vs COPY");
  std::printf("%-44s %14.0f %12s\n", "raw COPY (baseline, same rows, same table)", copy_rate,
              "1.00");
  std::printf("%-44s %14.0f %12.2f\n", "PushSamples, acknowledged after commit", push_rate,
              push_rate / copy_rate);
  const double fault_rate = p.samples / Median(fault_s);
  std::printf("%-44s %14.0f %12.2f\n", "PushSamples with fault fields (edge detection)", fault_rate,
              fault_rate / copy_rate);
  return 0;
}

}  // namespace
}  // namespace goodput

int main(int argc, char** argv) {
  goodput::Params p;
  if (!goodput::bench::ParsePositiveIntFlags(argc, argv,
                                             {{"--samples", &p.samples},
                                              {"--batch", &p.batch},
                                              {"--streams", &p.streams},
                                              {"--rounds", &p.rounds}})) {
    return 2;
  }
  return goodput::Run(p);
}
