// goodput-mfu reconciling framework MFU with OFU, as a real process on a real PostgreSQL:
// ofu's window pushes are applied exactly once across retries and restarts; the paper's three
// documented cases replayed through the API get their verdicts and causes; a late report
// revises the reconciliation; the fleet report on a small known fleet matches statistics
// computed by hand; divergence events reach alerting in commit order and are caught up after
// alerting was down or lost its state.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "goodput/v1/alert.grpc.pb.h"
#include "goodput/v1/mfu.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/support/free_port.h"
#include "tests/support/ordered_receiver.h"
#include "tests/support/postgres_server.h"
#include "tests/support/service_process.h"
#include "tests/support/test_steps.h"

namespace goodput::testing {
namespace {

namespace v1 = ::goodput::v1;

constexpr char kGb200[] = "NVIDIA GB200";
constexpr double kGb200Bf16PeakTflops = 2500.0;  // 148 x 8192 x 2062 MHz, rounded below
constexpr int64_t kT0 = 1'780'000'020;           // a minute boundary

// Polls `done` until it holds or `timeout` passes.
bool WaitFor(const std::function<bool()>& done, absl::Duration timeout = absl::Seconds(30)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (done()) return true;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return done();
}

template <class T>
std::chrono::system_clock::time_point Deadline(T seconds) {
  return std::chrono::system_clock::now() + std::chrono::seconds(seconds);
}

v1::OfuWindow Window(const std::string& job_id, int64_t start_s, double ofu, int gpus = 8,
                     int revision = 0) {
  v1::OfuWindow w;
  w.mutable_job()->set_cluster("eos");
  w.mutable_job()->set_job_id(job_id);
  w.mutable_start_time()->set_seconds(start_s);
  w.mutable_end_time()->set_seconds(start_s + 60);
  w.set_window_s(60);
  w.set_gpu_model(kH100);
  w.set_ofu(ofu);
  w.set_ofu_ci95_low(ofu - 0.001);
  w.set_ofu_ci95_high(ofu + 0.001);
  w.set_gpus_reporting(gpus);
  w.set_gpus_allocated(gpus);
  w.set_gpu_coverage(1.0);
  w.set_sample_count(gpus * 6);
  w.set_revision(revision);
  return w;
}

v1::MfuReport Report(const std::string& id, const std::string& job_id, int64_t start_s,
                     int64_t end_s) {
  v1::MfuReport r;
  r.set_report_id(id);
  r.mutable_job()->set_cluster("eos");
  r.mutable_job()->set_job_id(job_id);
  r.mutable_interval()->mutable_start_time()->set_seconds(start_s);
  r.mutable_interval()->mutable_end_time()->set_seconds(end_s);
  r.set_precision(v1::PRECISION_BF16);
  r.set_framework("megatron-lm");
  return r;
}

// An alerting stand-in: applies divergence pushes in order per producer as the API says,
// remembers every event it applied, and can forget its state (a restart without storage).
class FakeAlerting final : public v1::AlertService::CallbackService {
 public:
  grpc::ServerUnaryReactor* PushDivergenceEvents(grpc::CallbackServerContext* ctx,
                                                 const v1::PushDivergenceEventsRequest* req,
                                                 v1::PushDivergenceEventsResponse* resp) override {
    absl::MutexLock lock(&mu_);
    if (AcceptInOrder(watermark_, req->position(), resp->mutable_ack())) {
      for (const v1::DivergenceEvent& e : req->events()) {
        events_.push_back(e);
        sequences_.push_back(req->position().sequence());
      }
    }
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  std::vector<v1::DivergenceEvent> Events() {
    absl::MutexLock lock(&mu_);
    return events_;
  }
  std::vector<int64_t> Sequences() {
    absl::MutexLock lock(&mu_);
    return sequences_;
  }
  void Forget() {
    absl::MutexLock lock(&mu_);
    watermark_.clear();
    events_.clear();
    sequences_.clear();
  }

 private:
  absl::Mutex mu_;
  std::map<std::string, int64_t> watermark_;
  std::vector<v1::DivergenceEvent> events_;
  std::vector<int64_t> sequences_;
};

struct AlertingServer {
  AlertingServer(int port, FakeAlerting* service) {
    grpc::ServerBuilder b;
    b.AddListeningPort(absl::StrCat("127.0.0.1:", port), grpc::InsecureServerCredentials());
    b.RegisterService(service);
    server = b.BuildAndStart();
  }
  ~AlertingServer() { server->Shutdown(std::chrono::system_clock::now()); }
  std::unique_ptr<grpc::Server> server;
};

class MfuReconciliation : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(StartPostgres(&pg_));
    absl::StatusOr<int> port = FreePort();
    ASSERT_TRUE(port.ok());
    alerting_port_ = *port;
    StartMfu();
  }

