// goodput-ingest scraping dcgm-exporter endpoints itself, against a real PostgreSQL: a test
// HTTP endpoint serves dcgm-exporter text for an 8-GPU H100 node; every response ingest
// fetched lands exactly once, attributed to the registered Slurm job; ListScrapeTargets
// reports each target's last scrape, an unreachable target is DOWN with its error, and an
// interval above 30 s is flagged and warned about.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "goodput/v1/ingest.grpc.pb.h"
#include "goodput/v1/job.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "tests/support/child_process.h"
#include "tests/support/dcgm_exporter.h"
#include "tests/support/free_port.h"
#include "tests/support/postgres_server.h"
#include "tests/support/service_process.h"
#include "tests/support/test_steps.h"

namespace goodput {
namespace {

using ::goodput::testing::DcgmExporterServer;
using ::goodput::testing::PollUntil;
using ::goodput::testing::PostgresServer;
using ::goodput::testing::ServiceProcess;
using ::testing::HasSubstr;

constexpr char kHost[] = "gpu-node-042";
constexpr char kJobId[] = "4211873";
constexpr int kGpus = testing::kDcgmExporterGpus;

class ScrapeIntegration : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(testing::StartPostgres(&pg_));
    auto exporter = DcgmExporterServer::Start(kHost, kJobId);
    ASSERT_TRUE(exporter.ok()) << exporter.status();
    exporter_ = *std::move(exporter);
    absl::StatusOr<int> closed = testing::FreePort();
    ASSERT_TRUE(closed.ok());
    closed_port_ = *closed;

    ASSERT_NO_FATAL_FAILURE(testing::StartService(
        {.binary = testing::BuiltBinary("services/ingest/goodput-ingest"),
         .config_yaml = absl::StrCat(
             testing::PostgresConfigYaml(*pg_), "redis:\n  host: \"\"\n",
             "ingest:\n  maintenance_interval_s: 3600\n", "  scrape:\n    targets:\n",
             "      - url: http://127.0.0.1:", exporter_->port(), "/metrics\n",
             "        cluster: eos\n        interval_s: 0.5\n", "        labels: {rack: r12}\n",
             "      - url: http://127.0.0.1:", closed_port_, "/metrics\n",
             "        cluster: eos\n        interval_s: 60\n"),
         .extra_args = testing::MigrateArgs()},
        &ingest_));
    jobs_ = v1::JobService::NewStub(ingest_->Channel());
    ingest_stub_ = v1::IngestService::NewStub(ingest_->Channel());
  }

  void TearDown() override {
    if (ingest_ != nullptr) (void)ingest_->process().Terminate(absl::Seconds(10));
  }

  void RegisterJob() {
    v1::RegisterJobResponse response;
    grpc::Status status =
        testing::RegisterJob(*jobs_, testing::SlurmTestJob("eos", kJobId, kHost, kGpus), &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }

  v1::ListScrapeTargetsResponse ListTargets() {
    grpc::ClientContext ctx;
    ctx.set_deadline(testing::Deadline());
    v1::ListScrapeTargetsResponse response;
    grpc::Status status = ingest_stub_->ListScrapeTargets(&ctx, {}, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }

  std::string Query(const std::string& sql) { return testing::QueryScalar(*pg_, sql); }

  std::unique_ptr<PostgresServer> pg_;
  std::unique_ptr<DcgmExporterServer> exporter_;
  std::unique_ptr<ServiceProcess> ingest_;
  int closed_port_ = 0;
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
        const int served = exporter_->served_to_ingest();
        return served >= 3 && std::stoi(Query(scraped_rows)) == served * kGpus &&
               exporter_->served_to_ingest() == served;
      },
      absl::Seconds(60), absl::Milliseconds(50)))
      << "served " << exporter_->served_to_ingest() << ", rows " << Query(scraped_rows) << "\n"
      << ingest_->process().LogTail();
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
  const std::string good_url = absl::StrCat("http://127.0.0.1:", exporter_->port(), "/metrics");
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
  EXPECT_THAT(ingest_->process().LogTail(1 << 20), HasSubstr("average of averages"));
  EXPECT_TRUE(ingest_->process().IsRunning());
}

}  // namespace
}  // namespace goodput
