// goodput-ingest scraping dcgm-exporter endpoints itself, against a real PostgreSQL: a test
// HTTP endpoint serves dcgm-exporter text for an 8-GPU H100 node; every response ingest
// fetched lands exactly once, attributed to the registered Slurm job; ListScrapeTargets
// reports each target's last scrape, an unreachable target is DOWN with its error, and an
// interval above 30 s is flagged and warned about.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "goodput/v1/ingest.grpc.pb.h"
#include "goodput/v1/job.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "httplib.h"
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

class ScrapeIntegration : public ::testing::Test {
 protected:
  void SetUp() override {
    auto pg = PostgresServer::Create();
    ASSERT_TRUE(pg.ok()) << pg.status();
    pg_ = *std::move(pg);
    ASSERT_TRUE(pg_->CreateDatabase("goodput").ok());
    auto dir = TempDir::Create("goodput-scrape-test");
    ASSERT_TRUE(dir.ok());
    dir_ = std::make_unique<TempDir>(*std::move(dir));

    exporter_ = std::make_unique<httplib::Server>();
    exporter_->Get("/metrics", [this](const httplib::Request& req, httplib::Response& res) {
      if (req.get_header_value("User-Agent") == "goodput-ingest") ++served_to_ingest_;
      res.set_content(DcgmExporterText(), "text/plain; version=0.0.4");
    });
    exporter_port_ = exporter_->bind_to_any_port("127.0.0.1");
    ASSERT_GT(exporter_port_, 0);
    exporter_thread_ = std::thread([this] { exporter_->listen_after_bind(); });
    absl::StatusOr<int> closed = testing::FreePort();
    ASSERT_TRUE(closed.ok());
    closed_port_ = *closed;

    const fs::path config = dir_->path() / "ingest.yaml";
    std::ofstream(config) << "postgres:\n  dsn: \"" << pg_->Dsn("goodput") << "\"\n"
                          << "redis:\n  host: \"\"\n"
                          << "grpc:\n  host: 127.0.0.1\n  port: 0\n"
                          << "http:\n  host: 127.0.0.1\n  port: 0\n"
                          << "log:\n  format: text\n"
                          << "ingest:\n  maintenance_interval_s: 3600\n"
                          << "  scrape:\n    targets:\n"
                          << "      - url: http://127.0.0.1:" << exporter_port_ << "/metrics\n"
                          << "        cluster: eos\n        interval_s: 0.5\n"
                          << "        labels: {rack: r12}\n"
                          << "      - url: http://127.0.0.1:" << closed_port_ << "/metrics\n"
                          << "        cluster: eos\n        interval_s: 60\n";
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
          }
          return grpc_port > 0 || !ingest_->IsRunning();
        },
        absl::Seconds(60)));
    ASSERT_GT(grpc_port, 0) << ingest_->LogTail();
    channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", grpc_port),
                                   grpc::InsecureChannelCredentials());
    jobs_ = v1::JobService::NewStub(channel_);
    ingest_stub_ = v1::IngestService::NewStub(channel_);
  }

  void TearDown() override {
    if (ingest_ != nullptr) (void)ingest_->Terminate(absl::Seconds(10));
    exporter_->stop();
    exporter_thread_.join();
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

  v1::ListScrapeTargetsResponse ListTargets() {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::ListScrapeTargetsResponse response;
    grpc::Status status = ingest_stub_->ListScrapeTargets(&ctx, {}, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }

  std::string Query(const std::string& sql) {
    auto value = pg_->QueryValue("goodput", sql);
    EXPECT_TRUE(value.ok()) << value.status();
    return value.ok() ? *value : "";
  }

  std::unique_ptr<PostgresServer> pg_;
  std::unique_ptr<TempDir> dir_;
  std::unique_ptr<ChildProcess> ingest_;
  std::unique_ptr<httplib::Server> exporter_;
  std::thread exporter_thread_;
  std::atomic<int> served_to_ingest_{0};
  int exporter_port_ = 0;
  int closed_port_ = 0;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::JobService::Stub> jobs_;
  std::unique_ptr<v1::IngestService::Stub> ingest_stub_;
};

TEST_F(ScrapeIntegration, EveryScrapedResponseLandsOnceAttributedToTheJob) {
  RegisterJob();
  const std::string scraped_rows =
      "SELECT count(*) FROM samples s JOIN ingest_batches b ON b.batch_id = s.batch_id "
      "WHERE b.source = 'scrape'";
  // Scrapes go on while the test reads: wait for a moment when every response served so far
  // is committed, and at least three of them.
  ASSERT_TRUE(PollUntil(
      [&] {
        const int served = served_to_ingest_.load();
        return served >= 3 && std::stoi(Query(scraped_rows)) == served * kGpus &&
               served_to_ingest_.load() == served;
      },
      absl::Seconds(60), absl::Milliseconds(50)))
      << "served " << served_to_ingest_.load() << ", rows " << Query(scraped_rows) << "\n"
      << ingest_->LogTail();
  EXPECT_EQ(Query("SELECT count(*) FROM (SELECT 1 FROM samples GROUP BY host, gpu_index, "
                  "sample_time HAVING count(*) > 1) d"),
            "0");
  EXPECT_EQ(Query(absl::StrCat("SELECT count(*) FROM samples s JOIN jobs j ON j.id = s.job "
                               "WHERE j.job_id <> '",
                               kJobId, "' OR s.job IS NULL")),
            "0");
  EXPECT_EQ(Query("SELECT DISTINCT round(tensor_active::numeric, 2) FROM samples "
                  "WHERE gpu_index = 3"),
            "0.43");
  EXPECT_EQ(Query("SELECT DISTINCT host FROM samples"), kHost);
  EXPECT_EQ(Query("SELECT DISTINCT labels->>'rack' FROM samples"), "r12");
  EXPECT_EQ(Query("SELECT count(*) FROM samples WHERE tensor_active IS NULL OR "
                  "sm_clock_mhz IS NULL OR power_w IS NULL"),
            "0");
}

TEST_F(ScrapeIntegration, ListScrapeTargetsReportsLastScrapeErrorsAndLongIntervals) {
  v1::ListScrapeTargetsResponse response;
  ASSERT_TRUE(PollUntil(
      [&] {
        response = ListTargets();
        return response.targets_size() == 2 &&
               response.targets(0).health() != v1::SCRAPE_HEALTH_UNSPECIFIED &&
               response.targets(1).health() != v1::SCRAPE_HEALTH_UNSPECIFIED;
      },
      absl::Seconds(60)));
  const std::string good_url = absl::StrCat("http://127.0.0.1:", exporter_port_, "/metrics");
  const std::string bad_url = absl::StrCat("http://127.0.0.1:", closed_port_, "/metrics");
  for (const v1::ScrapeTargetStatus& t : response.targets()) {
    EXPECT_EQ(t.cluster(), "eos");
    if (t.url() == good_url) {
      EXPECT_EQ(t.health(), v1::SCRAPE_HEALTH_UP) << t.last_error();
      EXPECT_EQ(t.last_stored_count(), kGpus);  // unattributed but stored
      EXPECT_EQ(t.last_refused_count(), 0);
      EXPECT_EQ(t.interval().nanos(), 500'000'000);
      EXPECT_FALSE(t.interval_above_limit());
      EXPECT_GT(t.last_scrape_time().seconds(), 0);
      EXPECT_EQ(t.labels().at("rack"), "r12");
    } else {
      EXPECT_EQ(t.url(), bad_url);
      EXPECT_EQ(t.health(), v1::SCRAPE_HEALTH_DOWN);
      EXPECT_THAT(t.last_error(), HasSubstr(bad_url));
      EXPECT_GE(t.consecutive_failures(), 1);
      EXPECT_TRUE(t.interval_above_limit());
    }
  }
  EXPECT_THAT(ingest_->LogTail(1 << 20), HasSubstr("average of averages"));
  EXPECT_TRUE(ingest_->IsRunning());
}

}  // namespace
}  // namespace goodput