  void StartMfu() {
    mfu_.reset();
    ASSERT_NO_FATAL_FAILURE(StartService(
        {.binary = BuiltBinary("services/mfu/goodput-mfu"),
         .config_yaml = absl::StrCat(PostgresConfigYaml(*pg_),
                                     "mfu:\n  reconcile:\n    poll_interval_s: 0.1\n  forward:\n",
                                     "    alerting_address: \"127.0.0.1:", alerting_port_, "\"\n",
                                     "    retry_backoff_s: 0.2\n    timeout_s: 2\n"),
         .extra_args = MigrateArgs()},
        &mfu_));
    stub_ = v1::MfuService::NewStub(mfu_->Channel());
  }

  void Sql(const std::string& sql) {
    absl::Status s = pg_->Execute("goodput", sql);
    ASSERT_TRUE(s.ok()) << s << "\n" << sql;
  }
  std::string Value(const std::string& sql) { return QueryScalar(*pg_, sql); }

  // A job that ran [start_s, end_s) on `gpus` GPUs of `model`.
  void RegisterJob(const std::string& job_id, const std::string& model, int gpus,
                   int64_t start_s = kT0, int64_t end_s = kT0 + 3600) {
    Sql(
        absl::StrCat("INSERT INTO jobs (cluster, job_id, gpu_model, gpu_count, start_time, "
                     "end_time, workload_fingerprint) VALUES ('eos', '",
                     job_id, "', '", model, "', ", gpus, ", to_timestamp(", start_s,
                     "), to_timestamp(", end_s, "), 'wf-", job_id, "')"));
  }

  v1::DeliveryAck Push(const std::string& producer, int64_t seq, int64_t prev,
                       const std::vector<v1::OfuWindow>& windows) {
    v1::PushOfuWindowsRequest req;
    req.mutable_position()->set_producer_id(producer);
    req.mutable_position()->set_sequence(seq);
    req.mutable_position()->set_previous_sequence(prev);
    for (const auto& w : windows) *req.add_windows() = w;
    v1::PushOfuWindowsResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline(30));
    grpc::Status s = stub_->PushOfuWindows(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp.ack();
  }

  // Pushes `windows` as the next ofu commit.
  void PushNext(const std::vector<v1::OfuWindow>& windows) {
    v1::DeliveryAck ack = Push("ofu-0-of-1", ofu_seq_ + 1, ofu_seq_, windows);
    ASSERT_FALSE(ack.gap_detected());
    ++ofu_seq_;
  }

  void ReportOk(const v1::MfuReport& report) {
    v1::ReportMfuRequest req;
    *req.mutable_report() = report;
    v1::ReportMfuResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline(30));
    grpc::Status s = stub_->ReportMfu(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }

  grpc::Status Reconciliation(const std::string& job_id, v1::GetReconciliationResponse* out,
                              int resolution_s = 0) {
    v1::GetReconciliationRequest req;
    req.mutable_job()->set_cluster("eos");
    req.mutable_job()->set_job_id(job_id);
    req.set_resolution_s(resolution_s);
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline(30));
    return stub_->GetReconciliation(&ctx, req, out);
  }

