// Alerting cost per window, by the length of the job's history: two 1,024-GPU jobs, one with
// 1 hour of windows already evaluated and one with 7 days, each then pushed one new window
// per ordered push (as ofu's forwarder sends them live) into goodput-alerting's engine on a
// real PostgreSQL. Prints, per job, the push latency per window (median, p10..p90), then the
// first push after a restart (detector state restored from its checkpoint), and as the
// baseline in the same run what one push cost before detection was incremental: reading and
// decoding all of the job's windows.
//
//   goodput_alerting_bench [--long-days 7] [--measure 60]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "goodput/v1/alert.pb.h"
#include "services/alerting/alert_engine.h"
#include "services/api/api_convert.h"
#include "services/platform/migrations.h"
#include "services/platform/pg_pool.h"
#include "tests/support/postgres_server.h"

namespace {

using namespace goodput;  // NOLINT
namespace v1 = goodput::v1;
using Clock = std::chrono::steady_clock;

constexpr int kGpus = 1024;
constexpr int64_t kT0 = 1'790'000'000;  // first window (unix s)
constexpr int kBatch = 500;             // windows per push while loading history

struct Spread {
  double p10 = 0, median = 0, p90 = 0;
};
Spread SpreadOf(std::vector<double> v) {
  if (v.empty()) return {};
  std::sort(v.begin(), v.end());
  auto at = [&](double q) {
    return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
  };
  return {at(0.1), at(0.5), at(0.9)};
}
double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// Window m of a 1,024-GPU job at a steady 40% OFU with checkpoint dips, two slow GPUs named.
v1::OfuWindow Window(const std::string& job_id, int64_t m) {
  v1::OfuWindow w;
  w.mutable_job()->set_cluster("bench");
  w.mutable_job()->set_job_id(job_id);
  *w.mutable_start_time() = api::UnixMsToTimestamp((kT0 + m * 60) * 1000);
  *w.mutable_end_time() = api::UnixMsToTimestamp((kT0 + m * 60 + 60) * 1000);
  w.set_window_s(60);
  w.set_gpu_model("NVIDIA H100 80GB HBM3");
  w.set_workload_fingerprint("bench-workload");
  const double dip = (m % 30) >= 27 ? 0.05 : 1.0;
  w.set_ofu(0.4 * dip * (1.0 + 0.02 * std::sin(static_cast<double>(m) * 1.3)));
  w.set_gpus_reporting(kGpus);
  w.set_gpus_allocated(kGpus);
  w.set_gpu_coverage(1.0);
  w.set_gpu_ofu_median(w.ofu());
  w.set_warmup(m < 8);
  w.set_finalized(true);
  for (int g : {17, 901}) {
    v1::Straggler* s = w.add_stragglers();
    s->mutable_gpu()->set_host(absl::StrCat("node", g / 8));
    s->mutable_gpu()->set_gpu_index(g % 8);
    s->set_ofu(w.ofu() * 0.7);
    s->set_score(0.7);
  }
  return w;
}

class Pusher {
 public:
  explicit Pusher(alerting::AlertEngine* engine) : engine_(engine) {}
  void Reset(alerting::AlertEngine* engine) { engine_ = engine; }
  // One ordered push of windows [from, to) of `job_id`; returns its latency.
  double Push(const std::string& job_id, int64_t from, int64_t to) {
    v1::PushWindowsRequest req;
    req.mutable_position()->set_producer_id("bench-ofu");
    req.mutable_position()->set_sequence(seq_);
    req.mutable_position()->set_previous_sequence(seq_ - 1);
    for (int64_t m = from; m < to; ++m) *req.add_windows() = Window(job_id, m);
    const auto t0 = Clock::now();
    absl::StatusOr<v1::DeliveryAck> ack = engine_->PushWindows(req);
    const double ms = Ms(Clock::now() - t0);
    if (!ack.ok() || ack->gap_detected() || ack->duplicate()) {
      std::cerr << "goodput_alerting_bench: push failed: "
                << (ack.ok() ? std::string("gap or duplicate") : ack.status().ToString()) << "\n";
      std::exit(1);
    }
    ++seq_;
    return ms;
  }

 private:
  alerting::AlertEngine* engine_;
  int64_t seq_ = 1;
};

// The baseline: what every push cost before, reading and decoding all of the job's windows.
double FullReread(platform::PgPool* pool, const std::string& job_id) {
  const auto t0 = Clock::now();
  int64_t decoded = 0;
  absl::Status s = pool->RunTransaction([&](pqxx::work& w) -> absl::Status {
    decoded = 0;
    for (const pqxx::row& r : w.exec_params(
             "SELECT encode(window_pb, 'base64') FROM alert_windows WHERE cluster = 'bench' "
             "AND job_id = $1 ORDER BY start_time",
             job_id)) {
      std::string bytes;
      v1::OfuWindow win;
      if (absl::Base64Unescape(r[0].as<std::string>(), &bytes) && win.ParseFromString(bytes)) {
        ++decoded;
      }
    }
    return absl::OkStatus();
  });
  if (!s.ok()) std::cerr << "goodput_alerting_bench: " << s << "\n";
  return Ms(Clock::now() - t0);
}

}  // namespace

