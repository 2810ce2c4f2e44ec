// The Prometheus remote_write receiver of goodput-ingest against a real PostgreSQL: a real
// Prometheus (Debian's package) scrapes an HTTP endpoint serving dcgm-exporter text for an
// 8-GPU H100 node and remote_writes to ingest, and the samples land attributed to the
// registered Slurm job; corrupt snappy bodies, invalid samples and oversized bodies are
// refused with their reasons while the valid samples are kept and the service stays healthy.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "goodput/v1/job.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "httplib.h"
#include "prometheus/remote.pb.h"
#include "snappy.h"
#include "tests/support/child_process.h"
#include "tests/support/dcgm_exporter.h"
#include "tests/support/free_port.h"
#include "tests/support/postgres_server.h"
#include "tests/support/service_process.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_steps.h"

namespace goodput {
namespace {

namespace fs = std::filesystem;
using ::goodput::testing::ChildProcess;
using ::goodput::testing::DcgmExporterServer;
using ::goodput::testing::PollUntil;
using ::goodput::testing::PostgresServer;
using ::goodput::testing::ServiceProcess;
using ::goodput::testing::TempDir;
using ::testing::HasSubstr;

constexpr char kHost[] = "gpu-node-042";
constexpr char kJobId[] = "4211873";
constexpr int kGpus = testing::kDcgmExporterGpus;

class RemoteWriteIntegration : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(testing::StartPostgres(&pg_));
    auto dir = TempDir::Create("goodput-remote-write-test");
    ASSERT_TRUE(dir.ok());
    dir_ = std::make_unique<TempDir>(*std::move(dir));
    auto exporter = DcgmExporterServer::Start(kHost, kJobId);
    ASSERT_TRUE(exporter.ok()) << exporter.status();
    exporter_ = *std::move(exporter);

    std::string config =
        absl::StrCat(testing::PostgresConfigYaml(*pg_), "redis:\n  host: \"\"\n",
                     "ingest:\n  maintenance_interval_s: 3600\n",
                     "  remote_write:\n    cluster: eos\n    max_body_bytes: 1048576\n",
                     extra_ingest_config_);
    if (ingest_scrapes_too_) {
      absl::StrAppend(&config,
                      "  scrape:\n    targets:\n      - url: http://127.0.0.1:", exporter_->port(),
                      "/metrics\n        cluster: eos\n        interval_s: 1\n");
    }
    if (auth_on_) {
      absl::StrAppend(&config, "auth:\n  enabled: true\n  tokens:\n",
                      "    telemetry: [telemetry-token-1]\n    scheduler: [scheduler-token-1]\n");
    }
    ASSERT_NO_FATAL_FAILURE(
        testing::StartService({.binary = testing::BuiltBinary("services/ingest/goodput-ingest"),
                               .config_yaml = config,
                               .extra_args = testing::MigrateArgs()},
                              &ingest_));
    http_port_ = ingest_->http_port();
    jobs_ = v1::JobService::NewStub(ingest_->Channel());
  }

  void TearDown() override {
    if (prometheus_ != nullptr) (void)prometheus_->Terminate(absl::Seconds(10));
  }

