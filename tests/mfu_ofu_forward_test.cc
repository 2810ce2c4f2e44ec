// ofu's forwarder pushing OFU windows into a real goodput-mfu process, both on one real
// PostgreSQL: every job-level window ofu commits is stored by mfu exactly once (same values,
// newest revision) across an mfu restart, across ofu losing its record of acknowledgements
// (catch-up re-sends; mfu counts nothing twice), and across mfu losing its windows (it reports
// a gap and is re-sent everything).
#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "goodput/v1/mfu.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "services/ofu/ofu_consumer.h"
#include "services/ofu/ofu_forwarder.h"
#include "services/ofu/ofu_store.h"
#include "services/platform/migrations.h"
#include "services/platform/pg_pool.h"
#include "tests/support/child_process.h"
#include "tests/support/free_port.h"
#include "tests/support/postgres_server.h"
#include "tests/support/service_process.h"

namespace goodput::testing {
namespace {

namespace v1 = ::goodput::v1;

constexpr int64_t kStartMs = 1'767'225'600'000;

class MfuFromOfu : public ::testing::Test {
 protected:
  void SetUp() override {
    auto pg = PostgresServer::Create();
    ASSERT_TRUE(pg.ok()) << pg.status();
    pg_ = *std::move(pg);
    ASSERT_TRUE(pg_->CreateDatabase("goodput").ok());
    auto report = platform::ApplyMigrations(pg_->Dsn("goodput"), SourceDir() / "migrations");
    ASSERT_TRUE(report.ok()) << report.status();
    auto pool = platform::PgPool::Create({.dsn = pg_->Dsn("goodput")});
    ASSERT_TRUE(pool.ok());
    pool_ = *std::move(pool);
    Sql(absl::StrCat("SELECT samples_create_partitions(timestamptz 'epoch' + ", kStartMs,
                     " * interval '1 millisecond', timestamptz 'epoch' + ", kStartMs + 86'400'000,
                     " * interval '1 millisecond')"));
    Sql("INSERT INTO jobs (cluster, job_id, gpu_model) VALUES ('c1', 'j1', 'NVIDIA H100 80GB "
        "HBM3')");
    store_ = std::make_unique<ofu::OfuStore>(pool_.get(), ofu::ShardConfig{});
    consumer_ = std::make_unique<ofu::OfuConsumer>(
        store_.get(), &core::GpuCatalog::BuiltIn(), ofu::EngineOptions{}, ofu::ConsumerOptions{},
        nullptr, platform::Logger(), [this] { return now_.load(); });
    ASSERT_TRUE(consumer_->Restore().ok());
    absl::StatusOr<int> port = FreePort();
    ASSERT_TRUE(port.ok());
    mfu_port_ = *port;
    StartMfu();
    forwarder_ = std::make_unique<platform::OrderedForwarder>(
        ofu::ForwardLog(store_.get()),
        std::vector<platform::OrderedTarget>{
            ofu::MfuTarget(store_.get(),
                           grpc::CreateChannel(absl::StrCat("127.0.0.1:", mfu_port_),
                                               grpc::InsecureChannelCredentials()),
                           "", absl::Seconds(5))},
        platform::OrderedForwarderOptions{}, platform::Logger());
  }

  void StartMfu() {
    mfu_.reset();
    absl::StatusOr<std::unique_ptr<ServiceProcess>> mfu =
        ServiceProcess::Start({.binary = BuiltBinary("services/mfu/goodput-mfu"),
                               .config_yaml = absl::StrCat(
                                   "postgres:\n  dsn: \"", pg_->Dsn("goodput"),
                                   "\"\nlog:\n  format: text\ngrpc:\n  port: ", mfu_port_, "\n")});
    ASSERT_TRUE(mfu.ok()) << mfu.status();
    mfu_ = *std::move(mfu);
  }

  void Sql(const std::string& sql) { ASSERT_TRUE(pg_->Execute("goodput", sql).ok()) << sql; }
  std::string Value(const std::string& sql) {
    absl::StatusOr<std::string> v = pg_->QueryValue("goodput", sql);
    EXPECT_TRUE(v.ok()) << v.status();
    return v.ok() ? *v : "error";
  }