  // `n` one-minute windows from kT0 with OFU `ofu` (±1% wobble), and reports of `mfu` over
  // each one, made by `make(i)` (the report's measurement form).
  void Replay(const std::string& job_id, int n, double ofu,
              const std::function<void(v1::MfuReport&)>& measure, int gpus = 8) {
    std::vector<v1::OfuWindow> windows;
    for (int i = 0; i < n; ++i) {
      windows.push_back(Window(job_id, kT0 + 60 * i, ofu * (1 + 0.01 * std::sin(i)), gpus));
    }
    PushNext(windows);
    for (int i = 0; i < n; ++i) {
      v1::MfuReport r =
          Report(absl::StrCat(job_id, "-", i), job_id, kT0 + 60 * i, kT0 + 60 * (i + 1));
      measure(r);
      ReportOk(r);
    }
  }

  std::unique_ptr<PostgresServer> pg_;
  std::unique_ptr<ServiceProcess> mfu_;
  std::unique_ptr<v1::MfuService::Stub> stub_;
  int alerting_port_ = 0;
  int64_t ofu_seq_ = 0;
};

TEST_F(MfuReconciliation, OfuWindowPushesApplyExactlyOnceAcrossRetriesAndRestarts) {
  RegisterJob("w1", kH100, 8);
  std::vector<v1::OfuWindow> first = {Window("w1", kT0, 0.30), Window("w1", kT0 + 60, 0.31)};
  v1::DeliveryAck ack = Push("ofu-0-of-1", 5, 0, first);
  EXPECT_FALSE(ack.duplicate());
  EXPECT_FALSE(ack.gap_detected());
  EXPECT_EQ(ack.watermark_sequence(), 5);

  // A retry of the same push is acknowledged without being applied again.
  ack = Push("ofu-0-of-1", 5, 0, {Window("w1", kT0, 0.99)});
  EXPECT_TRUE(ack.duplicate());
  EXPECT_EQ(Value("SELECT ofu FROM mfu_ofu_windows WHERE job_id = 'w1' AND revision = 0 "
                  "ORDER BY start_time LIMIT 1"),
            "0.3");

  // A push that skips a commit is refused as a gap, applying nothing.
  ack = Push("ofu-0-of-1", 9, 7, {Window("w1", kT0 + 120, 0.32)});
  EXPECT_TRUE(ack.gap_detected());
  EXPECT_EQ(ack.watermark_sequence(), 5);
  EXPECT_EQ(Value("SELECT count(*) FROM mfu_ofu_windows WHERE job_id = 'w1'"), "2");

  // The watermark survives a restart: ofu's catch-up re-sends from its own record and the
  // commits mfu already holds count once.
  StartMfu();
  ack = Push("ofu-0-of-1", 5, 0, first);
  EXPECT_TRUE(ack.duplicate());
  // A revision of a window replaces it; an older revision arriving later does not.
  ack = Push("ofu-0-of-1", 7, 5, {Window("w1", kT0, 0.35, 8, 2), Window("w1", kT0 + 120, 0.32)});
  EXPECT_FALSE(ack.duplicate());
  EXPECT_EQ(ack.watermark_sequence(), 7);
  ack = Push("ofu-0-of-1", 9, 7, {Window("w1", kT0, 0.10, 8, 1)});
  EXPECT_EQ(ack.watermark_sequence(), 9);
  EXPECT_EQ(Value("SELECT count(*) FROM mfu_ofu_windows WHERE job_id = 'w1'"), "3");
  EXPECT_EQ(Value("SELECT ofu FROM mfu_ofu_windows WHERE job_id = 'w1' AND start_time = "
                  "to_timestamp(" +
                  std::to_string(kT0) + ")"),
            "0.35");
  // Another producer (an ofu shard) has its own watermark.
  ack = Push("ofu-1-of-2", 1, 0, {Window("w1", kT0 + 180, 0.33)});
  EXPECT_FALSE(ack.gap_detected());
  EXPECT_EQ(ack.watermark_sequence(), 1);

  v1::GetReconciliationResponse rec;
  ASSERT_TRUE(Reconciliation("w1", &rec).ok());
  ASSERT_EQ(rec.points_size(), 4);
  EXPECT_NEAR(rec.points(0).ofu(), 0.35, 1e-12);
  EXPECT_FALSE(rec.points(0).has_app_mfu());

  // A push naming no producer is refused with the field.
  v1::PushOfuWindowsRequest bad;
  bad.mutable_position()->set_sequence(1);
  v1::PushOfuWindowsResponse resp;
  grpc::ClientContext ctx;
  grpc::Status s = stub_->PushOfuWindows(&ctx, bad, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("producer_id"), std::string::npos) << s.error_message();
}

