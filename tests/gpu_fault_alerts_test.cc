// GPU faults become alerts and causes, through the real path: dcgm-exporter fault lines pushed
// to goodput-ingest (a real process, against a real PostgreSQL) become fault events there; the
// alert engine (in process, on the same database, as tests/alerting_engine_test.cc runs it)
// turns a fault on a GPU a running job holds into one `gpu_fault` alert per faulty GPU, with
// the XID catalog's meaning, blame, action and source and the catalog's severity, however
// long the gauge stays stuck and however often the sweep runs; and names a fault on the
// straggling GPU as the straggler's likely cause. With goodput-ofu and goodput-alerting
// running, a failed job's end report lists its faults and names the likely cause, and
// goodputctl prints them.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "goodput/v1/ingest.grpc.pb.h"
#include "goodput/v1/job.grpc.pb.h"
#include "goodput/v1/report.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "services/alerting/alert_engine.h"
#include "services/api/api_convert.h"
#include "services/platform/pg_pool.h"
#include "tests/support/child_process.h"
#include "tests/support/dcgm_exporter.h"
#include "tests/support/free_port.h"
#include "tests/support/postgres_server.h"
#include "tests/support/redis_server.h"
#include "tests/support/service_process.h"
#include "tests/support/test_steps.h"

namespace goodput::alerting {
namespace {

using ::goodput::testing::DcgmExporterLine;
using ::goodput::testing::PollUntil;
using ::goodput::testing::PostgresServer;
using ::goodput::testing::ServiceProcess;
using ::testing::HasSubstr;

constexpr char kHost[] = "gpu-node-042";
constexpr int64_t kMinuteMs = 60'000;

int64_t NowMs() { return absl::ToUnixMillis(absl::Now()); }

class GpuFaultAlerts : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(goodput::testing::StartPostgres(&pg_));
    ASSERT_NO_FATAL_FAILURE(goodput::testing::StartService(
        {.binary = goodput::testing::BuiltBinary("services/ingest/goodput-ingest"),
         .config_yaml = absl::StrCat(goodput::testing::PostgresConfigYaml(*pg_),
                                     "redis:\n  host: \"\"\nlog:\n  format: text\n"
                                     "ingest:\n  maintenance_interval_s: 3600\n"),
         .extra_args = goodput::testing::MigrateArgs()},
        &ingest_));
    jobs_ = v1::JobService::NewStub(ingest_->Channel());
    ingest_stub_ = v1::IngestService::NewStub(ingest_->Channel());
    auto pool = platform::PgPool::Create({.dsn = pg_->Dsn("goodput")});
    ASSERT_TRUE(pool.ok()) << pool.status();
    pool_ = *std::move(pool);
    EngineConfig config;
    config.routing.default_targets = {"am-prod"};
    config.target_kinds = {{"am-prod", "alertmanager"}};
    engine_ =
        std::make_unique<AlertEngine>(pool_.get(), config, nullptr, platform::Logger(),
                                      [this] { return absl::FromUnixMillis(now_ms_.load()); });
  }

  void TearDown() override {
    for (ServiceProcess* p : {alerting_.get(), ofu_.get(), ingest_.get()}) {
      if (p != nullptr) (void)p->process().Terminate(absl::Seconds(10));
    }
  }

