// The goodput-ofu binary over gRPC with real PostgreSQL and Redis: it migrates, consumes
// samples stored in `samples`, is killed with SIGKILL mid-stream and restarted, and ends with
// windows equal to a direct computation over the same samples (each sample counted once);
// pushes from ingest are acknowledged with the producer's watermark; StreamJobOfu replays
// windows; an unknown job is NOT_FOUND.

#include <chrono>
#include <cmath>
#include <csignal>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "goodput/v1/ofu.grpc.pb.h"
#include "gtest/gtest.h"
#include "services/platform/pg_pool.h"
#include "tests/support/child_process.h"
#include "tests/support/postgres_server.h"
#include "tests/support/redis_server.h"
#include "tests/support/service_process.h"
#include "tests/support/test_steps.h"

namespace goodput::ofu {
namespace {

using ::goodput::testing::BuiltBinary;
using ::goodput::testing::PollUntil;
using ::goodput::testing::PostgresServer;
using ::goodput::testing::RedisServer;
using ::goodput::testing::ServiceProcess;
using ::goodput::testing::SourceDir;
namespace v1 = ::goodput::v1;

constexpr int64_t kStartMs = 1'767'225'600'000;  // 2026-01-01T00:00:00Z
constexpr int kGpus = 8;
constexpr int kWindows = 20;
constexpr int kIntervalS = 10;

struct Row {
  int64_t t_ms;
  int gpu;
  float tensor_active, sm_clock_mhz;
};

// Deterministic samples: GPU g's tensor activity varies with g and time.
std::vector<Row> MakeRows() {
  std::vector<Row> rows;
  for (int64_t t = 0; t < int64_t{kWindows} * 60; t += kIntervalS) {
    for (int g = 0; g < kGpus; ++g) {
      rows.push_back({kStartMs + t * 1000 + g * 37, g,
                      static_cast<float>(0.3 + 0.02 * g + 0.1 * std::sin(t / 90.0)),
                      static_cast<float>(1300 + 10 * ((t / kIntervalS + g) % 20))});
    }
  }
  return rows;
}

class OfuProcess : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(::goodput::testing::StartPostgres(&pg_));
    ASSERT_NO_FATAL_FAILURE(::goodput::testing::StartRedis(&redis_));
  }

  absl::StatusOr<std::unique_ptr<ServiceProcess>> StartOfu() {
    return ServiceProcess::Start(
        {.binary = BuiltBinary("services/ofu/goodput-ofu"),
         .config_yaml =
             absl::StrCat("postgres:\n  dsn: \"", pg_->Dsn("goodput"),
                          "\"\nredis:\n  host: ", redis_->host(), "\n  port: ", redis_->port(),
                          "\nlog:\n  format: text\nofu:\n  poll_interval_s: 0.1\n"
                          "  page_limit: 150\n  idle_flush_s: 2\n"),
         .extra_args = ::goodput::testing::MigrateArgs()});
  }

  void Sql(const std::string& sql) {
    absl::Status s = pg_->Execute("goodput", sql);
    ASSERT_TRUE(s.ok()) << s;
  }
  int64_t Value(const std::string& sql) {
    auto v = pg_->QueryValue("goodput", sql);
    return v.ok() && !v->empty() ? std::stoll(*v) : -1;
  }

  void Insert(const std::vector<Row>& rows, size_t from, size_t to) {
    std::vector<std::string> values;
    for (size_t i = from; i < to; ++i) {
      const Row& r = rows[i];
      values.push_back(absl::StrFormat(
          "(timestamptz 'epoch' + %d * interval '1 millisecond', 'c1', 'node-1', %d, "
          "'NVIDIA H100 80GB HBM3', (SELECT id FROM jobs WHERE job_id = 'j1'), %.9g, %.9g)",
          r.t_ms, r.gpu, r.tensor_active, r.sm_clock_mhz));
    }
    Sql(
        absl::StrCat("INSERT INTO samples (sample_time, cluster, host, gpu_index, gpu_model, "
                     "job, tensor_active, sm_clock_mhz) VALUES ",
                     absl::StrJoin(values, ",")));
  }

  std::unique_ptr<PostgresServer> pg_;
  std::unique_ptr<RedisServer> redis_;
};