  void RegisterJob() {
    v1::RegisterJobResponse response;
    grpc::Status status =
        testing::RegisterJob(*jobs_, testing::SlurmTestJob("eos", kJobId, kHost, kGpus), &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }

  void StartPrometheus() {
    absl::StatusOr<int> port = testing::FreePort();
    ASSERT_TRUE(port.ok());
    const fs::path config = dir_->path() / "prometheus.yml";
    std::ofstream(config) << "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                          << "scrape_configs:\n  - job_name: dcgm\n    static_configs:\n"
                          << "      - targets: ['127.0.0.1:" << exporter_->port() << "']\n"
                          << "remote_write:\n  - url: http://127.0.0.1:" << http_port_
                          << "/api/v1/write\n    queue_config:\n      batch_send_deadline: 1s\n"
                          << "      min_backoff: 100ms\n      max_backoff: 1s\n"
                          << (auth_on_ ? "    authorization:\n      type: Bearer\n"
                                         "      credentials: telemetry-token-1\n"
                                       : "");
    fs::create_directories(dir_->path() / "prometheus-data");
    auto proc = ChildProcess::Start(
        {.argv = {"prometheus", absl::StrCat("--config.file=", config.string()),
                  absl::StrCat("--storage.tsdb.path=", (dir_->path() / "prometheus-data").string()),
                  absl::StrCat("--web.listen-address=127.0.0.1:", *port)},
         .log_path = dir_->path() / "prometheus.log"});
    ASSERT_TRUE(proc.ok()) << proc.status();
    prometheus_ = *std::move(proc);
  }

  std::string Query(const std::string& sql) { return testing::QueryScalar(*pg_, sql); }

  httplib::Result PostWrite(const std::string& body, const std::string& token = "") {
    httplib::Client client("127.0.0.1", http_port_);
    client.set_read_timeout(30, 0);
    httplib::Headers headers = {{"Content-Encoding", "snappy"},
                                {"X-Prometheus-Remote-Write-Version", "0.1.0"}};
    if (!token.empty()) headers.emplace("Authorization", absl::StrCat("Bearer ", token));
    return client.Post("/api/v1/write", headers, body, "application/x-protobuf");
  }

  std::unique_ptr<PostgresServer> pg_;
  std::unique_ptr<TempDir> dir_;
  std::unique_ptr<DcgmExporterServer> exporter_;
  std::unique_ptr<ServiceProcess> ingest_;
  std::unique_ptr<ChildProcess> prometheus_;
  int http_port_ = 0;
  bool ingest_scrapes_too_ = false;
  bool auth_on_ = false;
  std::string extra_ingest_config_;  // more keys of `ingest.remote_write`
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
      << ingest_->process().LogTail() << "\nprometheus:\n"
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
  EXPECT_TRUE(ingest_->process().IsRunning());
}

// Prometheus and ingest scrape the same dcgm-exporter endpoint at once.
class RemoteWriteAndScrapeIntegration : public RemoteWriteIntegration {
 protected:
  RemoteWriteAndScrapeIntegration() { ingest_scrapes_too_ = true; }
};

TEST_F(RemoteWriteAndScrapeIntegration, BothPathsStoreTheSameSamplesEachScrapeExactlyOnce) {
  RegisterJob();
  StartPrometheus();
  // Every row of the source, attributed to the job or not: ingest's scraper starts with ingest,
  // and a scrape before the job was registered is stored unattributed.
  auto rows = [&](const std::string& source) {
    return std::stoi(Query(absl::StrCat(
        "SELECT count(*) FROM samples s JOIN ingest_batches b ON b.batch_id = s.batch_id "
        "WHERE b.source = '",
        source, "'")));
  };
  // Each response ingest fetched is committed once (8 rows); Prometheus's arrive as well.
  ASSERT_TRUE(PollUntil(
      [&] {
        const int served = exporter_->served_to_ingest();
        return served >= 2 && rows("scrape") == served * kGpus &&
               exporter_->served_to_ingest() == served && rows("remote_write") >= 2 * kGpus;
      },
      absl::Seconds(90), absl::Milliseconds(50)))
      << "served to ingest " << exporter_->served_to_ingest() << ", scrape rows "
      << rows("scrape") << ", remote_write rows " << rows("remote_write") << "\ningest:\n"
      << ingest_->process().LogTail() << "\nprometheus:\n"
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
  ASSERT_TRUE(r) << ingest_->process().LogTail();
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

namespace goodput {
namespace {

// With auth on, remote_write is a write path like PushSamples: it needs a telemetry token.
class RemoteWriteWithAuth : public RemoteWriteIntegration {
 protected:
  RemoteWriteWithAuth() { auth_on_ = true; }
};

TEST_F(RemoteWriteWithAuth, RefusesMissingAndWrongRoleTokensAndStoresPrometheusWritesWithOne) {
  const int64_t now = absl::ToUnixMillis(absl::Now());
  prometheus::WriteRequest request;
  AddSeries(&request, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", 0, 0.42, now - 2000);
  const std::string body = Snappy(request);

  httplib::Result r = PostWrite(body);
  ASSERT_TRUE(r) << ingest_->process().LogTail();
  EXPECT_EQ(r->status, 401);
  EXPECT_EQ(r->get_header_value("WWW-Authenticate"), "Bearer");
  EXPECT_THAT(r->body, HasSubstr("Authorization: Bearer"));
  r = PostWrite(body, "not-a-token");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  EXPECT_THAT(r->body, ::testing::Not(HasSubstr("not-a-token")));
  r = PostWrite(body, "scheduler-token-1");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 403);
  EXPECT_THAT(r->body, HasSubstr("scheduler"));
  EXPECT_EQ(Query("SELECT count(*) FROM samples"), "0");

  r = PostWrite(body, "telemetry-token-1");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(Query("SELECT count(*) FROM samples"), "1");

  // A real Prometheus configured with the token delivers.
  StartPrometheus();
  ASSERT_TRUE(PollUntil([&] { return std::stoi(Query("SELECT count(*) FROM samples")) > kGpus; },
                        absl::Seconds(90), absl::Milliseconds(200)))
      << "ingest:\n"
      << ingest_->process().LogTail() << "\nprometheus:\n"
      << prometheus_->LogTail();
}

}  // namespace
}  // namespace goodput

namespace goodput {
namespace {

// A Kubernetes fleet: Prometheus scrapes dcgm-exporter through the chart's ServiceMonitor
// (honor_labels false), so the workload's pod is in exported_pod/exported_namespace and
// pod/namespace name the exporter's own pod; the node prints its FQDN in upper case.
TEST_F(RemoteWriteIntegration, KubernetesJobGetsItsSamplesThroughExportedPodLabels) {
  v1::Job job;
  job.mutable_key()->set_cluster("eos");
  job.mutable_key()->set_job_id("research/llm-pretrain");
  job.set_scheduler(v1::SCHEDULER_KIND_KUBERNETES);
  job.set_gpu_count(8);
  job.mutable_start_time()->set_seconds(absl::ToUnixSeconds(absl::Now()) - 3600);
  v1::RegisterJobResponse registered;
  grpc::Status status = testing::RegisterJob(*jobs_, job, &registered);
  ASSERT_TRUE(status.ok()) << status.error_message();

  const int64_t now = absl::ToUnixMillis(absl::Now());
  prometheus::WriteRequest request;
  for (int gpu = 0; gpu < 2; ++gpu) {
    prometheus::TimeSeries* series = request.add_timeseries();
    const std::pair<std::string, std::string> labels[] = {
        {"Hostname", "GPU-NODE-7.EOS.EXAMPLE.COM"},
        {"__name__", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"},
        {"container", "nvidia-dcgm-exporter"},
        {"exported_container", "trainer"},
        {"exported_namespace", "research"},
        {"exported_pod", absl::StrCat("llm-pretrain-worker-", gpu)},
        {"gpu", absl::StrCat(gpu)},
        {"modelName", "NVIDIA H100 80GB HBM3"},
        {"namespace", "gpu-operator"},
        {"pod", "nvidia-dcgm-exporter-x7k2p"}};
    for (const auto& [name, value] : labels) {
      auto* label = series->add_labels();
      label->set_name(name);
      label->set_value(value);
    }
    auto* sample = series->add_samples();
    sample->set_value(0.5);
    sample->set_timestamp(now - 1000);
  }
  httplib::Result r = PostWrite(Snappy(request));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(Query("SELECT count(*) FROM samples s JOIN jobs j ON j.id = s.job "
                  "WHERE j.job_id = 'research/llm-pretrain'"),
            "2");
  // Stored under one canonical host name; the printed form is kept.
  EXPECT_EQ(Query("SELECT DISTINCT host || ' ' || (labels->>'hostname_as_reported') FROM samples"),
            "gpu-node-7 GPU-NODE-7.EOS.EXAMPLE.COM");
}

}  // namespace
}  // namespace goodput

namespace goodput {
namespace {

// Two Prometheus replicas (an HA pair) remote_write the same dcgm-exporter series with
// external labels __replica__=prom-a / prom-b: one replica is stored; when it stops sending,
// the other takes over after the failover timeout.
class RemoteWriteHaPair : public RemoteWriteIntegration {
 protected:
  RemoteWriteHaPair() { extra_ingest_config_ = "    ha_failover_timeout_s: 2\n"; }

  httplib::Result Send(const std::string& replica, int64_t time_ms) {
    prometheus::WriteRequest request;
    for (int gpu = 0; gpu < 2; ++gpu) {
      AddSeries(&request, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", gpu, 0.4, time_ms);
      auto* label = request.mutable_timeseries(gpu)->add_labels();
      label->set_name("__replica__");
      label->set_value(replica);
    }
    return PostWrite(Snappy(request));
  }
};

TEST_F(RemoteWriteHaPair, StoresOneReplicaAndFailsOverWhenItStopsSending) {
  const int64_t now = absl::ToUnixMillis(absl::Now());
  httplib::Result r = Send("prom-a", now - 10'000);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  r = Send("prom-b", now - 9'990);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_THAT(r->body, HasSubstr("dropped 2 of a standby HA replica"));
  r = Send("prom-a", now - 5'000);
  ASSERT_TRUE(r);
  EXPECT_EQ(Query("SELECT count(*) FROM samples"), "4");
  EXPECT_EQ(Query("SELECT count(*) FROM samples WHERE labels ? '__replica__'"), "0");

  // prom-a goes quiet: prom-b's writes are dropped until the timeout, then stored.
  int64_t t = now - 4'000;
  ASSERT_TRUE(PollUntil(
      [&] {
        (void)Send("prom-b", ++t);
        return Query("SELECT count(*) FROM samples") == "6";
      },
      absl::Seconds(30), absl::Milliseconds(250)))
      << ingest_->process().LogTail();
  EXPECT_EQ(Query("SELECT replica FROM ingest_ha_replicas WHERE cluster = 'eos'"), "prom-b");
}

}  // namespace
}  // namespace goodput