int main(int argc, char** argv) {
  int long_days = 7;
  int measure = 60;
  for (int i = 1; i + 1 < argc; i += 2) {
    int v = 0;
    if (!absl::SimpleAtoi(argv[i + 1], &v) || v <= 0) {
      std::cerr << "goodput_alerting_bench: " << argv[i] << ": \"" << argv[i + 1]
                << "\" is not a positive number\n";
      return 2;
    }
    if (std::strcmp(argv[i], "--long-days") == 0) {
      long_days = v;
    } else if (std::strcmp(argv[i], "--measure") == 0) {
      measure = v;
    } else {
      std::cerr << "usage: goodput_alerting_bench [--long-days N] [--measure N]\n";
      return 2;
    }
  }
  auto pg = testing::PostgresServer::Create(
      {.settings = {{"shared_buffers", "256MB"}, {"max_wal_size", "2GB"}}});
  if (!pg.ok()) {
    std::cerr << "goodput_alerting_bench: " << pg.status() << "\n";
    return 1;
  }
  if (absl::Status s = (*pg)->CreateDatabase("goodput"); !s.ok()) {
    std::cerr << "goodput_alerting_bench: " << s << "\n";
    return 1;
  }
  const std::string dsn = (*pg)->Dsn("goodput");
  auto migrated = platform::ApplyMigrations(dsn, std::string(GOODPUT_SOURCE_DIR) + "/migrations");
  if (!migrated.ok()) {
    std::cerr << "goodput_alerting_bench: " << migrated.status() << "\n";
    return 1;
  }
  auto pool = platform::PgPool::Create({.dsn = dsn, .max_connections = 4});
  if (!pool.ok()) {
    std::cerr << "goodput_alerting_bench: " << pool.status() << "\n";
    return 1;
  }
  auto engine = std::make_unique<alerting::AlertEngine>(pool->get(), alerting::EngineConfig{},
                                                        nullptr, platform::Logger());
  Pusher pusher(engine.get());

  struct Job {
    std::string id;
    int64_t history;  // windows evaluated before the measurement
    std::vector<double> push_ms;
    double restart_ms = 0;
    double reread_ms = 0;
  };
  std::vector<Job> jobs = {
      {"job-1h", 60, {}, 0, 0},
      {absl::StrCat("job-", long_days, "d"), int64_t{long_days} * 1440, {}, 0, 0}};
  for (Job& j : jobs) {
    std::fprintf(stderr, "loading %lld windows of %s", static_cast<long long>(j.history),
                 j.id.c_str());
    for (int64_t m = 0; m < j.history; m += kBatch) {
      pusher.Push(j.id, m, std::min(j.history, m + kBatch));
      std::fprintf(stderr, ".");
    }
    std::fprintf(stderr, "\n");
  }
  // Live: one window per push, the jobs interleaved.
  for (int k = 0; k < measure; ++k) {
    for (Job& j : jobs) j.push_ms.push_back(pusher.Push(j.id, j.history + k, j.history + k + 1));
  }
  // A restarted service: the detector state comes from the checkpoint.
  engine = std::make_unique<alerting::AlertEngine>(pool->get(), alerting::EngineConfig{}, nullptr,
                                                   platform::Logger());
  pusher.Reset(engine.get());
  for (Job& j : jobs) {
    j.restart_ms = pusher.Push(j.id, j.history + measure, j.history + measure + 1);
    std::vector<double> reread;
    for (int k = 0; k < 5; ++k) reread.push_back(FullReread(pool->get(), j.id));
    j.reread_ms = SpreadOf(reread).median;
  }

  std::printf(
      "goodput-alerting: cost of one window pushed live, %d-GPU jobs (one window per push, %d "
      "pushes each)\n\n",
      kGpus, measure);
  std::printf("%-10s %10s | %10s %16s | %18s | %22s\n", "job", "windows", "push p50", "p10..p90",
              "first after restart", "baseline: re-read job");
  std::printf("%-10s %10s | %10s %16s | %18s | %22s\n", "", "before", "ms", "ms", "ms",
              "ms (old cost per push)");
  for (const Job& j : jobs) {
    const Spread s = SpreadOf(j.push_ms);
    std::printf("%-10s %10lld | %10.2f %7.2f..%-7.2f | %18.2f | %22.2f\n", j.id.c_str(),
                static_cast<long long>(j.history), s.median, s.p10, s.p90, j.restart_ms,
                j.reread_ms);
  }
  const double ratio = SpreadOf(jobs[1].push_ms).median / SpreadOf(jobs[0].push_ms).median;
  std::printf("\nper-window cost, %s vs %s: %.2fx (the old engine's re-read: %.1fx)\n",
              jobs[1].id.c_str(), jobs[0].id.c_str(), ratio,
              jobs[1].reread_ms / std::max(jobs[0].reread_ms, 1e-9));
  return 0;
}
