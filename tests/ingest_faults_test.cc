// GPU faults end to end: dcgm-exporter's fault fields (XID gauge and window count, ECC,
// remapped rows, NVLink and PCIe error counters) reach goodput-ingest through every path —
// scraping, PushExposition, Prometheus remote_write, PushSamples — against a real PostgreSQL,
// become fault events by edge detection (an XID gauge stuck for hours is one event; a counter
// that grows is one event of its increase; a reset is handled), each on its GPU, host, job
// (or none) and time, and goodput-ofu serves them (ListFaultEvents, the job summary) with the
// XID catalog's meaning, blame and action; goodputctl prints them.
//
// The bodies are real dcgm-exporter output (tests/data/dcgm/README.md names the sources),
// with the values a test plays set where it says so.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "goodput/v1/ingest.grpc.pb.h"
#include "goodput/v1/job.grpc.pb.h"
#include "goodput/v1/ofu.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "tests/support/child_process.h"
#include "tests/support/dcgm_exporter.h"
#include "tests/support/free_port.h"
#include "tests/support/postgres_server.h"
#include "tests/support/redis_server.h"
#include "tests/support/service_process.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_steps.h"

namespace goodput {
namespace {

namespace fs = std::filesystem;
using ::goodput::testing::ChildProcess;
using ::goodput::testing::DcgmExporterLine;
using ::goodput::testing::DcgmExporterServer;
using ::goodput::testing::PollUntil;
using ::goodput::testing::PostgresServer;
using ::goodput::testing::RedisServer;
using ::goodput::testing::ServiceProcess;
using ::goodput::testing::TempDir;
using ::testing::HasSubstr;

constexpr char kHost[] = "gpu-node-042";
constexpr char kJobId[] = "4211873";
constexpr int64_t kMinuteMs = 60'000;

int64_t NowMs() { return absl::ToUnixMillis(absl::Now()); }

std::string ReadDcgmData(const std::string& name) {
  std::ifstream in(absl::StrCat(GOODPUT_SOURCE_DIR, "/tests/data/dcgm/", name));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// `body` with the value of the line(s) containing every one of `needles` set to `value`.
std::string SetValue(const std::string& body, const std::vector<std::string>& needles,
                     const std::string& value) {
  std::vector<std::string> lines = absl::StrSplit(body, '\n');
  for (std::string& line : lines) {
    if (line.empty() || line[0] == '#') continue;
    bool all = true;
    for (const std::string& n : needles) all = all && absl::StrContains(line, n);
    if (!all) continue;
    line = absl::StrCat(line.substr(0, line.rfind(' ')), " ", value);
  }
  return absl::StrJoin(lines, "\n");
}

class FaultsIntegration : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(testing::StartPostgres(&pg_));
    ASSERT_NO_FATAL_FAILURE(testing::StartRedis(&redis_));
    auto dir = TempDir::Create("goodput-faults-test");
    ASSERT_TRUE(dir.ok());
    dir_ = std::make_unique<TempDir>(*std::move(dir));
    auto exporter = DcgmExporterServer::Start(kHost, kJobId);
    ASSERT_TRUE(exporter.ok()) << exporter.status();
    exporter_ = *std::move(exporter);
    // ingest scrapes the exporter for cluster eos; Prometheus' remote_write lands in cluster
    // eos-prom, so the two paths keep their own GPU state and each is seen on its own.
    ASSERT_NO_FATAL_FAILURE(testing::StartService(
        {.binary = testing::BuiltBinary("services/ingest/goodput-ingest"),
         .config_yaml =
             absl::StrCat(testing::PostgresConfigYaml(*pg_), "redis:\n  host: \"\"\n",
                          "log:\n  format: text\n", "ingest:\n  maintenance_interval_s: 3600\n",
                          "  remote_write:\n    cluster: eos-prom\n", "  scrape:\n    targets:\n",
                          "      - url: http://127.0.0.1:", exporter_->port(), "/metrics\n",
                          "        cluster: eos\n        interval_s: 0.5\n"),
         .extra_args = testing::MigrateArgs()},
        &ingest_));
    ASSERT_NO_FATAL_FAILURE(testing::StartService(
        {.binary = testing::BuiltBinary("services/ofu/goodput-ofu"),
         .config_yaml =
             absl::StrCat(testing::PostgresConfigYaml(*pg_), testing::RedisConfigYaml(*redis_),
                          "log:\n  format: text\nofu:\n  poll_interval_s: 0.2\n")},
        &ofu_));
    jobs_ = v1::JobService::NewStub(ingest_->Channel());
    ingest_stub_ = v1::IngestService::NewStub(ingest_->Channel());
    ofu_stub_ = v1::OfuService::NewStub(ofu_->Channel());
  }