TEST_F(MfuReconciliation, ThePapersThreeCasesGetTheirVerdictsAndCauses) {
  // 288-GPU DeepSeek-style MoE: MFU 54.27% as model TFLOP/s per GPU, OFU 25.58%.
  RegisterJob("moe", kH100, 288);
  Replay(
      "moe", 20, 0.2558,
      [](v1::MfuReport& r) { r.set_model_tflops_per_gpu(0.5427 * kH100Bf16PeakTflops); }, 288);
  // 8B hybrid: MFU 24.51% as total TFLOP/s over 8 GPUs, OFU 15.56%.
  RegisterJob("hybrid", kH100, 8);
  Replay("hybrid", 20, 0.1556, [](v1::MfuReport& r) {
    r.mutable_total_throughput()->set_total_tflops(0.2451 * kH100Bf16PeakTflops * 8);
    r.mutable_total_throughput()->set_gpu_count(8);
  });
  // 8B world model on 256 GB200 with full activation checkpointing: MFU 26% as FLOPs per
  // step and step time, OFU 34%.
  RegisterJob("world", kGb200, 256);
  Replay(
      "world", 20, 0.34,
      [](v1::MfuReport& r) {
        r.mutable_step_flops()->set_flops_per_step(0.26 * kGb200Bf16PeakTflops * 1e12 * 256 * 12.0);
        r.mutable_step_flops()->set_step_time_s(12.0);
        r.mutable_step_flops()->set_gpu_count(256);
        r.set_activation_checkpointing(v1::ACTIVATION_CHECKPOINTING_FULL);
      },
      256);

  struct Case {
    std::string job;
    v1::Verdict verdict;
    double ratio;
    v1::DivergenceCause cause;
    double app_mfu, ofu;
  };
  for (const Case& c : {
           Case{"moe", v1::VERDICT_APP_FLOPS_OVERCOUNT, 2.12,
                v1::DIVERGENCE_CAUSE_LATENT_PROJECTION_MOE, 0.5427, 0.2558},
           Case{"hybrid", v1::VERDICT_APP_FLOPS_OVERCOUNT, 1.575,
                v1::DIVERGENCE_CAUSE_LAYER_TYPES_AS_ATTENTION_MLP, 0.2451, 0.1556},
           Case{"world", v1::VERDICT_APP_FLOPS_UNDERCOUNT, 0.765,
                v1::DIVERGENCE_CAUSE_RECOMPUTE_NOT_COUNTED, 0.26, 0.34},
       }) {
    SCOPED_TRACE(c.job);
    v1::GetReconciliationResponse rec;
    grpc::Status s = Reconciliation(c.job, &rec);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(rec.job().job_id(), c.job);
    EXPECT_EQ(rec.verdict().verdict(), c.verdict) << rec.verdict().reason();
    EXPECT_NEAR(rec.verdict().ratio(), c.ratio, 0.01);
    EXPECT_NEAR(rec.verdict().correction_factor(), 1 / c.ratio, 0.01);
    EXPECT_NEAR(rec.verdict().app_mfu_mean(), c.app_mfu, 0.002);
    EXPECT_NEAR(rec.verdict().ofu_mean(), c.ofu, 0.002);
    EXPECT_EQ(rec.verdict().windows_used(), 20);
    ASSERT_GT(rec.verdict().causes_size(), 0);
    EXPECT_EQ(rec.verdict().causes(0).cause(), c.cause);
    EXPECT_FALSE(rec.verdict().causes(0).explanation().empty());
    EXPECT_FALSE(rec.verdict().reason().empty());
    ASSERT_EQ(rec.points_size(), 20);
    for (const v1::ReconciliationPoint& p : rec.points()) {
      ASSERT_TRUE(p.has_app_mfu());
      EXPECT_NEAR(p.app_mfu(), c.app_mfu, 1e-6);
      EXPECT_NEAR(p.difference_pp(), (p.app_mfu() - p.ofu()) * 100, 1e-9);
      EXPECT_NEAR(p.ratio(), p.app_mfu() / p.ofu(), 1e-9);
      EXPECT_EQ(p.report_count(), 1);
      EXPECT_EQ(p.verdict(), c.verdict);
    }
    ASSERT_GT(rec.intervals_size(), 0);
    EXPECT_EQ(rec.intervals(0).divergence().verdict(), c.verdict);
    EXPECT_EQ(rec.framework(), "megatron-lm");
  }
  v1::GetReconciliationResponse world;
  ASSERT_TRUE(Reconciliation("world", &world).ok());
  EXPECT_EQ(world.activation_checkpointing(), v1::ACTIVATION_CHECKPOINTING_FULL);

  // Downsampled to 5-minute buckets.
  v1::GetReconciliationResponse coarse;
  ASSERT_TRUE(Reconciliation("moe", &coarse, 300).ok());
  ASSERT_EQ(coarse.points_size(), 5);
  EXPECT_NEAR(coarse.points(1).app_mfu(), 0.5427, 1e-6);
  EXPECT_EQ(coarse.points(1).report_count(), 5);

  v1::GetReconciliationResponse unknown;
  EXPECT_EQ(Reconciliation("no-such-job", &unknown).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(MfuReconciliation, LateReportsAndWindowsReviseTheStoredReconciliation) {
  RegisterJob("late", kH100, 8);
  std::vector<v1::OfuWindow> windows;
  for (int i = 0; i < 20; ++i) windows.push_back(Window("late", kT0 + 60 * i, 0.2558));
  PushNext(windows);
  // Only the first three windows have reports yet: not enough to judge.
  for (int i = 0; i < 3; ++i) {
    v1::MfuReport r = Report(absl::StrCat("late-", i), "late", kT0 + 60 * i, kT0 + 60 * (i + 1));
    r.set_mfu(0.5427);
    ReportOk(r);
  }
  v1::GetReconciliationResponse rec;
  ASSERT_TRUE(Reconciliation("late", &rec).ok());
  EXPECT_EQ(rec.verdict().verdict(), v1::VERDICT_INSUFFICIENT_EVIDENCE);
  EXPECT_EQ(rec.verdict().windows_used(), 3);

  // The rest arrives late, in one stream.
  v1::StreamMfuReportsRequest batch;
  batch.set_batch_id("late-rest");
  for (int i = 3; i < 20; ++i) {
    v1::MfuReport r = Report(absl::StrCat("late-", i), "late", kT0 + 60 * i, kT0 + 60 * (i + 1));
    r.set_mfu(0.5427);
    *batch.add_reports() = r;
  }
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline(30));
    v1::StreamMfuReportsResponse resp;
    auto writer = stub_->StreamMfuReports(&ctx, &resp);
    ASSERT_TRUE(writer->Write(batch));
    writer->WritesDone();
    ASSERT_TRUE(writer->Finish().ok());
    EXPECT_EQ(resp.stored_count(), 17);
  }
  ASSERT_TRUE(Reconciliation("late", &rec).ok());
  EXPECT_EQ(rec.verdict().verdict(), v1::VERDICT_APP_FLOPS_OVERCOUNT);
  EXPECT_EQ(rec.verdict().windows_used(), 20);

  // ofu revises the windows (late samples): OFU now matches the framework.
  std::vector<v1::OfuWindow> revised;
  for (int i = 0; i < 20; ++i) revised.push_back(Window("late", kT0 + 60 * i, 0.53, 8, 1));
  PushNext(revised);
  ASSERT_TRUE(Reconciliation("late", &rec).ok());
  EXPECT_EQ(rec.verdict().verdict(), v1::VERDICT_CONSISTENT) << rec.verdict().reason();
  // Stored, not only computed on read: the background pass leaves nothing pending.
  EXPECT_TRUE(WaitFor([&] { return Value("SELECT count(*) FROM mfu_reconcile_pending") == "0"; }));
  EXPECT_EQ(Value("SELECT verdict FROM mfu_job_reconciliations WHERE job_id = 'late'"),
            std::to_string(v1::VERDICT_CONSISTENT));
}