  // A Slurm job on kHost's 8 GPUs that started `start_ms`.
  void Register(const std::string& job_id, int64_t start_ms, const std::string& host = kHost) {
    v1::Job job = goodput::testing::SlurmTestJob("eos", job_id, host, 8);
    job.mutable_start_time()->set_seconds(start_ms / 1000);
    v1::RegisterJobResponse registered;
    grpc::Status status = goodput::testing::RegisterJob(*jobs_, job, &registered);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  void End(const std::string& job_id, int64_t end_ms, v1::JobState state) {
    grpc::ClientContext ctx;
    ctx.set_deadline(goodput::testing::Deadline());
    v1::EndJobRequest request;
    request.mutable_key()->set_cluster("eos");
    request.mutable_key()->set_job_id(job_id);
    *request.mutable_end_time() = api::UnixMsToTimestamp(end_ms);
    request.set_final_state(state);
    v1::EndJobResponse response;
    grpc::Status status = jobs_->EndJob(&ctx, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }

  // dcgm-exporter's fault lines for GPU `gpu` of `host`, pushed as one scrape at `t_ms`.
  void PushFaults(const std::string& batch, int64_t t_ms, const std::string& job_id, int gpu,
                  const std::string& xid, const std::string& nvlink_replays = "",
                  const std::string& host = kHost) {
    std::string body =
        absl::StrCat("# TYPE DCGM_FI_DEV_XID_ERRORS gauge\n",
                     DcgmExporterLine(host, job_id, gpu, "DCGM_FI_DEV_XID_ERRORS", xid));
    if (!nvlink_replays.empty()) {
      absl::StrAppend(
          &body, "# TYPE DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL counter\n",
          DcgmExporterLine(host, job_id, gpu, "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
                           nvlink_replays));
    }
    v1::PushExpositionRequest request;
    request.set_batch_id(batch);
    request.set_cluster("eos");
    request.set_scrape_time_unix_ms(t_ms);
    request.set_body(body);
    grpc::ClientContext ctx;
    ctx.set_deadline(goodput::testing::Deadline());
    v1::PushExpositionResponse response;
    grpc::Status status = ingest_stub_->PushExposition(&ctx, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    ASSERT_EQ(response.refused_count(), 0);
  }

  std::vector<v1::Alert> Alerts(const std::string& job_id) {
    v1::ListAlertsRequest request;
    request.mutable_job()->set_cluster("eos");
    request.mutable_job()->set_job_id(job_id);
    absl::StatusOr<v1::ListAlertsResponse> r = engine_->ListAlerts(request);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? std::vector<v1::Alert>(r->alerts().begin(), r->alerts().end())
                  : std::vector<v1::Alert>{};
  }
  void Sweep() {
    absl::Status s = engine_->Sweep();
    ASSERT_TRUE(s.ok()) << s;
  }
  int64_t Count(const std::string& sql) {
    auto v = pg_->QueryValue("goodput", sql);
    EXPECT_TRUE(v.ok()) << v.status() << " " << sql;
    return v.ok() ? std::stoll(*v) : -1;
  }

  std::unique_ptr<PostgresServer> pg_;
  std::unique_ptr<goodput::testing::RedisServer> redis_;
  std::unique_ptr<ServiceProcess> ingest_, ofu_, alerting_;
  std::unique_ptr<v1::JobService::Stub> jobs_;
  std::unique_ptr<v1::IngestService::Stub> ingest_stub_;
  std::unique_ptr<platform::PgPool> pool_;
  std::unique_ptr<AlertEngine> engine_;
  std::atomic<int64_t> now_ms_{NowMs()};
};

// XID 79 on GPU 3 of a running job, the gauge stuck at 79 for four hours of scrapes with the
// sweep running all along: one critical gpu_fault alert naming the GPU, with the catalog's
// meaning, blame, action and source, routed once; it resolves when the job ends.
TEST_F(GpuFaultAlerts, XidOnAJobsGpuIsOneCriticalAlertHoweverLongTheGaugeStaysStuck) {
  const int64_t start = (NowMs() - 5 * 60 * kMinuteMs) / kMinuteMs * kMinuteMs;
  ASSERT_NO_FATAL_FAILURE(Register("4211873", start));
  ASSERT_NO_FATAL_FAILURE(PushFaults("s0", start + 5 * kMinuteMs, "4211873", 3, "0"));
  Sweep();
  EXPECT_TRUE(Alerts("4211873").empty()) << "no XID yet";
  for (int i = 1; i <= 240; ++i) {
    ASSERT_NO_FATAL_FAILURE(
        PushFaults(absl::StrCat("s", i), start + (5 + i) * kMinuteMs, "4211873", 3, "79"));
    if (i % 40 == 1) Sweep();
  }
  Sweep();
  EXPECT_EQ(Count("SELECT count(*) FROM gpu_fault_events WHERE signal = 'xid'"), 1);
  std::vector<v1::Alert> alerts = Alerts("4211873");
  ASSERT_EQ(alerts.size(), 1u);
  const v1::Alert& a = alerts[0];
  EXPECT_EQ(a.kind(), v1::ALERT_KIND_GPU_FAULT);
  EXPECT_EQ(a.state(), v1::ALERT_STATE_FIRING);
  EXPECT_EQ(a.severity(), v1::SEVERITY_CRITICAL);
  EXPECT_EQ(a.labels().at("kind"), "gpu_fault");
  EXPECT_EQ(a.labels().at("host"), kHost);
  EXPECT_EQ(a.labels().at("gpu_index"), "3");
  EXPECT_EQ(a.labels().at("gpu"),
            absl::StrCat(kHost, "/3/GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e53"));
  EXPECT_EQ(a.labels().at("gpu_uuid"), "GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e53");
  EXPECT_EQ(a.labels().at("xid"), "79");
  EXPECT_EQ(a.labels().at("fault_blame"), "hardware");
  ASSERT_EQ(a.gpus_size(), 1);
  EXPECT_EQ(a.gpus(0).host(), kHost);
  EXPECT_EQ(a.gpus(0).gpu_index(), 3);
  EXPECT_THAT(a.summary(), HasSubstr("XID 79 (GPU has fallen off the bus; hardware fault)"));
  EXPECT_THAT(a.summary(), HasSubstr(absl::StrCat(kHost, "/3")));
  EXPECT_THAT(a.description(), HasSubstr("drain the node"));
  EXPECT_THAT(a.description(), HasSubstr("Source: NVIDIA XID Errors document"));
  ASSERT_EQ(a.evidence().faults_size(), 1);
  EXPECT_EQ(a.evidence().faults(0).xid(), 79);
  EXPECT_EQ(a.evidence().faults(0).xid_meaning(), "GPU has fallen off the bus");
  EXPECT_EQ(api::TimestampToUnixMs(a.evidence().onset_time()), start + 6 * kMinuteMs);
  EXPECT_EQ(
      Count(absl::StrCat("SELECT count(*) FROM alert_outbox WHERE alert_id = ", a.alert_id())), 1);

  // A second engine (another replica, or this one restarted) sweeping again adds nothing.
  AlertEngine other(pool_.get(), engine_->config(), nullptr, platform::Logger(),
                    [this] { return absl::FromUnixMillis(now_ms_.load()); });
  ASSERT_TRUE(other.Sweep().ok());
  EXPECT_EQ(Count("SELECT count(*) FROM alerts"), 1);
  EXPECT_EQ(Count("SELECT count(*) FROM alert_outbox"), 1);

  ASSERT_NO_FATAL_FAILURE(End("4211873", start + 250 * kMinuteMs, v1::JOB_STATE_FAILED));
  Sweep();
  alerts = Alerts("4211873");
  ASSERT_EQ(alerts.size(), 1u);
  EXPECT_EQ(alerts[0].state(), v1::ALERT_STATE_RESOLVED);
  EXPECT_EQ(Count("SELECT count(*) FROM alert_outbox WHERE state = 'resolved'"), 1);
  Sweep();
  EXPECT_EQ(Count("SELECT count(*) FROM alerts"), 1);
}

// XID 13 is the application's: a warning that says so. A fault on a GPU no job holds alerts
// no job.
TEST_F(GpuFaultAlerts, ApplicationXidWarnsAndAFaultOnAGpuNoJobHoldsAlertsNoJob) {
  const int64_t start = NowMs() - 60 * kMinuteMs;
  ASSERT_NO_FATAL_FAILURE(Register("app-1", start));
  ASSERT_NO_FATAL_FAILURE(PushFaults("a1", start + 10 * kMinuteMs, "app-1", 5, "13"));
  // Another node, no job on it.
  ASSERT_NO_FATAL_FAILURE(
      PushFaults("idle-1", start + 10 * kMinuteMs, "", 2, "79", "", "gpu-node-999"));
  Sweep();
  std::vector<v1::Alert> alerts = Alerts("app-1");
  ASSERT_EQ(alerts.size(), 1u);
  EXPECT_EQ(alerts[0].severity(), v1::SEVERITY_WARNING);
  EXPECT_EQ(alerts[0].labels().at("fault_blame"), "application");
  EXPECT_EQ(alerts[0].labels().at("xid"), "13");
  EXPECT_THAT(alerts[0].summary(), HasSubstr("XID 13 (Graphics Engine Exception"));
  EXPECT_THAT(alerts[0].description(), HasSubstr("application's fault"));
  EXPECT_EQ(Count("SELECT count(*) FROM gpu_fault_events WHERE host = 'gpu-node-999'"), 1);
  EXPECT_EQ(Count("SELECT count(*) FROM alerts"), 1) << "the idle node's XID alerts no job";
}

// A straggler on GPU 3 whose NVLink replay errors grew two minutes before it fell behind: the
// straggler alert names that fault as its likely cause; GPU 6's errors are not its.
TEST_F(GpuFaultAlerts, StragglerOnAGpuWithNvlinkErrorsNamesThemAsLikelyCause) {
  const int64_t t0 = (NowMs() - 60 * kMinuteMs) / kMinuteMs * kMinuteMs;
  ASSERT_NO_FATAL_FAILURE(Register("strag-1", t0 - 10 * kMinuteMs));
  // Baselines, then GPU 3's replay counter grows at minute 3, GPU 6's at minute 2.
  ASSERT_NO_FATAL_FAILURE(PushFaults("n0", t0, "strag-1", 3, "0", "4"));
  ASSERT_NO_FATAL_FAILURE(PushFaults("n1", t0, "strag-1", 6, "0", "0"));
  ASSERT_NO_FATAL_FAILURE(PushFaults("n2", t0 + 2 * kMinuteMs, "strag-1", 6, "0", "5"));
  ASSERT_NO_FATAL_FAILURE(PushFaults("n3", t0 + 3 * kMinuteMs, "strag-1", 3, "0", "900"));
  ASSERT_EQ(Count("SELECT count(*) FROM gpu_fault_events WHERE signal = 'nvlink_replay_errors'"),
            2);

  // ofu's windows: GPU 3 straggles from minute 5 on.
  v1::PushWindowsRequest request;
  request.mutable_position()->set_producer_id("ofu-0-of-1");
  request.mutable_position()->set_sequence(1);
  for (int m = 0; m < 45; ++m) {
    v1::OfuWindow* w = request.add_windows();
    w->mutable_job()->set_cluster("eos");
    w->mutable_job()->set_job_id("strag-1");
    *w->mutable_start_time() = api::UnixMsToTimestamp(t0 + m * kMinuteMs);
    *w->mutable_end_time() = api::UnixMsToTimestamp(t0 + (m + 1) * kMinuteMs);
    w->set_window_s(60);
    w->set_gpu_model("NVIDIA H100 80GB HBM3");
    w->set_ofu(0.4);
    w->set_gpus_reporting(8);
    w->set_gpus_allocated(8);
    w->set_gpu_coverage(1.0);
    w->set_gpu_ofu_median(0.4);
    w->set_finalized(true);
    if (m >= 5) {
      v1::Straggler* s = w->add_stragglers();
      s->mutable_gpu()->set_host(kHost);
      s->mutable_gpu()->set_gpu_index(3);
      s->set_score(0.6);
      s->set_ofu(0.24);
    }
  }
  absl::StatusOr<v1::DeliveryAck> ack = engine_->PushWindows(request);
  ASSERT_TRUE(ack.ok()) << ack.status();
  std::vector<v1::Alert> alerts = Alerts("strag-1");
  ASSERT_EQ(alerts.size(), 1u);
  const v1::Alert& a = alerts[0];
  EXPECT_EQ(a.kind(), v1::ALERT_KIND_STRAGGLER);
  EXPECT_THAT(a.summary(), HasSubstr("likely cause: NVLink"));
  EXPECT_THAT(a.evidence().likely_cause(), HasSubstr(absl::StrCat("on GPU ", kHost, "/3")));
  EXPECT_THAT(a.evidence().likely_cause(), HasSubstr("before the onset"));
  EXPECT_THAT(a.description(), HasSubstr("Likely cause:"));
  ASSERT_EQ(a.evidence().faults_size(), 1) << "GPU 6's errors are not the straggler's";
  EXPECT_EQ(a.evidence().faults(0).gpu().gpu_index(), 3);
  EXPECT_EQ(a.evidence().faults(0).signal(), v1::FAULT_SIGNAL_NVLINK_REPLAY_ERRORS);
  EXPECT_EQ(a.evidence().faults(0).count(), 896);
  // NVLink errors alert nothing by themselves.
  Sweep();
  EXPECT_EQ(Count("SELECT count(*) FROM alerts WHERE kind = 'gpu_fault'"), 0);
}

// A job whose OFU falls 2.5x at minute 120, two minutes after XID 79 on its GPU 5: the
// regression alert names the XID as its likely cause.
TEST_F(GpuFaultAlerts, RegressionAfterAnXidNamesItAsLikelyCause) {
  const int64_t t0 = (NowMs() - 210 * kMinuteMs) / kMinuteMs * kMinuteMs;
  ASSERT_NO_FATAL_FAILURE(Register("drop-1", t0));
  ASSERT_NO_FATAL_FAILURE(PushFaults("d0", t0 + kMinuteMs, "drop-1", 5, "0"));
  ASSERT_NO_FATAL_FAILURE(PushFaults("d1", t0 + 118 * kMinuteMs, "drop-1", 5, "79"));
  v1::PushWindowsRequest request;
  request.mutable_position()->set_producer_id("ofu-0-of-1");
  request.mutable_position()->set_sequence(1);
  for (int m = 0; m < 200; ++m) {
    const double ramp = m < 8 ? 0.1 + 0.9 * m / 8.0 : 1.0;
    v1::OfuWindow* w = request.add_windows();
    w->mutable_job()->set_cluster("eos");
    w->mutable_job()->set_job_id("drop-1");
    *w->mutable_start_time() = api::UnixMsToTimestamp(t0 + m * kMinuteMs);
    *w->mutable_end_time() = api::UnixMsToTimestamp(t0 + (m + 1) * kMinuteMs);
    w->set_window_s(60);
    w->set_gpu_model("NVIDIA H100 80GB HBM3");
    w->set_ofu(0.5 * ramp * (1.0 + 0.02 * std::sin(m * 1.3)) * (m >= 120 ? 0.4 : 1.0));
    w->set_gpus_reporting(8);
    w->set_gpus_allocated(8);
    w->set_gpu_coverage(1.0);
    w->set_gpu_ofu_median(w->ofu());
    w->set_warmup(m < 8);
    w->set_finalized(true);
  }
  absl::StatusOr<v1::DeliveryAck> ack = engine_->PushWindows(request);
  ASSERT_TRUE(ack.ok()) << ack.status();
  std::vector<v1::Alert> alerts = Alerts("drop-1");
  ASSERT_EQ(alerts.size(), 1u);
  EXPECT_EQ(alerts[0].kind(), v1::ALERT_KIND_REGRESSION_IN_JOB);
  EXPECT_THAT(alerts[0].summary(), HasSubstr("likely cause: XID 79 (GPU has fallen off the bus"));
  EXPECT_THAT(alerts[0].evidence().likely_cause(), HasSubstr("2 minutes before the onset"));
  ASSERT_GE(alerts[0].evidence().faults_size(), 1);
  EXPECT_EQ(alerts[0].evidence().faults(0).xid(), 79);
  EXPECT_EQ(alerts[0].evidence().faults(0).gpu().gpu_index(), 5);
}

// With goodput-ofu and goodput-alerting running: a job that meets XID 79 and fails ten minutes
// later has an end report listing the fault (time, GPU, code, meaning) and naming it as the
// likely cause of the failure, with GPU-fault advice; goodputctl prints them.
TEST_F(GpuFaultAlerts, FailedJobsReportListsItsFaultsAndNamesTheLikelyCause) {
  ASSERT_NO_FATAL_FAILURE(goodput::testing::StartRedis(&redis_));
  absl::StatusOr<int> ofu_port = goodput::testing::FreePort();
  absl::StatusOr<int> alerting_port = goodput::testing::FreePort();
  ASSERT_TRUE(ofu_port.ok() && alerting_port.ok());
  ASSERT_NO_FATAL_FAILURE(goodput::testing::StartService(
      {.binary = goodput::testing::BuiltBinary("services/ofu/goodput-ofu"),
       .config_yaml =
           absl::StrCat(goodput::testing::PostgresConfigYaml(*pg_),
                        goodput::testing::RedisConfigYaml(*redis_), "grpc:\n  port: ", *ofu_port,
                        "\nofu:\n  poll_interval_s: 0.1\n  idle_flush_s: 1\n"
                        "  allowed_lateness_s: 2\n"
                        "  forward:\n    alerting_address: \"127.0.0.1:",
                        *alerting_port, "\"\n")},
      &ofu_));
  ASSERT_NO_FATAL_FAILURE(goodput::testing::StartService(
      {.binary = goodput::testing::BuiltBinary("services/alerting/goodput-alerting"),
       .config_yaml = absl::StrCat(goodput::testing::PostgresConfigYaml(*pg_),
                                   goodput::testing::RedisConfigYaml(*redis_),
                                   "grpc:\n  port: ", *alerting_port,
                                   "\nalerting:\n  sweep_interval_s: 1\n"
                                   "  reports: {ofu_address: \"127.0.0.1:",
                                   *ofu_port, "\"}\n")},
      &alerting_));

  const int64_t end = (NowMs() - 2 * kMinuteMs) / kMinuteMs * kMinuteMs;
  const int64_t start = end - 20 * kMinuteMs;
  ASSERT_NO_FATAL_FAILURE(Register("fail-1", start));
  // Twenty minutes of the node's telemetry every 10 s; XID 79 on GPU 3 from minute 10 on.
  const std::string clean = goodput::testing::DcgmExporterText(kHost, "fail-1");
  for (int i = 0; i < 120; ++i) {
    const int64_t t = start + i * 10'000;
    std::string body = clean;
    absl::StrAppend(
        &body, "# TYPE DCGM_FI_DEV_XID_ERRORS gauge\n",
        DcgmExporterLine(kHost, "fail-1", 3, "DCGM_FI_DEV_XID_ERRORS", i >= 60 ? "79" : "0"));
    v1::PushExpositionRequest request;
    request.set_batch_id(absl::StrCat("f", i));
    request.set_cluster("eos");
    request.set_scrape_time_unix_ms(t);
    request.set_body(body);
    grpc::ClientContext ctx;
    ctx.set_deadline(goodput::testing::Deadline());
    v1::PushExpositionResponse response;
    ASSERT_TRUE(ingest_stub_->PushExposition(&ctx, request, &response).ok());
  }
  ASSERT_NO_FATAL_FAILURE(End("fail-1", end, v1::JOB_STATE_FAILED));

  auto reports = v1::ReportService::NewStub(alerting_->Channel());
  v1::JobReport report;
  ASSERT_TRUE(PollUntil(
      [&] {
        grpc::ClientContext ctx;
        ctx.set_deadline(goodput::testing::Deadline());
        v1::GetJobReportRequest request;
        request.mutable_job()->set_cluster("eos");
        request.mutable_job()->set_job_id("fail-1");
        v1::GetJobReportResponse response;
        if (!reports->GetJobReport(&ctx, request, &response).ok()) return false;
        report = response.report();
        return report.faults_size() > 0;
      },
      absl::Seconds(120), absl::Milliseconds(200)))
      << alerting_->process().LogTail() << "\nofu:\n"
      << ofu_->process().LogTail();
  ASSERT_EQ(report.faults_size(), 1);
  EXPECT_EQ(report.faults(0).xid(), 79);
  EXPECT_EQ(report.faults(0).xid_meaning(), "GPU has fallen off the bus");
  EXPECT_EQ(report.faults(0).gpu().host(), kHost);
  EXPECT_EQ(report.faults(0).gpu().gpu_index(), 3);
  EXPECT_EQ(api::TimestampToUnixMs(report.faults(0).time()), start + 600'000);
  EXPECT_EQ(report.summary().fault_count(), 1);
  EXPECT_THAT(report.failure_cause(), HasSubstr("XID 79 (GPU has fallen off the bus"));
  EXPECT_THAT(report.failure_cause(), HasSubstr("10 minutes before the job ended"));
  ASSERT_GE(report.advice_size(), 1);
  EXPECT_EQ(report.advice(0).kind(), v1::ADVICE_KIND_GPU_FAULT);
  EXPECT_THAT(report.advice(0).text(), HasSubstr("hardware or driver fault"));

  absl::StatusOr<goodput::testing::ProgramResult> ctl = goodput::testing::RunProgram(
      {goodput::testing::BuiltBinary("tools/goodputctl/goodputctl").string(), "report",
       "eos/fail-1"},
      {{"GOODPUT_TOKEN", ""}, {"GOODPUT_ALERTING_ADDR", alerting_->grpc_address()}});
  ASSERT_TRUE(ctl.ok()) << ctl.status();
  EXPECT_EQ(ctl->exit.exit_code, 0) << ctl->output;
  EXPECT_THAT(ctl->output, HasSubstr("failure cause"));
  EXPECT_THAT(ctl->output, HasSubstr("XID 79 GPU has fallen off the bus (hardware)"));
}

// Concurrent batches that carry fault readings of the same GPUs, each new to ingest and each
// batch listing them in another order (a fleet's agents starting together): every batch is
// stored, none fails on a deadlock, and each GPU has one state row. ingest locks the batch's
// GPU state rows in one order (sorted keys, created in that order too).
TEST_F(GpuFaultAlerts, ConcurrentBatchesOfNewGpusNeverDeadlock) {
  constexpr int kStreams = 6, kRounds = 8, kGpus = 48;
  const int64_t t0 = NowMs() - 30 * kMinuteMs;
  std::atomic<int> failures{0};
  std::string errors;
  absl::Mutex mu;
  for (int round = 0; round < kRounds; ++round) {
    std::vector<std::thread> threads;
    for (int stream = 0; stream < kStreams; ++stream) {
      threads.emplace_back([&, round, stream] {
        v1::PushSamplesRequest batch;
        batch.set_batch_id(absl::StrCat("r", round, "-s", stream));
        batch.set_cluster("eos");
        for (int i = 0; i < kGpus; ++i) {
          // Stream s walks the GPUs from its own starting point, half of them backwards.
          const int g =
              stream % 2 == 0 ? (i + stream * 7) % kGpus : (kGpus - 1 - i + stream) % kGpus;
          v1::GpuSample* s = batch.add_samples();
          s->mutable_gpu()->set_host(absl::StrCat("race-", round, "-", g / 8));
          s->mutable_gpu()->set_gpu_index(g % 8);
          s->set_time_unix_ms(t0 + stream * 1000);
          s->set_gpu_model("NVIDIA H100 80GB HBM3");
          s->set_sm_clock_mhz(1755);
          v1::GpuFaultReading* f = s->add_faults();
          f->set_signal(v1::FAULT_SIGNAL_PCIE_REPLAYS);
          f->set_value(stream);
        }
        grpc::ClientContext ctx;
        ctx.set_deadline(goodput::testing::Deadline());
        v1::PushSamplesResponse response;
        auto writer = ingest_stub_->PushSamples(&ctx, &response);
        writer->Write(batch);
        writer->WritesDone();
        grpc::Status status = writer->Finish();
        if (!status.ok() || response.stored_count() != kGpus) {
          failures.fetch_add(1);
          absl::MutexLock lock(&mu);
          absl::StrAppend(&errors, status.error_message(), "; ");
        }
      });
    }
    for (std::thread& t : threads) t.join();
  }
  EXPECT_EQ(failures.load(), 0) << errors << ingest_->process().LogTail();
  EXPECT_EQ(Count("SELECT count(*) FROM gpu_fault_state WHERE gpu_key LIKE 'race-%'"),
            kRounds * kGpus);
  EXPECT_EQ(Count("SELECT count(*) FROM samples WHERE host LIKE 'race-%'"),
            kRounds * kStreams * kGpus);
}

}  // namespace
}  // namespace goodput::alerting
