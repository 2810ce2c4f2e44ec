// Framework throughput metrics arriving through ingest's remote_write become MFU reports in
// goodput-mfu, with real processes and a real PostgreSQL: a Megatron-LM series lands as
// reports of the labelled job; while goodput-mfu is down ingest answers 503 so that Prometheus
// retries, and the retried request stores every report exactly once.
#include <chrono>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "goodput/v1/mfu.grpc.pb.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "prometheus/remote.pb.h"
#include "snappy.h"
#include "tests/support/free_port.h"
#include "tests/support/postgres_server.h"
#include "tests/support/service_process.h"
#include "tests/support/test_steps.h"

namespace goodput::testing {
namespace {

namespace v1 = ::goodput::v1;

constexpr int64_t kT0Ms = 1'780'000'020'000;

// A remote_write body with `n` samples of Megatron's throughput for job `job_id` from
// `first_ms`, 30 s apart.
std::string Body(const std::string& job_id, int64_t first_ms, int n, double tflops) {
  prometheus::WriteRequest req;
  prometheus::TimeSeries* s = req.add_timeseries();
  for (const auto& [k, v] : std::vector<std::pair<std::string, std::string>>{
           {"__name__", "megatron_training_throughput_tflops"},
           {"job_id", job_id},
           {"instance", "node-7:9100"}}) {
    prometheus::Label* l = s->add_labels();
    l->set_name(k);
    l->set_value(v);
  }
  for (int i = 0; i < n; ++i) {
    prometheus::Sample* x = s->add_samples();
    x->set_timestamp(first_ms + 30'000 * i);
    x->set_value(tflops);
  }
  std::string raw = req.SerializeAsString();
  std::string compressed;
  snappy::Compress(raw.data(), raw.size(), &compressed);
  return compressed;
}

class MfuRemoteWrite : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(StartPostgres(&pg_));
    absl::StatusOr<int> port = FreePort();
    ASSERT_TRUE(port.ok());
    mfu_port_ = *port;
    StartMfu();
    ASSERT_NO_FATAL_FAILURE(StartService(
        {.binary = BuiltBinary("services/ingest/goodput-ingest"),
         .config_yaml = absl::StrCat(PostgresConfigYaml(*pg_), "redis:\n  host: \"\"\n",
                                     "ingest:\n  maintenance_interval_s: 3600\n",
                                     "  remote_write:\n    cluster: eos\n",
                                     "  mfu_metrics:\n    mfu_address: \"127.0.0.1:", mfu_port_,
                                     "\"\n", "    timeout_s: 5\n")},
        &ingest_));
    ASSERT_TRUE(pg_->Execute("goodput", absl::StrCat("INSERT INTO jobs (cluster, job_id, "
                                                     "gpu_model, gpu_count) VALUES ('eos', "
                                                     "'mega-1', '",
                                                     kH100, "', 8)"))
                    .ok());
  }

  void StartMfu() {
    ASSERT_NO_FATAL_FAILURE(StartService(
        {.binary = BuiltBinary("services/mfu/goodput-mfu"),
         .config_yaml = absl::StrCat(PostgresConfigYaml(*pg_), "grpc:\n  port: ", mfu_port_, "\n"),
         .extra_args = MigrateArgs()},
        &mfu_));
  }

  httplib::Result PostWrite(const std::string& body) {
    httplib::Client client("127.0.0.1", ingest_->http_port());
    client.set_read_timeout(30, 0);
    httplib::Headers headers = {{"Content-Encoding", "snappy"},
                                {"X-Prometheus-Remote-Write-Version", "0.1.0"}};
    return client.Post("/api/v1/write", headers, body, "application/x-protobuf");
  }

  std::string Count(const std::string& where) {
    return QueryScalar(*pg_, absl::StrCat("SELECT count(*) FROM mfu_reports ", where));
  }

  std::unique_ptr<PostgresServer> pg_;
  std::unique_ptr<ServiceProcess> mfu_;
  std::unique_ptr<ServiceProcess> ingest_;
  int mfu_port_ = 0;
};

TEST_F(MfuRemoteWrite, MegatronThroughputSeriesBecomeReportsOnceEvenWhenMfuWasDown) {
  const std::string first = Body("mega-1", kT0Ms, 10, 400.0);
  httplib::Result r = PostWrite(first);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_NE(r->body.find("10 MFU reports"), std::string::npos) << r->body;
  EXPECT_EQ(Count("WHERE job_id = 'mega-1'"), "10");

  auto stub = v1::MfuService::NewStub(mfu_->Channel());
  v1::ListMfuReportsRequest list;
  list.mutable_job()->set_cluster("eos");
  list.mutable_job()->set_job_id("mega-1");
  v1::ListMfuReportsResponse page;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub->ListMfuReports(&ctx, list, &page).ok());
  }
  ASSERT_EQ(page.reports_size(), 10);
  EXPECT_EQ(page.reports(0).report().source(), v1::MFU_REPORT_SOURCE_METRIC);
  EXPECT_EQ(page.reports(0).report().framework(), "megatron-lm");
  EXPECT_EQ(page.reports(0).report().interval().end_time().seconds(), kT0Ms / 1000);
  EXPECT_NEAR(page.reports(0).app_mfu(), 400.0 / kH100Bf16PeakTflops, 1e-9);

  // goodput-mfu down: nothing can be acknowledged, Prometheus is told to retry.
  mfu_.reset();
  const std::string second = Body("mega-1", kT0Ms + 300'000, 5, 410.0);
  r = PostWrite(second);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503) << r->body;
  EXPECT_EQ(Count("WHERE job_id = 'mega-1'"), "10");

  // Back: the retry lands, and retrying the first request again stores nothing twice.
  StartMfu();
  bool landed = false;
  for (int attempt = 0; attempt < 100 && !landed; ++attempt) {
    r = PostWrite(second);  // the channel reconnects with a backoff, as Prometheus retries
    landed = r && r->status == 200;
    if (!landed) absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_TRUE(landed) << (r ? r->body : "no answer");
  r = PostWrite(first);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(Count("WHERE job_id = 'mega-1'"), "15");

  // A series naming no job is refused with the labels looked for.
  r = PostWrite(Body("", kT0Ms, 1, 400.0));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(r->body.find("job_id, hpc_job, slurm_job_id"), std::string::npos) << r->body;
}

}  // namespace
}  // namespace goodput::testing