TEST_F(MfuReconciliation, TheFleetReportMatchesHandComputedStatistics) {
  // Five jobs with both figures (percent): A 30/28, B 40/37, C 20/22, D 54.27/25.58 (the MoE
  // overcount), E 25/27. F ran without any figure, G with OFU but no reports.
  struct Job {
    std::string id;
    int gpus;
    double mfu, ofu;
  };
  const std::vector<Job> jobs = {{"A", 8, 0.30, 0.28},
                                 {"B", 16, 0.40, 0.37},
                                 {"C", 64, 0.20, 0.22},
                                 {"D", 256, 0.5427, 0.2558},
                                 {"E", 1024, 0.25, 0.27}};
  for (const Job& j : jobs) {
    RegisterJob(j.id, kH100, j.gpus);
    std::vector<v1::OfuWindow> windows;
    for (int i = 0; i < 10; ++i) windows.push_back(Window(j.id, kT0 + 60 * i, j.ofu, j.gpus));
    PushNext(windows);
    for (int i = 0; i < 10; ++i) {
      v1::MfuReport r = Report(absl::StrCat(j.id, "-", i), j.id, kT0 + 60 * i, kT0 + 60 * (i + 1));
      r.set_mfu(j.mfu);
      ReportOk(r);
    }
  }
  RegisterJob("F", kH100, 512);
  RegisterJob("G", kH100, 8);
  PushNext({Window("G", kT0, 0.3, 8)});

  v1::GetFleetReportRequest req;
  req.mutable_time_range()->mutable_start_time()->set_seconds(kT0 - 3600);
  req.mutable_time_range()->mutable_end_time()->set_seconds(kT0 + 7200);
  req.add_gpu_count_group_lower_bounds(1);
  req.add_gpu_count_group_lower_bounds(64);
  req.add_gpu_count_group_lower_bounds(768);
  req.set_include_jobs(true);
  req.set_page_size(3);
  v1::GetFleetReportResponse report;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline(30));
    grpc::Status s = stub_->GetFleetReport(&ctx, req, &report);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  // By hand: errors |d| = 2, 3, 2, 28.69, 2 pp; MAE 7.538; r over the five 0.3234244;
  // without D 0.9844952.
  const v1::FleetStats& all = report.overall();
  EXPECT_EQ(all.job_count(), 5);
  EXPECT_NEAR(all.mae_pp(), 7.538, 1e-6);
  ASSERT_TRUE(all.has_pearson_r());
  EXPECT_NEAR(all.pearson_r(), 0.3234244, 1e-6);
  EXPECT_NEAR(all.share_within_10pp(), 0.8, 1e-12);
  EXPECT_NEAR(all.share_beyond_20pp(), 0.2, 1e-12);
  EXPECT_NEAR(all.mfu_mean(), 0.33854, 1e-6);
  EXPECT_NEAR(all.ofu_mean(), 0.27916, 1e-6);
  EXPECT_EQ(report.miscount_job_count(), 1);
  EXPECT_EQ(report.excluding_miscounts().job_count(), 4);
  ASSERT_TRUE(report.excluding_miscounts().has_pearson_r());
  EXPECT_NEAR(report.excluding_miscounts().pearson_r(), 0.9844952, 1e-6);
  EXPECT_NEAR(report.excluding_miscounts().mae_pp(), 2.25, 1e-6);

  ASSERT_EQ(report.by_gpu_count_size(), 3);
  EXPECT_EQ(report.by_gpu_count(0).job_count(), 2);  // A, B
  EXPECT_EQ(report.by_gpu_count(0).max_gpu_count(), 63);
  EXPECT_NEAR(report.by_gpu_count(0).mae_pp(), 2.5, 1e-6);
  EXPECT_EQ(report.by_gpu_count(1).job_count(), 2);  // C, D
  EXPECT_NEAR(report.by_gpu_count(1).mae_pp(), (2 + 28.69) / 2, 1e-6);
  EXPECT_EQ(report.by_gpu_count(2).job_count(), 1);  // E
  EXPECT_EQ(report.by_gpu_count(2).max_gpu_count(), 0);

  // Every job ran one hour: GPU-hours 8+16+64+256+1024+512+8 in all, F has no figure, G only
  // OFU.
  EXPECT_NEAR(report.coverage().gpu_hours_total(), 1888, 1e-6);
  EXPECT_NEAR(report.coverage().gpu_hours_with_ofu(), 1376, 1e-6);
  EXPECT_NEAR(report.coverage().gpu_hours_with_app_mfu(), 1368, 1e-6);
  EXPECT_NEAR(report.coverage().app_mfu_share(), 1368.0 / 1888, 1e-9);

  ASSERT_EQ(report.jobs_size(), 3);
  EXPECT_EQ(report.jobs(0).job().job_id(), "A");
  EXPECT_EQ(report.jobs(0).gpu_count(), 8);
  EXPECT_FALSE(report.next_page_token().empty());
  req.set_page_token(report.next_page_token());
  v1::GetFleetReportResponse page2;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->GetFleetReport(&ctx, req, &page2).ok());
  }
  ASSERT_EQ(page2.jobs_size(), 2);
  EXPECT_EQ(page2.jobs(0).job().job_id(), "D");
  EXPECT_EQ(page2.jobs(0).verdict(), v1::VERDICT_APP_FLOPS_OVERCOUNT);
  EXPECT_EQ(page2.jobs(0).top_cause(), v1::DIVERGENCE_CAUSE_LATENT_PROJECTION_MOE);
  EXPECT_TRUE(page2.next_page_token().empty());

  // Filters: at least 64 GPUs.
  v1::GetFleetReportRequest big = req;
  big.clear_page_token();
  big.set_min_gpu_count(64);
  v1::GetFleetReportResponse big_report;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->GetFleetReport(&ctx, big, &big_report).ok());
  }
  EXPECT_EQ(big_report.overall().job_count(), 3);

  // A range without an end is refused naming the field.
  v1::GetFleetReportRequest open;
  open.mutable_time_range()->mutable_start_time()->set_seconds(kT0);
  grpc::ClientContext ctx;
  grpc::Status s = stub_->GetFleetReport(&ctx, open, &big_report);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("time_range"), std::string::npos);
}

