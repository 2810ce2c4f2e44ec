// The Prometheus remote_write receiver of goodput-ingest against a real PostgreSQL: a real
// Prometheus (Debian's package) scrapes an HTTP endpoint serving dcgm-exporter text for an
// 8-GPU H100 node and remote_writes to ingest, and the samples land attributed to the
// registered Slurm job; corrupt snappy bodies, invalid samples and oversized bodies are
// refused with their reasons while the valid samples are kept and the service stays healthy.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "goodput/v1/job.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "httplib.h"
#include "prometheus/remote.pb.h"
#include "snappy.h"
#include "tests/support/child_process.h"
#include "tests/support/free_port.h"
#include "tests/support/postgres_server.h"
#include "tests/support/temp_dir.h"

namespace goodput {
namespace {

namespace fs = std::filesystem;
using ::goodput::testing::ChildProcess;
using ::goodput::testing::PollUntil;
using ::goodput::testing::PostgresServer;
using ::goodput::testing::TempDir;
using ::testing::HasSubstr;

constexpr char kHost[] = "gpu-node-042";
constexpr char kJobId[] = "4211873";
constexpr int kGpus = 8;

// Tensor activity of GPU `g` in the served text, distinct per GPU so rows can be checked.
double TensorActive(int g) { return 0.40 + 0.01 * g; }

// What dcgm-exporter 3.x serves for an 8-GPU H100 node with the Slurm job mapping on.
std::string DcgmExporterText() {
  struct Metric {
    const char* name;
    const char* type;
    const char* help;
  };
  const Metric metrics[] = {
      {"DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."},
      {"DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz)."},
      {"DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."},
      {"DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."},
      {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter",
       "Total energy consumption since boot (in mJ)."},
      {"DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."},
      {"DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."},
      {"DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."},
      {"DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active."},
      {"DCGM_FI_PROF_SM_ACTIVE", "gauge", "The ratio of cycles an SM has at least 1 warp."},
      {"DCGM_FI_PROF_SM_OCCUPANCY", "gauge", "The ratio of number of warps resident on an SM."},
      {"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge",
       "Ratio of cycles the tensor (HMMA) pipe is active."},
      {"DCGM_FI_PROF_DRAM_ACTIVE", "gauge",
       "Ratio of cycles the device memory interface is active."},
  };
  std::string out;
  for (const Metric& m : metrics) {
    absl::StrAppend(&out, "# HELP ", m.name, " ", m.help, "\n# TYPE ", m.name, " ", m.type, "\n");
    for (int g = 0; g < kGpus; ++g) {
      const std::string name = m.name;
      std::string value;
      if (name == "DCGM_FI_DEV_SM_CLOCK") value = "1755";
      if (name == "DCGM_FI_DEV_MEM_CLOCK") value = "2619";
      if (name == "DCGM_FI_DEV_GPU_TEMP") value = absl::StrCat(48 + g);
      if (name == "DCGM_FI_DEV_POWER_USAGE") value = "612.347";
      if (name == "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION") value = "83745239814";
      if (name == "DCGM_FI_DEV_GPU_UTIL") value = "100";
      if (name == "DCGM_FI_DEV_FB_FREE") value = "2349";
      if (name == "DCGM_FI_DEV_FB_USED") value = "78729";
      if (name == "DCGM_FI_PROF_GR_ENGINE_ACTIVE") value = "0.982143";
      if (name == "DCGM_FI_PROF_SM_ACTIVE") value = "0.913512";
      if (name == "DCGM_FI_PROF_SM_OCCUPANCY") value = "0.251870";
      if (name == "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE")
        value = absl::StrFormat("%.6f", TensorActive(g));
      if (name == "DCGM_FI_PROF_DRAM_ACTIVE") value = "0.358421";
      absl::StrAppendFormat(
          &out,
          "%s{gpu=\"%d\",UUID=\"GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e5%d\","
          "pci_bus_id=\"00000000:%02X:00.0\",device=\"nvidia%d\",modelName=\"NVIDIA H100 80GB "
          "HBM3\",Hostname=\"%s\",DCGM_FI_DRIVER_VERSION=\"535.129.03\",hpc_job=\"%s\"} %s\n",
          m.name, g, g, 0x18 + 0x11 * g, g, kHost, kJobId, value);
    }
  }
  return out;
}

class RemoteWriteIntegration : public ::testing::Test {
 protected:
  void SetUp() override {
    auto pg = PostgresServer::Create();
    ASSERT_TRUE(pg.ok()) << pg.status();
    pg_ = *std::move(pg);
    ASSERT_TRUE(pg_->CreateDatabase("goodput").ok());
    auto dir = TempDir::Create("goodput-remote-write-test");
    ASSERT_TRUE(dir.ok());
    dir_ = std::make_unique<TempDir>(*std::move(dir));
    StartExporter();

    const fs::path config = dir_->path() / "ingest.yaml";
    std::ofstream(config) << "postgres:\n  dsn: \"" << pg_->Dsn("goodput") << "\"\n"
                          << "redis:\n  host: \"\"\n"
                          << "grpc:\n  host: 127.0.0.1\n  port: 0\n"
                          << "http:\n  host: 127.0.0.1\n  port: 0\n"
                          << "log:\n  format: text\n"
                          << "ingest:\n  maintenance_interval_s: 3600\n"
                          << "  remote_write:\n    cluster: eos\n    max_body_bytes: 1048576\n";
    if (ingest_scrapes_too_) {
      std::ofstream(config, std::ios::app)
          << "  scrape:\n    targets:\n      - url: http://127.0.0.1:" << exporter_port_
          << "/metrics\n        cluster: eos\n        interval_s: 1\n";
    }
    const fs::path ready = dir_->path() / "ready";
    auto proc = ChildProcess::Start(
        {.argv = {std::string(GOODPUT_BINARY_DIR) + "/services/ingest/goodput-ingest", "--config",
                  config.string(), "--migrate", "--migrations-dir",
                  std::string(GOODPUT_SOURCE_DIR) + "/migrations", "--ready-file", ready.string()},
         .log_path = dir_->path() / "ingest.log"});
    ASSERT_TRUE(proc.ok()) << proc.status();
    ingest_ = *std::move(proc);
    int grpc_port = 0;
    ASSERT_TRUE(PollUntil(
        [&] {
          std::ifstream in(ready);
          std::string line;
          while (std::getline(in, line)) {
            if (line.rfind("grpc_port=", 0) == 0) grpc_port = std::stoi(line.substr(10));
            if (line.rfind("http_port=", 0) == 0) http_port_ = std::stoi(line.substr(10));
          }
          return (grpc_port > 0 && http_port_ > 0) || !ingest_->IsRunning();
        },
        absl::Seconds(60)));
    ASSERT_GT(http_port_, 0) << ingest_->LogTail();
    channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", grpc_port),
                                   grpc::InsecureChannelCredentials());
    jobs_ = v1::JobService::NewStub(channel_);
  }