  void TearDown() override {
    if (prometheus_ != nullptr) (void)prometheus_->Terminate(absl::Seconds(10));
    if (ofu_ != nullptr) (void)ofu_->process().Terminate(absl::Seconds(10));
    if (ingest_ != nullptr) (void)ingest_->process().Terminate(absl::Seconds(10));
  }

  std::string Query(const std::string& sql) { return testing::QueryScalar(*pg_, sql); }
  int Count(const std::string& where) {
    return std::stoi(Query(absl::StrCat("SELECT count(*) FROM gpu_fault_events WHERE ", where)));
  }

  v1::PushExpositionResponse Push(const std::string& cluster, const std::string& batch_id,
                                  const std::string& body, int64_t scrape_ms) {
    v1::PushExpositionRequest request;
    request.set_batch_id(batch_id);
    request.set_cluster(cluster);
    request.set_scrape_time_unix_ms(scrape_ms);
    request.set_body(body);
    grpc::ClientContext ctx;
    ctx.set_deadline(testing::Deadline());
    v1::PushExpositionResponse response;
    grpc::Status status = ingest_stub_->PushExposition(&ctx, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }

  v1::ListFaultEventsResponse ListFaults(const v1::ListFaultEventsRequest& request) {
    grpc::ClientContext ctx;
    ctx.set_deadline(testing::Deadline());
    v1::ListFaultEventsResponse response;
    grpc::Status status = ofu_stub_->ListFaultEvents(&ctx, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }
  v1::ListFaultEventsResponse JobFaults(const std::string& cluster, const std::string& job_id) {
    v1::ListFaultEventsRequest request;
    request.mutable_job()->set_cluster(cluster);
    request.mutable_job()->set_job_id(job_id);
    return ListFaults(request);
  }

  // Waits until the exporter has served `n` more responses to ingest and all of them are
  // committed (8 rows each).
  void WaitForScrapes(int n) {
    const int target = exporter_->served_to_ingest() + n;
    const std::string rows =
        "SELECT count(*) FROM samples s JOIN ingest_batches b ON b.batch_id = s.batch_id "
        "WHERE b.source = 'scrape'";
    ASSERT_TRUE(PollUntil(
        [&] {
          const int served = exporter_->served_to_ingest();
          return served >= target &&
                 std::stoi(Query(rows)) == served * testing::kDcgmExporterGpus &&
                 exporter_->served_to_ingest() == served;
        },
        absl::Seconds(60), absl::Milliseconds(50)))
        << ingest_->process().LogTail();
  }

  testing::ProgramResult Ctl(std::vector<std::string> args) {
    args.insert(args.begin(), testing::BuiltBinary("tools/goodputctl/goodputctl").string());
    absl::StatusOr<testing::ProgramResult> result = testing::RunProgram(
        args, {{"GOODPUT_TOKEN", ""}, {"GOODPUT_OFU_ADDR", ofu_->grpc_address()}});
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? *result : testing::ProgramResult{};
  }

  std::unique_ptr<PostgresServer> pg_;
  std::unique_ptr<RedisServer> redis_;
  std::unique_ptr<TempDir> dir_;
  std::unique_ptr<DcgmExporterServer> exporter_;
  std::unique_ptr<ServiceProcess> ingest_, ofu_;
  std::unique_ptr<ChildProcess> prometheus_;
  std::unique_ptr<v1::JobService::Stub> jobs_;
  std::unique_ptr<v1::IngestService::Stub> ingest_stub_;
  std::unique_ptr<v1::OfuService::Stub> ofu_stub_;
};

// Scraped while a job holds the node: XID 79 appears on GPU 3 and stays for every scrape
// after; then the GPU's volatile DBE counter grows by 2. Two events, both the job's.
TEST_F(FaultsIntegration, ScrapedFaultDuringAJobIsOneEventAttributedToTheJob) {
  v1::RegisterJobResponse registered;
  ASSERT_TRUE(
      testing::RegisterJob(*jobs_, testing::SlurmTestJob("eos", kJobId, kHost, 8), &registered)
          .ok());
  auto faults = [&](const std::string& xid, const std::string& dbe) {
    return absl::StrCat("# TYPE DCGM_FI_DEV_XID_ERRORS gauge\n",
                        DcgmExporterLine(kHost, kJobId, 3, "DCGM_FI_DEV_XID_ERRORS", xid),
                        "# TYPE DCGM_FI_DEV_ECC_DBE_VOL_TOTAL counter\n",
                        DcgmExporterLine(kHost, kJobId, 3, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", dbe));
  };
  exporter_->SetExtraText(faults("0", "0"));
  ASSERT_NO_FATAL_FAILURE(WaitForScrapes(3));
  EXPECT_EQ(Count("true"), 0);

  exporter_->SetExtraText(faults("79", "0"));
  ASSERT_NO_FATAL_FAILURE(WaitForScrapes(10));
  EXPECT_EQ(Count("signal = 'xid'"), 1) << "a stuck XID gauge is one event";
  EXPECT_EQ(Query("SELECT e.xid || ' ' || e.host || ' ' || e.gpu_index || ' ' || j.job_id "
                  "FROM gpu_fault_events e JOIN jobs j ON j.id = e.job WHERE signal = 'xid'"),
            absl::StrCat("79 ", kHost, " 3 ", kJobId));

  exporter_->SetExtraText(faults("79", "2"));
  ASSERT_NO_FATAL_FAILURE(WaitForScrapes(5));
  EXPECT_EQ(Count("true"), 2);
  EXPECT_EQ(Query("SELECT count || ' ' || previous_value || ' ' || value FROM gpu_fault_events "
                  "WHERE signal = 'ecc_dbe_volatile'"),
            "2 0 2");
  // Nothing the exporter served is lost: every response's 8 samples are stored (checked by
  // WaitForScrapes).

  // ofu serves them, with the XID catalog's meaning, blame and action.
  v1::ListFaultEventsResponse listed = JobFaults("eos", kJobId);
  ASSERT_EQ(listed.events_size(), 2);
  const v1::FaultEvent& xid = listed.events(0);
  EXPECT_EQ(xid.signal(), v1::FAULT_SIGNAL_XID);
  EXPECT_EQ(xid.xid(), 79);
  EXPECT_EQ(xid.gpu().host(), kHost);
  EXPECT_EQ(xid.gpu().gpu_index(), 3);
  EXPECT_EQ(xid.job().job_id(), kJobId);
  EXPECT_EQ(xid.xid_meaning(), "GPU has fallen off the bus");
  EXPECT_EQ(xid.blame(), "hardware");
  EXPECT_THAT(xid.recommended_action(), HasSubstr("drain the node"));
  EXPECT_EQ(xid.source(), "scrape");
  EXPECT_EQ(listed.events(1).signal(), v1::FAULT_SIGNAL_ECC_DBE_VOLATILE);
  EXPECT_EQ(listed.events(1).count(), 2);

  grpc::ClientContext ctx;
  v1::GetJobSummaryRequest summary_request;
  summary_request.mutable_job()->set_cluster("eos");
  summary_request.mutable_job()->set_job_id(kJobId);
  v1::GetJobSummaryResponse summary;
  ASSERT_TRUE(ofu_stub_->GetJobSummary(&ctx, summary_request, &summary).ok());
  EXPECT_EQ(summary.summary().fault_event_count(), 2);
  ASSERT_GE(summary.summary().fault_events_size(), 1);
  EXPECT_EQ(summary.summary().fault_events(0).xid(), 79);

  testing::ProgramResult ctl = Ctl({"faults", absl::StrCat("eos/", kJobId)});
  EXPECT_EQ(ctl.exit.exit_code, 0) << ctl.output;
  EXPECT_THAT(ctl.output, HasSubstr("XID 79 GPU has fallen off the bus"));
  EXPECT_THAT(ctl.output, HasSubstr("hardware"));
  EXPECT_THAT(ctl.output, HasSubstr("double-bit ECC errors (volatile) +2"));
  // The job's view names the faults too.
  testing::ProgramResult job_view = Ctl({"ofu", absl::StrCat("eos/", kJobId)});
  EXPECT_EQ(job_view.exit.exit_code, 0) << job_view.output;
  EXPECT_THAT(job_view.output,
              HasSubstr("GPU faults   2, first XID 79 GPU has fallen off the bus"));
}

// Four hours of scrapes of an A30 node no job holds, pushed with their scrape times: GPU 1's
// MIG instance 3 reports XID 79 from the second minute on. One event, with no job. The
// exporter then goes away for ten minutes and comes back reading DCGM's cached 79: the same
// fault, no event. A restart that prints 0 and then 79 again is a new XID: a second event.
TEST_F(FaultsIntegration, XidGaugeStuckForHoursOnAGpuNoJobHoldsIsOneEventAndRestartsAreJudged) {
  const std::string clean = ReadDcgmData("a30_mig_xid_gauge.prom");
  ASSERT_FALSE(clean.empty());
  const std::string xid79 = SetValue(clean, {"gpu=\"1\"", "GPU_I_ID=\"3\""}, "79");
  const std::string host = "yg-data-k8s-gpu-a30-node-test-test0003";
  const int64_t start = (NowMs() - 5 * 60 * kMinuteMs) / kMinuteMs * kMinuteMs;
  int64_t t = start;
  for (int i = 0; i < 240; ++i, t += kMinuteMs) {
    v1::PushExpositionResponse r = Push("eos", absl::StrCat("a30-", i), i == 0 ? clean : xid79, t);
    ASSERT_EQ(r.stored_count(), 6) << i;
    ASSERT_EQ(r.ignored_line_count(), 0);
  }
  EXPECT_EQ(Count("true"), 1);
  EXPECT_EQ(Query("SELECT xid || ' ' || host || ' ' || gpu_index || ' ' || mig_instance_id || "
                  "' ' || (job IS NULL) || ' ' || "
                  "(extract(epoch FROM event_time) * 1000)::bigint FROM gpu_fault_events"),
            absl::StrCat("79 ", host, " 1 3 true ", start + kMinuteMs));
  // Every scrape's samples are stored (6 MIG instances, 240 scrapes).
  EXPECT_EQ(Query(absl::StrCat("SELECT count(*) FROM samples WHERE host = '", host, "'")), "1440");

  // Ten minutes without the series, then the cached value again: the same fault.
  t += 10 * kMinuteMs;
  Push("eos", "a30-back", xid79, t);
  EXPECT_EQ(Count("true"), 1);
  // A restart printing 0, then a new 79: a new event.
  t += kMinuteMs;
  Push("eos", "a30-restart-0", clean, t);
  t += kMinuteMs;
  Push("eos", "a30-restart-79", xid79, t);
  EXPECT_EQ(Count("true"), 2);
  // A retried batch is stored once: no event again.
  Push("eos", "a30-restart-79", xid79, t);
  EXPECT_EQ(Count("true"), 2);

  v1::ListFaultEventsRequest by_host;
  by_host.set_cluster("eos");
  by_host.set_host(host);
  v1::ListFaultEventsResponse listed = ListFaults(by_host);
  ASSERT_EQ(listed.events_size(), 2);
  EXPECT_FALSE(listed.events(0).has_job());
  EXPECT_EQ(listed.events(0).gpu().uuid(), "GPU-2d20791a-b4a6-ba59-97f1-e95b99fe5b49");
  EXPECT_EQ(listed.events(0).gpu().mig().gpu_instance_id(), 3);
  // Paging: one per page.
  by_host.set_page_size(1);
  v1::ListFaultEventsResponse first = ListFaults(by_host);
  ASSERT_EQ(first.events_size(), 1);
  ASSERT_FALSE(first.next_page_token().empty());
  by_host.set_page_token(first.next_page_token());
  v1::ListFaultEventsResponse second = ListFaults(by_host);
  ASSERT_EQ(second.events_size(), 1);
  EXPECT_GT(second.events(0).time().seconds(), first.events(0).time().seconds());

  // A job registered afterwards for the instance, over that time, finds the faults of its GPU.
  v1::Job job = testing::SlurmTestJob("eos", "late-1", host, 0, "NVIDIA A30");
  job.mutable_start_time()->set_seconds(start / 1000);
  v1::GpuRef* gpu = job.add_allocations()->mutable_gpu();
  gpu->set_host(host);
  gpu->set_uuid("GPU-2d20791a-b4a6-ba59-97f1-e95b99fe5b49");
  gpu->mutable_mig()->set_gpu_instance_id(3);
  gpu->mutable_mig()->set_profile("1g.6gb");
  v1::RegisterJobResponse registered;
  grpc::Status status = testing::RegisterJob(*jobs_, job, &registered);
  ASSERT_TRUE(status.ok()) << status.error_message();
  v1::ListFaultEventsResponse late = JobFaults("eos", "late-1");
  ASSERT_EQ(late.events_size(), 2);
  EXPECT_EQ(late.events(0).job().job_id(), "late-1");
}

// Real GB200 fault fields (counters and flags): the first scrape is the counters' baseline;
// growth is an event of its increase; a volatile counter reset by a driver reload counts its
// new value; the row-remap failure flag rises once.
// A batch whose fault fields change no GPU's state (a stuck XID, steady counters: nearly
// every batch) stores its samples without locking the GPUs' fault state rows, so it does not
// wait for another transaction that holds them; a batch that changes a state still locks
// them and its events are recorded.
TEST_F(FaultsIntegration, SteadyFaultFieldsAreStoredWithoutLockingTheGpusFaultState) {
  const std::string clean = ReadDcgmData("a30_mig_xid_gauge.prom");
  ASSERT_FALSE(clean.empty());
  const std::string xid79 = SetValue(clean, {"gpu=\"1\"", "GPU_I_ID=\"3\""}, "79");
  int64_t t = (NowMs() - 60 * kMinuteMs) / kMinuteMs * kMinuteMs;
  ASSERT_EQ(Push("eos-lock", "lock-0", clean, t).stored_count(), 6);
  ASSERT_EQ(Push("eos-lock", "lock-1", xid79, t += kMinuteMs).stored_count(), 6);
  ASSERT_EQ(Count("cluster = 'eos-lock'"), 1);

  pqxx::connection locker(pg_->Dsn(testing::kDatabase));
  pqxx::work held(locker);
  ASSERT_GT(held.exec("SELECT 1 FROM gpu_fault_state WHERE cluster = 'eos-lock' FOR UPDATE").size(),
            0u);
  // Steady: stored while the rows stay locked by another transaction.
  EXPECT_EQ(Push("eos-lock", "lock-2", xid79, t += kMinuteMs).stored_count(), 6);
  EXPECT_EQ(Push("eos-lock", "lock-3", xid79, t += kMinuteMs).stored_count(), 6);
  EXPECT_EQ(Count("cluster = 'eos-lock'"), 1);
  held.commit();

  // Changes lock and are recorded: a restart printing 0, then a new 79.
  EXPECT_EQ(Push("eos-lock", "lock-4", clean, t += kMinuteMs).stored_count(), 6);
  EXPECT_EQ(Push("eos-lock", "lock-5", xid79, t += kMinuteMs).stored_count(), 6);
  EXPECT_EQ(Count("cluster = 'eos-lock'"), 2);
  EXPECT_EQ(Query("SELECT count(*) FROM samples WHERE cluster = 'eos-lock'"), "36");
}

TEST_F(FaultsIntegration, CountersGrowResetAndFlagsRiseIntoEventsOnTheirGpu) {
  const std::string first = ReadDcgmData("gb200_fault_fields.prom");
  ASSERT_FALSE(first.empty());
  const int64_t t0 = NowMs() - 30 * kMinuteMs;
  v1::PushExpositionResponse r = Push("eos", "gb200-1", first, t0);
  EXPECT_EQ(r.stored_count(), 2);
  EXPECT_EQ(r.refused_count(), 0);
  EXPECT_EQ(r.ignored_line_count(), 0);
  // First values: the XID is an event, counters are baselines.
  EXPECT_EQ(Count("true"), 1);
  EXPECT_EQ(Count("signal = 'xid' AND xid = 79 AND gpu_index = 1 AND host = '3f546054f69d'"), 1);

  const std::string gpu1 = "gpu=\"1\"";
  std::string second = SetValue(first, {"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", gpu1}, "3");
  second = SetValue(second, {"DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", gpu1}, "9");
  second = SetValue(second, {"DCGM_FI_DEV_ROW_REMAP_FAILURE", gpu1}, "1");
  Push("eos", "gb200-2", second, t0 + kMinuteMs);
  EXPECT_EQ(Count("signal = 'ecc_dbe_volatile' AND count = 2 AND previous_value = 1"), 1);
  EXPECT_EQ(Count("signal = 'nvlink_replay_errors' AND count = 3"), 1);
  EXPECT_EQ(Count("signal = 'row_remap_failure'"), 1);
  EXPECT_EQ(Count("true"), 4);

  // The same values again: nothing. Then the driver reloads between two scrapes and the
  // volatile DBE counter (3) is seen at 1: a reset, and 1 new error since it.
  Push("eos", "gb200-3", second, t0 + 2 * kMinuteMs);
  EXPECT_EQ(Count("true"), 4);
  const std::string dbe = "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL";
  Push("eos", "gb200-4", SetValue(second, {dbe, gpu1}, "1"), t0 + 3 * kMinuteMs);
  EXPECT_EQ(Count("signal = 'ecc_dbe_volatile' AND counter_reset AND count = 1 AND value = 1 "
                  "AND previous_value = 3"),
            1)
      << "after a reset, the counter's new value is the increase";
  // Another reload seen at 0 is no error; growing from there again is.
  Push("eos", "gb200-5", SetValue(second, {dbe, gpu1}, "0"), t0 + 4 * kMinuteMs);
  EXPECT_EQ(Count("true"), 5);
  Push("eos", "gb200-6", SetValue(second, {dbe, gpu1}, "2"), t0 + 5 * kMinuteMs);
  EXPECT_EQ(Count("signal = 'ecc_dbe_volatile' AND NOT counter_reset AND count = 2 AND "
                  "previous_value = 0"),
            1);
  EXPECT_EQ(Count("true"), 6);
  // A late scrape (older than the GPU's last change) changes nothing.
  Push("eos", "gb200-late", SetValue(second, {dbe, gpu1}, "40"), t0 + 30'000);
  EXPECT_EQ(Count("true"), 6);
  EXPECT_EQ(Count("host <> '3f546054f69d' OR gpu_index <> 1"), 0) << "GPU 0 is clean";
}

// PushSamples carries fault readings too: the XID window count of NVIDIA's example (XID 42,
// window 300000 ms), and a PCIe replay counter; a reading of no known signal is refused alone.
TEST_F(FaultsIntegration, PushSamplesFaultReadingsBecomeEventsAndBadOnesAreRefused) {
  const int64_t t0 = NowMs() - 20 * kMinuteMs;
  auto sample = [&](int64_t t, double xid_count, double replays) {
    v1::GpuSample s;
    s.mutable_gpu()->set_host("workstation");
    s.mutable_gpu()->set_gpu_index(0);
    s.set_time_unix_ms(t);
    s.set_gpu_model("NVIDIA T400 4GB");
    s.set_sm_clock_mhz(1425);
    v1::GpuFaultReading* x = s.add_faults();
    x->set_signal(v1::FAULT_SIGNAL_XID_COUNT);
    x->set_xid(42);
    x->set_window_ms(300000);
    x->set_value(xid_count);
    v1::GpuFaultReading* p = s.add_faults();
    p->set_signal(v1::FAULT_SIGNAL_PCIE_REPLAYS);
    p->set_value(replays);
    return s;
  };
  v1::PushSamplesRequest batch;
  batch.set_batch_id("agent-1");
  batch.set_cluster("eos");
  *batch.add_samples() = sample(t0, 1, 10);
  *batch.add_samples() = sample(t0 + kMinuteMs, 1, 10);
  *batch.add_samples() = sample(t0 + 2 * kMinuteMs, 2, 14);
  // Ten minutes later (beyond the 5-minute window) the count is 1 again: a new XID.
  *batch.add_samples() = sample(t0 + 12 * kMinuteMs, 1, 14);
  v1::GpuSample bad = sample(t0 + 13 * kMinuteMs, 1, 14);
  bad.mutable_faults(0)->set_signal(v1::FAULT_SIGNAL_UNSPECIFIED);
  *batch.add_samples() = bad;
  grpc::ClientContext ctx;
  v1::PushSamplesResponse response;
  auto writer = ingest_stub_->PushSamples(&ctx, &response);
  ASSERT_TRUE(writer->Write(batch));
  writer->WritesDone();
  grpc::Status status = writer->Finish();
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.stored_count(), 4);
  ASSERT_EQ(response.refused_count(), 1);
  ASSERT_EQ(response.refusals_size(), 1);
  EXPECT_EQ(response.refusals(0).field(), "faults[0].signal");

  EXPECT_EQ(Count("signal = 'xid_count' AND xid = 42"), 3);
  EXPECT_EQ(Query("SELECT string_agg(count::text, ',' ORDER BY event_time) FROM "
                  "gpu_fault_events WHERE signal = 'xid_count'"),
            "1,1,1");
  EXPECT_EQ(Count("signal = 'pcie_replays' AND count = 4"), 1);
  EXPECT_EQ(Count("source <> 'grpc'"), 0);
}

// Prometheus scrapes the exporter and remote-writes: the XID gauge and the XID window count
// (as dcgm-exporter prints them with `xid` and `window_size_in_ms`) on GPU 5, stuck across
// many remote-written samples, are one event each.
TEST_F(FaultsIntegration, RemoteWrittenStuckXidIsOneEvent) {
  exporter_->SetExtraText(
      absl::StrCat("# TYPE DCGM_FI_DEV_XID_ERRORS gauge\n",
                   DcgmExporterLine(kHost, kJobId, 5, "DCGM_FI_DEV_XID_ERRORS", "94",
                                    ",err_code=\"94\",err_msg=\"Contained ECC error\""),
                   "# TYPE DCGM_EXP_XID_ERRORS_COUNT gauge\n",
                   DcgmExporterLine(kHost, kJobId, 5, "DCGM_EXP_XID_ERRORS_COUNT", "1",
                                    ",window_size_in_ms=\"300000\",xid=\"94\"")));
  absl::StatusOr<int> port = testing::FreePort();
  ASSERT_TRUE(port.ok());
  const fs::path config = dir_->path() / "prometheus.yml";
  std::ofstream(config) << "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                        << "scrape_configs:\n  - job_name: dcgm\n    static_configs:\n"
                        << "      - targets: ['127.0.0.1:" << exporter_->port() << "']\n"
                        << "remote_write:\n  - url: http://127.0.0.1:" << ingest_->http_port()
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
  const std::string gpu5_rows =
      "SELECT count(*) FROM samples WHERE cluster = 'eos-prom' AND gpu_index = 5";
  ASSERT_TRUE(PollUntil([&] { return std::stoi(Query(gpu5_rows)) >= 6; }, absl::Seconds(90),
                        absl::Milliseconds(200)))
      << ingest_->process().LogTail() << "\nprometheus:\n"
      << prometheus_->LogTail();
  EXPECT_EQ(Count("cluster = 'eos-prom' AND signal = 'xid' AND xid = 94 AND gpu_index = 5"), 1);
  EXPECT_EQ(Count("cluster = 'eos-prom' AND signal = 'xid_count' AND xid = 94"), 1);
  EXPECT_EQ(Count("cluster = 'eos-prom' AND source <> 'remote_write'"), 0);
  // The value labels are read, not kept as sample labels.
  EXPECT_EQ(Query("SELECT count(*) FROM samples WHERE labels ? 'err_msg' OR labels ? 'xid'"), "0");
}

}  // namespace
}  // namespace goodput