TEST_F(MfuReconciliation, DivergenceEventsReachAlertingInOrderAndAreCaughtUpAfterOutages) {
  FakeAlerting alerting;
  // Alerting is down while the verdict is decided.
  RegisterJob("ev", kH100, 8);
  Replay("ev", 20, 0.2558, [](v1::MfuReport& r) { r.set_mfu(0.5427); });
  v1::GetReconciliationResponse rec;
  ASSERT_TRUE(Reconciliation("ev", &rec).ok());
  ASSERT_EQ(rec.verdict().verdict(), v1::VERDICT_APP_FLOPS_OVERCOUNT);
  EXPECT_EQ(Value("SELECT count(*) FROM mfu_divergence_events"), "1");

  // It comes back: the event recorded in PostgreSQL is delivered.
  auto server = std::make_unique<AlertingServer>(alerting_port_, &alerting);
  ASSERT_TRUE(WaitFor([&] { return alerting.Events().size() == 1; }));
  v1::DivergenceEvent first = alerting.Events()[0];
  EXPECT_EQ(first.job().job_id(), "ev");
  EXPECT_EQ(first.workload_fingerprint(), "wf-ev");
  ASSERT_TRUE(first.has_verdict());
  EXPECT_EQ(first.verdict().verdict(), v1::VERDICT_APP_FLOPS_OVERCOUNT);
  EXPECT_EQ(first.verdict().causes(0).cause(), v1::DIVERGENCE_CAUSE_LATENT_PROJECTION_MOE);
  EXPECT_EQ(first.interval().start_time().seconds(), kT0);

  // Down again; meanwhile the framework switches to an FP8/BF16 mix, and ofu revises the
  // windows so that the verdict becomes consistent: two more commits of events.
  server.reset();
  v1::MfuReport mixed = Report("ev-mix", "ev", kT0 + 1200, kT0 + 1260);
  mixed.set_mfu(0.30);
  auto* a = mixed.add_precision_mix();
  a->set_precision(v1::PRECISION_BF16);
  a->set_flops_share(0.5);
  auto* b = mixed.add_precision_mix();
  b->set_precision(v1::PRECISION_FP8);
  b->set_flops_share(0.5);
  ReportOk(mixed);
  ASSERT_TRUE(Reconciliation("ev", &rec).ok());
  ASSERT_EQ(rec.precision_switches_size(), 1);
  EXPECT_NEAR(rec.precision_switches(0).peak_tflops_after(), 1319.2, 0.1);
  std::vector<v1::OfuWindow> revised;
  for (int i = 0; i < 20; ++i) revised.push_back(Window("ev", kT0 + 60 * i, 0.53, 8, 1));
  PushNext(revised);
  ASSERT_TRUE(Reconciliation("ev", &rec).ok());
  ASSERT_EQ(rec.verdict().verdict(), v1::VERDICT_CONSISTENT);
  EXPECT_EQ(Value("SELECT count(DISTINCT sequence) FROM mfu_divergence_events"), "3");

  // mfu restarts while alerting is down; alerting returns having lost its state: it reports
  // a gap and is sent everything again, in commit order, each event once.
  StartMfu();
  alerting.Forget();
  server = std::make_unique<AlertingServer>(alerting_port_, &alerting);
  ASSERT_TRUE(WaitFor([&] { return alerting.Events().size() == 3; })) << alerting.Events().size();
  std::vector<v1::DivergenceEvent> events = alerting.Events();
  std::vector<int64_t> seqs = alerting.Sequences();
  EXPECT_TRUE(std::is_sorted(seqs.begin(), seqs.end()));
  EXPECT_EQ(events[0].event_id(), first.event_id());
  EXPECT_TRUE(events[0].has_verdict());
  EXPECT_TRUE(events[1].has_precision_switch());
  EXPECT_EQ(events[1].precision_switch().after_size(), 2);
  ASSERT_TRUE(events[2].has_verdict());
  EXPECT_EQ(events[2].verdict().verdict(), v1::VERDICT_CONSISTENT);
  std::set<std::string> ids;
  for (const auto& e : events) ids.insert(e.event_id());
  EXPECT_EQ(ids.size(), 3u);
  // Nothing more is sent once alerting has everything.
  EXPECT_TRUE(WaitFor([&] {
    return Value("SELECT acked_seq FROM mfu_forward_state WHERE target = 'alerting'") ==
           Value("SELECT max(sequence) FROM mfu_divergence_events");
  }));
  EXPECT_EQ(alerting.Events().size(), 3u);
}

}  // namespace
}  // namespace goodput::testing