  void TearDown() override {
    if (prometheus_ != nullptr) (void)prometheus_->Terminate(absl::Seconds(10));
    if (exporter_ != nullptr) {
      exporter_->stop();
      exporter_thread_.join();
    }
  }

  void RegisterJob() {
    v1::RegisterJobRequest request;
    v1::Job* job = request.mutable_job();
    job->mutable_key()->set_cluster("eos");
    job->mutable_key()->set_job_id(kJobId);
    job->set_scheduler(v1::SCHEDULER_KIND_SLURM);
    job->set_user("alice");
    job->set_gpu_model("NVIDIA H100 80GB HBM3");
    const int64_t start_ms = absl::ToUnixMillis(absl::Now()) - 3'600'000;
    job->mutable_start_time()->set_seconds(start_ms / 1000);
    for (int g = 0; g < kGpus; ++g) {
      auto* a = job->add_allocations();
      a->mutable_gpu()->set_host(kHost);
      a->mutable_gpu()->set_gpu_index(g);
    }
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::RegisterJobResponse response;
    grpc::Status status = jobs_->RegisterJob(&ctx, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }

  // Serves DcgmExporterText() on /metrics on a free loopback port.
  void StartExporter() {
    exporter_ = std::make_unique<httplib::Server>();
    exporter_->Get("/metrics", [this](const httplib::Request& req, httplib::Response& res) {
      if (req.get_header_value("User-Agent") == "goodput-ingest") ++served_to_ingest_;
      res.set_content(DcgmExporterText(), "text/plain; version=0.0.4");
    });
    exporter_port_ = exporter_->bind_to_any_port("127.0.0.1");
    ASSERT_GT(exporter_port_, 0);
    exporter_thread_ = std::thread([this] { exporter_->listen_after_bind(); });
  }

  void StartPrometheus() {
    absl::StatusOr<int> port = testing::FreePort();
    ASSERT_TRUE(port.ok());
    const fs::path config = dir_->path() / "prometheus.yml";
    std::ofstream(config) << "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                          << "scrape_configs:\n  - job_name: dcgm\n    static_configs:\n"
                          << "      - targets: ['127.0.0.1:" << exporter_port_ << "']\n"
                          << "remote_write:\n  - url: http://127.0.0.1:" << http_port_
                          << "/api/v1/write\n    queue_config:\n      batch_send_deadline: 1s\n"
                          << "      min_backoff: 100ms\n      max_backoff: 1s\n";
    fs::create_directories(dir_->path() / "prometheus-data");
    auto proc = ChildProcess::Start(
        {.argv = {"prometheus", absl::StrCat("--config.file=", config.string()),
                  absl::StrCat("--storage.tsdb.path=", (dir_->path() / "prometheus-data").string()),
                  absl::StrCat("--web.listen-address=127.0.0.1:", *port)},
         .log_path = dir_->path() / "prometheus.log"});
    ASSERT_TRUE(proc.ok()) << proc.status();
    prometheus_ = *std::move(proc);
  }

  std::string Query(const std::string& sql) {
    auto value = pg_->QueryValue("goodput", sql);
    EXPECT_TRUE(value.ok()) << value.status();
    return value.ok() ? *value : "";
  }

  httplib::Result PostWrite(const std::string& body) {
    httplib::Client client("127.0.0.1", http_port_);
    client.set_read_timeout(30, 0);
    httplib::Headers headers = {{"Content-Encoding", "snappy"},
                                {"X-Prometheus-Remote-Write-Version", "0.1.0"}};
    return client.Post("/api/v1/write", headers, body, "application/x-protobuf");
  }

  std::unique_ptr<PostgresServer> pg_;
  std::unique_ptr<TempDir> dir_;
  std::unique_ptr<ChildProcess> ingest_;
  std::unique_ptr<ChildProcess> prometheus_;
  std::unique_ptr<httplib::Server> exporter_;
  std::thread exporter_thread_;
  int exporter_port_ = 0;
  int http_port_ = 0;
  bool ingest_scrapes_too_ = false;
  std::atomic<int> served_to_ingest_{0};
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::JobService::Stub> jobs_;
};

TEST_F(RemoteWriteIntegration, PrometheusScrapesDcgmExporterAndItsSamplesLandAttributedToTheJob) {
  RegisterJob();
  StartPrometheus();
  const std::string rows_of_job = absl::StrCat(
      "SELECT count(*) FROM samples s JOIN jobs j ON j.id = s.job "
      "JOIN ingest_batches b ON b.batch_id = s.batch_id "
      "WHERE j.job_id = '",
      kJobId, "' AND b.source = 'remote_write'");
  ASSERT_TRUE(PollUntil([&] { return std::stoi(Query(rows_of_job)) >= 3 * kGpus; },
                        absl::Seconds(90), absl::Milliseconds(200)))
      << "ingest:\n"
      << ingest_->LogTail() << "\nprometheus:\n"
      << prometheus_->LogTail();
  // Every GPU, with the values served, each (GPU, time) once.
  EXPECT_EQ(Query("SELECT count(DISTINCT gpu_index) FROM samples WHERE job IS NOT NULL"), "8");
  EXPECT_EQ(Query("SELECT count(*) FROM samples WHERE job IS NULL"), "0");
  EXPECT_EQ(Query("SELECT count(*) FROM (SELECT 1 FROM samples GROUP BY host, gpu_index, "
                  "sample_time HAVING count(*) > 1) d"),
            "0");
  EXPECT_EQ(Query("SELECT DISTINCT round(tensor_active::numeric, 2) FROM samples "
                  "WHERE gpu_index = 3"),
            "0.43");
  EXPECT_EQ(Query("SELECT DISTINCT sm_clock_mhz FROM samples"), "1755");
  EXPECT_EQ(Query("SELECT DISTINCT gpu_model FROM samples"), "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(Query("SELECT DISTINCT labels->>'hpc_job' FROM samples"), kJobId);
  EXPECT_EQ(Query("SELECT DISTINCT gpu_uuid FROM samples WHERE gpu_index = 5"),
            "GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e55");
  // Every sample carries tensor activity and the SM clock (series of one scrape combined).
  EXPECT_EQ(Query("SELECT count(*) FROM samples WHERE tensor_active IS NULL "
                  "OR sm_clock_mhz IS NULL"),
            "0");
  EXPECT_TRUE(ingest_->IsRunning());
}

// Prometheus and ingest scrape the same dcgm-exporter endpoint at once.
class RemoteWriteAndScrapeIntegration : public RemoteWriteIntegration {
 protected:
  RemoteWriteAndScrapeIntegration() { ingest_scrapes_too_ = true; }
};

TEST_F(RemoteWriteAndScrapeIntegration, BothPathsStoreTheSameSamplesEachScrapeExactlyOnce) {
  RegisterJob();
  StartPrometheus();
  auto rows = [&](const std::string& source) {
    return std::stoi(Query(absl::StrCat(
        "SELECT count(*) FROM samples s JOIN ingest_batches b ON b.batch_id = s.batch_id "
        "JOIN jobs j ON j.id = s.job WHERE b.source = '",
        source, "' AND j.job_id = '", kJobId, "'")));
  };
  // Each response ingest fetched is committed once (8 rows); Prometheus's arrive as well.
  ASSERT_TRUE(PollUntil(
      [&] {
        const int served = served_to_ingest_.load();
        return served >= 2 && rows("scrape") == served * kGpus &&
               served_to_ingest_.load() == served && rows("remote_write") >= 2 * kGpus;
      },
      absl::Seconds(90), absl::Milliseconds(50)))
      << "ingest:\n"
      << ingest_->LogTail() << "\nprometheus:\n"
      << prometheus_->LogTail();
  // Both paths carry the same measurements, and no path stored a (GPU, time) twice.
  for (const char* source : {"scrape", "remote_write"}) {
    EXPECT_EQ(Query(absl::StrCat(
                  "SELECT count(*) FROM (SELECT 1 FROM samples s JOIN ingest_batches b "
                  "ON b.batch_id = s.batch_id WHERE b.source = '",
                  source, "' GROUP BY host, gpu_index, sample_time HAVING count(*) > 1) d")),
              "0")
        << source;
    EXPECT_EQ(Query(absl::StrCat(
                  "SELECT string_agg(DISTINCT round(tensor_active::numeric, 2)::text, ',') "
                  "FROM samples s JOIN ingest_batches b ON b.batch_id = s.batch_id "
                  "WHERE b.source = '",
                  source, "'")),
              "0.40,0.41,0.42,0.43,0.44,0.45,0.46,0.47")
        << source;
  }
}

void AddSeries(prometheus::WriteRequest* request, const std::string& metric, int gpu, double value,
               int64_t time_ms) {
  prometheus::TimeSeries* series = request->add_timeseries();
  const std::pair<std::string, std::string> labels[] = {{"Hostname", kHost},
                                                        {"__name__", metric},
                                                        {"gpu", absl::StrCat(gpu)},
                                                        {"hpc_job", kJobId},
                                                        {"modelName", "NVIDIA H100 80GB HBM3"}};
  for (const auto& [name, v] : labels) {
    auto* label = series->add_labels();
    label->set_name(name);
    label->set_value(v);
  }
  auto* sample = series->add_samples();
  sample->set_value(value);
  sample->set_timestamp(time_ms);
}

std::string Snappy(const prometheus::WriteRequest& request) {
  const std::string raw = request.SerializeAsString();
  std::string out;
  snappy::Compress(raw.data(), raw.size(), &out);
  return out;
}

TEST_F(RemoteWriteIntegration, RefusesBadInputWithReasonsKeepsTheRestAndStaysHealthy) {
  RegisterJob();
  const int64_t now = absl::ToUnixMillis(absl::Now());

  // Corrupt snappy: 400 with the reason, nothing stored.
  prometheus::WriteRequest good;
  AddSeries(&good, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", 0, 0.42, now - 2000);
  std::string corrupt = Snappy(good);
  corrupt.resize(corrupt.size() - 3);
  httplib::Result r = PostWrite(corrupt);
  ASSERT_TRUE(r) << ingest_->LogTail();
  EXPECT_EQ(r->status, 400);
  EXPECT_THAT(r->body, HasSubstr("snappy"));

  // Oversized: 413 naming the limit.
  r = PostWrite(std::string(2 << 20, 'x'));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  EXPECT_THAT(r->body, HasSubstr("limit is 1048576 bytes"));

  // Invalid samples next to valid ones: 400 listing each refusal; the valid ones stored.
  prometheus::WriteRequest mixed;
  AddSeries(&mixed, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", 0, 0.42, now - 1000);
  AddSeries(&mixed, "DCGM_FI_DEV_SM_CLOCK", 0, 1755, now - 1000);
  AddSeries(&mixed, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", 1, 1.7, now - 1000);
  AddSeries(&mixed, "DCGM_FI_DEV_SM_CLOCK", 2, -30, now - 1000);
  AddSeries(&mixed, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", 3, std::nan(""), now - 1000);
  AddSeries(&mixed, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", 4, 0.3, now + 3'600'000);
  AddSeries(&mixed, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", 5, 0.4, now - 1000);
  r = PostWrite(Snappy(mixed));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_THAT(r->body, HasSubstr("stored 2 GPU samples"));
  EXPECT_THAT(r->body, HasSubstr("series 2 sample 0 of batch remote_write-"));
  EXPECT_THAT(r->body, HasSubstr("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE=1.7"));
  EXPECT_THAT(r->body, HasSubstr("DCGM_FI_DEV_SM_CLOCK=-30"));
  EXPECT_THAT(r->body, HasSubstr("series 4 sample 0"));
  EXPECT_THAT(r->body, HasSubstr("future"));
  EXPECT_EQ(Query("SELECT count(*) FROM samples"), "2");
  EXPECT_EQ(Query("SELECT string_agg(gpu_index::text, ',' ORDER BY gpu_index) FROM samples"),
            "0,5");

  // The same request again (a sender's retry) is not stored twice.
  r = PostWrite(Snappy(mixed));
  ASSERT_TRUE(r);
  EXPECT_EQ(Query("SELECT count(*) FROM samples"), "2");

  // A valid request afterwards is stored, and the service is healthy.
  prometheus::WriteRequest later;
  AddSeries(&later, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", 6, 0.5, now - 500);
  r = PostWrite(Snappy(later));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(Query("SELECT count(*) FROM samples WHERE job IS NOT NULL"), "3");
  httplib::Client client("127.0.0.1", http_port_);
  httplib::Result health = client.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

TEST_F(RemoteWriteIntegration, AnswersRetryableWhenPostgresIsDownAndStoresTheRetryAfterwards) {
  const int64_t now = absl::ToUnixMillis(absl::Now());
  prometheus::WriteRequest request;
  AddSeries(&request, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", 0, 0.42, now - 1000);
  ASSERT_TRUE(pg_->Stop().ok());
  httplib::Result r = PostWrite(Snappy(request));
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->status == 503 || r->status == 429) << r->status << " " << r->body;
  EXPECT_THAT(r->body, HasSubstr("retryable"));
  ASSERT_TRUE(pg_->Start().ok());
  ASSERT_TRUE(PollUntil(
      [&] {
        httplib::Result retry = PostWrite(Snappy(request));
        return retry && retry->status == 200;
      },
      absl::Seconds(60), absl::Milliseconds(250)));
  EXPECT_EQ(Query("SELECT count(*) FROM samples"), "1");
}

}  // namespace
}  // namespace goodput