v1::JobKey Key(const std::string& id) {
  v1::JobKey k;
  k.set_cluster("c1");
  k.set_job_id(id);
  return k;
}

TEST_F(OfuProcess, SurvivesSigkillMidStreamAndCountsEverySampleOnce) {
  auto ofu = StartOfu();
  ASSERT_TRUE(ofu.ok()) << ofu.status();
  const std::vector<Row> rows = MakeRows();
  Sql(absl::StrCat("SELECT samples_create_partitions(timestamptz 'epoch' + ", kStartMs,
                   " * interval '1 millisecond', timestamptz 'epoch' + ", kStartMs + 86'400'000,
                   " * interval '1 millisecond')"));
  Sql("INSERT INTO jobs (cluster, job_id, gpu_model) VALUES ('c1', 'j1', 'NVIDIA H100 80GB "
      "HBM3')");
  for (int g = 0; g < kGpus; ++g) {
    Sql(
        absl::StrCat("INSERT INTO job_gpus (job, cluster, host, gpu_index, valid) SELECT id, "
                     "'c1', 'node-1', ",
                     g, ", tstzrange('2025-12-01', NULL) FROM jobs"));
  }
  auto stub = v1::OfuService::NewStub((*ofu)->Channel());

  // Unknown job.
  {
    grpc::ClientContext ctx;
    v1::GetJobOfuRequest req;
    *req.mutable_job() = Key("nope");
    v1::GetJobOfuResponse resp;
    EXPECT_EQ(stub->GetJobOfu(&ctx, req, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  }

  // First part: the consumer finds the committed samples by itself.
  const size_t half = rows.size() * 9 / 20;
  Insert(rows, 0, half);
  ASSERT_TRUE(
      PollUntil([&] { return Value("SELECT count(*) FROM ofu_windows WHERE gpu = ''") >= 3; },
                absl::Seconds(30)));

  // StreamJobOfu replays what exists, then follows new windows as they are committed.
  const size_t three_quarters = rows.size() * 3 / 4;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    v1::StreamJobOfuRequest req;
    *req.mutable_job() = Key("j1");
    req.mutable_replay_from()->set_seconds(kStartMs / 1000);
    req.set_include_per_gpu(true);
    auto reader = stub->StreamJobOfu(&ctx, req);
    v1::StreamJobOfuResponse msg;
    ASSERT_TRUE(reader->Read(&msg));
    EXPECT_EQ(msg.window().start_time().seconds(), kStartMs / 1000);
    EXPECT_EQ(msg.gpu_windows_size(), kGpus);
    // The second part is stored while the stream is open: its windows arrive live.
    Insert(rows, half, three_quarters);
    const int64_t second_part_s = rows[half].t_ms / 1000;
    bool live = false;
    while (!live && reader->Read(&msg)) {
      live = msg.window().start_time().seconds() >= second_part_s;
    }
    EXPECT_TRUE(live);
    if (live) {
      EXPECT_EQ(msg.gpu_windows_size(), kGpus);
    }
    ctx.TryCancel();
    (void)reader->Finish();
  }

  // Kill it while the second part is being consumed, then restart.
  ASSERT_TRUE((*ofu)->process().Signal(SIGKILL).ok());
  (void)(*ofu)->process().Wait(absl::Seconds(30));
  Insert(rows, three_quarters, rows.size());
  ofu = StartOfu();
  ASSERT_TRUE(ofu.ok()) << ofu.status();
  ASSERT_TRUE(PollUntil(
      [&] {
        return Value("SELECT count(*) FROM ofu_windows WHERE gpu = '' AND finalized") == kWindows;
      },
      absl::Seconds(60)))
      << Value("SELECT count(*) FROM ofu_windows WHERE gpu = '' AND finalized");

  // Expected windows, computed directly from the samples.
  std::map<int64_t, std::pair<double, int64_t>> expected;  // start -> (sum OFU, n)
  for (const Row& r : rows) {
    auto& e = expected[(r.t_ms / 60'000) * 60'000];
    e.first += static_cast<double>(r.tensor_active) * r.sm_clock_mhz / 1830.0;
    ++e.second;
  }
  stub = v1::OfuService::NewStub((*ofu)->Channel());
  grpc::ClientContext ctx;
  v1::GetJobOfuRequest req;
  *req.mutable_job() = Key("j1");
  v1::GetJobOfuResponse resp;
  ASSERT_TRUE(stub->GetJobOfu(&ctx, req, &resp).ok());
  ASSERT_EQ(resp.windows_size(), kWindows);
  for (const v1::OfuWindow& w : resp.windows()) {
    const auto& e = expected[w.start_time().seconds() * 1000];
    EXPECT_EQ(w.sample_count(), e.second);
    EXPECT_NEAR(w.ofu(), e.first / e.second, 1e-6);
    EXPECT_EQ(w.gpus_allocated(), kGpus);
    EXPECT_EQ(w.gpus_reporting(), kGpus);
    EXPECT_TRUE(w.finalized());
    EXPECT_EQ(w.late_sample_count(), 0);
  }
  EXPECT_EQ(Value("SELECT samples_consumed FROM ofu_consumer_state"),
            static_cast<int64_t>(rows.size()));

  // The summary over gRPC.
  grpc::ClientContext sctx;
  v1::GetJobSummaryRequest sreq;
  *sreq.mutable_job() = Key("j1");
  v1::GetJobSummaryResponse sresp;
  ASSERT_TRUE(stub->GetJobSummary(&sctx, sreq, &sresp).ok());
  EXPECT_EQ(sresp.summary().sample_count(), static_cast<int64_t>(rows.size()));
}

TEST_F(OfuProcess, ListsGpuSpecsAndEstimatesGemmOverheadFromNvjetNames) {
  auto ofu = StartOfu();
  ASSERT_TRUE(ofu.ok()) << ofu.status();
  auto stub = v1::OfuService::NewStub((*ofu)->Channel());
  {
    grpc::ClientContext ctx;
    v1::ListGpuSpecsRequest req;
    req.set_model("NVIDIA H100 80GB HBM3");
    v1::ListGpuSpecsResponse resp;
    ASSERT_TRUE(stub->ListGpuSpecs(&ctx, req, &resp).ok());
    ASSERT_EQ(resp.specs_size(), 1);
    EXPECT_EQ(resp.specs(0).tensor_max_clock_mhz(), 1830);
    bool bf16 = false;
    for (const auto& p : resp.specs(0).peaks()) {
      if (p.precision() == v1::PRECISION_BF16) {
        bf16 = true;
        EXPECT_NEAR(p.peak_tflops(), 989.4, 0.05);
      }
    }
    EXPECT_TRUE(bf16);
  }
  {
    grpc::ClientContext ctx;
    v1::ListGpuSpecsRequest req;
    req.set_model("Imaginary GPU 9000");
    v1::ListGpuSpecsResponse resp;
    EXPECT_EQ(stub->ListGpuSpecs(&ctx, req, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  }
  {
    grpc::ClientContext ctx;
    v1::EstimateGemmOverheadRequest req;
    req.set_nvjet_kernel_name("nvjet_sm90_hsh_256x160_64x4_2x1");
    v1::GemmCall* call = req.add_calls();
    call->set_m(8192);
    call->set_n(1000);
    call->set_k(4096);
    req.set_ofu(0.5);
    v1::EstimateGemmOverheadResponse resp;
    ASSERT_TRUE(stub->EstimateGemmOverhead(&ctx, req, &resp).ok());
    ASSERT_EQ(resp.calls_size(), 1);
    EXPECT_EQ(resp.calls(0).tile().tile_m(), 256);
    EXPECT_EQ(resp.calls(0).tile().tile_n(), 160);
    EXPECT_EQ(resp.calls(0).n_eff(), 1120);  // ceil(ceil(1000/160)/1)*160
    EXPECT_NEAR(resp.calls(0).overhead_pct(), 12.0, 1e-9);
    EXPECT_NEAR(resp.adjusted_ofu(), 0.5 * 1000 / 1120.0, 1e-12);
  }
  {
    grpc::ClientContext ctx;
    v1::EstimateGemmOverheadRequest req;
    req.set_nvjet_kernel_name("cutlass_whatever");
    v1::GemmCall* call = req.add_calls();
    call->set_m(1);
    call->set_n(1);
    call->set_k(1);
    v1::EstimateGemmOverheadResponse resp;
    EXPECT_EQ(stub->EstimateGemmOverhead(&ctx, req, &resp).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
  }
}

}  // namespace
}  // namespace goodput::ofu