  // Samples of 4 GPUs every 10 s for minutes [from, to), then the consumer catches up.
  void Feed(int from_min, int to_min) {
    std::vector<std::string> values;
    for (int t = from_min * 60; t < to_min * 60; t += 10) {
      for (int g = 0; g < 4; ++g) {
        values.push_back(absl::StrCat("(timestamptz 'epoch' + ", kStartMs + t * 1000,
                                      " * interval '1 millisecond', 'c1', 'n1', ", g,
                                      ", (SELECT id FROM jobs), ", 0.3 + 0.01 * (t % 7),
                                      ", 1500)"));
      }
    }
    Sql(
        absl::StrCat("INSERT INTO samples (sample_time, cluster, host, gpu_index, job, "
                     "tensor_active, sm_clock_mhz) VALUES ",
                     absl::StrJoin(values, ",")));
    for (int i = 0; i < 100; ++i) {
      auto done = consumer_->StepOnce();
      ASSERT_TRUE(done.ok()) << done.status();
      if (*done) break;
    }
  }

  // Pushes until the forwarder has nothing left (the channel reconnects with a backoff after
  // mfu restarts, so it retries as its loop would).
  void Forward() {
    ASSERT_TRUE(PollUntil([&] { return forwarder_->StepOnce(0).ok(); }, absl::Seconds(30),
                          absl::Milliseconds(100)));
  }

  // What ofu committed and what mfu holds, start -> "revision/ofu", job-level windows only.
  std::string OfuSide() {
    return Value(
        "SELECT string_agg(extract(epoch FROM start_time)::bigint || '=' || revision || '/' || "
        "round(ofu::numeric, 12), ',' ORDER BY start_time) FROM ofu_windows WHERE gpu = ''");
  }
  std::string MfuSide() {
    return Value(
        "SELECT string_agg(extract(epoch FROM start_time)::bigint || '=' || revision || '/' || "
        "round(ofu::numeric, 12), ',' ORDER BY start_time) FROM mfu_ofu_windows");
  }

  std::unique_ptr<PostgresServer> pg_;
  std::unique_ptr<platform::PgPool> pool_;
  std::unique_ptr<ofu::OfuStore> store_;
  std::unique_ptr<ofu::OfuConsumer> consumer_;
  std::unique_ptr<platform::OrderedForwarder> forwarder_;
  std::unique_ptr<ServiceProcess> mfu_;
  int mfu_port_ = 0;
  std::atomic<int64_t> now_{absl::ToUnixMillis(absl::Now())};
};

TEST_F(MfuFromOfu, EveryCommittedWindowIsStoredOnceThroughRestartsAndCatchUp) {
  Feed(0, 10);
  Forward();
  EXPECT_EQ(MfuSide(), OfuSide());
  EXPECT_NE(OfuSide(), "");

  // mfu restarts; ofu loses its record of what mfu acknowledged and re-sends everything from
  // the start along with new windows: mfu answers the old pushes as duplicates.
  StartMfu();
  ASSERT_TRUE(store_->SetAckedSequence("mfu", 0).ok());
  Feed(10, 20);
  Forward();
  EXPECT_EQ(MfuSide(), OfuSide());
  EXPECT_EQ(Value("SELECT sequence FROM mfu_delivery_watermarks"),
            Value("SELECT max(commit_seq) FROM ofu_windows WHERE gpu = ''"));

  // mfu loses its windows and watermark (restored from an old backup): the next push is a gap,
  // and ofu re-sends everything above the watermark mfu reports.
  Sql("DELETE FROM mfu_ofu_windows; DELETE FROM mfu_delivery_watermarks");
  Feed(20, 25);
  Forward();
  EXPECT_EQ(MfuSide(), OfuSide());

  // And the windows reach the reconciliation of the job.
  auto stub = v1::MfuService::NewStub(mfu_->Channel());
  v1::GetReconciliationRequest req;
  req.mutable_job()->set_cluster("c1");
  req.mutable_job()->set_job_id("j1");
  v1::GetReconciliationResponse rec;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub->GetReconciliation(&ctx, req, &rec).ok());
  EXPECT_EQ(std::to_string(rec.points_size()),
            Value("SELECT count(*) FROM ofu_windows WHERE gpu = ''"));
}

}  // namespace
}  // namespace goodput::testing
