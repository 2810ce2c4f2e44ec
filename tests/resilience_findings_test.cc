// Silent GPUs, hung jobs and jobs that went idle through the real path, against a real
// PostgreSQL: samples stored as ingest stores them (two hosts of four H100s), the ofu consumer
// and its windows, and ofu's forwarding of the committed windows to a real alert engine over
// gRPC. One GPU silent while its neighbours report, and a whole host silent while the other
// reports, are silent_gpu alerts naming the GPU and the host; a collective spinning for more
// than ten minutes is hung, not a regression; GPUs idle after computing are job_idle while the
// job runs; a six-minute checkpoint dip is nothing.

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "goodput/v1/alert.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "services/alerting/alert_config.h"
#include "services/alerting/alert_engine.h"
#include "services/alerting/alerting_service.h"
#include "services/api/api_convert.h"
#include "services/core/ledger.h"
#include "services/ofu/ofu_forwarder.h"
#include "tests/support/free_port.h"
#include "tests/support/ofu_job_fixture.h"

namespace goodput::ofu {
namespace {

namespace v1 = ::goodput::v1;

using ::goodput::testing::kOfuJobStartMs;

// What one GPU did at one sample time; `reports` false: it sent nothing.
struct Activity {
  bool reports = true;
  double tensor = 0.4;
  double sm = 0.8;
  double gr = 0.95;
};

constexpr Activity kComputing{};
constexpr Activity kSilent{.reports = false};
// A collective waiting for a peer: kernels resident (GR engine busy), a few SMs spinning.
constexpr Activity kSpinning{.reports = true, .tensor = 0, .sm = 0.1, .gr = 0.99};
constexpr Activity kIdle{.reports = true, .tensor = 0, .sm = 0, .gr = 0};
constexpr Activity kCheckpoint{.reports = true, .tensor = 0, .sm = 0.01, .gr = 0.02};

class ResilienceFindings : public goodput::testing::OfuJobFixture {
 protected:
  // Samples every 10 s for minutes [0, minutes) of GPUs n1/0..3 and n2/0..3, each as
  // `what(host, gpu, second)`, then the consumer catches up and flushes the job's windows
  // (the job stays running in the jobs table).
  void Feed(int minutes, const std::function<Activity(int host, int gpu, int t_s)>& what) {
    for (int from = 0; from < minutes * 60; from += 600) {  // ten minutes per statement
      std::vector<std::string> values;
      for (int t = from; t < std::min(minutes * 60, from + 600); t += 10) {
        for (int host = 1; host <= 2; ++host) {
          for (int g = 0; g < 4; ++g) {
            const Activity a = what(host, g, t);
            if (!a.reports) continue;
            values.push_back(absl::StrCat(
                "(timestamptz 'epoch' + ", kOfuJobStartMs + int64_t{t} * 1000,
                " * interval '1 millisecond', 'c1', 'n", host, "', ", g, ", 'GPU-", host, g,
                "', (SELECT id FROM jobs), ", a.tensor, ", 1830, ", a.sm, ", ", a.gr, ")"));
          }
        }
      }
      if (values.empty()) continue;
      Sql(
          absl::StrCat("INSERT INTO samples (sample_time, cluster, host, gpu_index, gpu_uuid, "
                       "job, tensor_active, sm_clock_mhz, sm_active, gr_engine_active) VALUES ",
                       absl::StrJoin(values, ",")));
      CatchUp();
    }
    now_ += 3'600'000;  // the job went quiet: the consumer flushes its last windows
    CatchUp();
  }

  // Forwards every committed window to a real alert engine over gRPC, commit by commit, with
  // ofu's alerting target; returns the job's alerts (open or resolved).
  std::vector<v1::Alert> Alerts() {
    alerting::AlertHub hub;
    alerting::AlertEngine engine(pool_.get(), {}, &hub, platform::Logger());
    alerting::AlertServiceImpl alert_service(&engine, &hub);
    auto port = goodput::testing::FreePort();
    EXPECT_TRUE(port.ok());
    grpc::ServerBuilder builder;
    builder.AddListeningPort(absl::StrCat("127.0.0.1:", *port), grpc::InsecureServerCredentials());
    builder.RegisterService(&alert_service);
    std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
    EXPECT_NE(server, nullptr);
    platform::OrderedTarget target = AlertingTarget(
        store_.get(),
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", *port), grpc::InsecureChannelCredentials()),
        "", absl::Seconds(30));
    auto commits = store_->PendingCommits(0, 100'000);
    EXPECT_TRUE(commits.ok()) << commits.status();
    int64_t previous = 0;
    for (int64_t seq : commits.ok() ? *commits : std::vector<int64_t>{}) {
      auto ack = target.push(seq, previous);
      EXPECT_TRUE(ack.ok()) << ack.status();
      EXPECT_FALSE(ack.ok() && ack->gap_detected);
      previous = seq;
    }
    server->Shutdown();
    auto ledger = engine.Ledger("c1", "j1");
    EXPECT_TRUE(ledger.ok()) << ledger.status();
    if (ledger.ok()) ledger_ = *ledger;
    v1::ListAlertsRequest req;
    req.mutable_job()->set_cluster("c1");
    req.mutable_job()->set_job_id("j1");
    auto listed = engine.ListAlerts(req);
    EXPECT_TRUE(listed.ok()) << listed.status();
    if (!listed.ok()) return {};
    return {listed->alerts().begin(), listed->alerts().end()};
  }

  // The job's ledger as the engine replayed it in the last Alerts().
  std::optional<core::JobLedger> ledger_;

  static std::string Describe(const std::vector<v1::Alert>& alerts) {
    std::string out;
    for (const v1::Alert& a : alerts) {
      absl::StrAppend(&out, v1::AlertKind_Name(a.kind()), " ", v1::AlertState_Name(a.state()), ": ",
                      a.summary(), "\n");
    }
    return out;
  }

  static std::vector<const v1::Alert*> OfKind(const std::vector<v1::Alert>& alerts,
                                              v1::AlertKind kind) {
    std::vector<const v1::Alert*> out;
    for (const v1::Alert& a : alerts) {
      if (a.kind() == kind) out.push_back(&a);
    }
    return out;
  }
};

TEST_F(ResilienceFindings, OneGpuSilentWhileItsNeighboursReportIsASilentGpuAlertNamingIt) {
  // GPU n1/2 falls off the bus after minute 9; the other seven GPUs report for 30 minutes.
  Feed(30, [](int host, int g, int t) {
    return host == 1 && g == 2 && t >= 9 * 60 ? kSilent : kComputing;
  });
  const std::vector<v1::Alert> alerts = Alerts();
  const auto silent = OfKind(alerts, v1::ALERT_KIND_SILENT_GPU);
  ASSERT_EQ(silent.size(), 1u) << Describe(alerts);
  const v1::Alert& a = *silent[0];
  EXPECT_EQ(a.state(), v1::ALERT_STATE_FIRING) << Describe(alerts);
  EXPECT_EQ(a.labels().at("gpu"), "n1/2/GPU-12");
  EXPECT_NE(a.summary().find("GPU n1/2/GPU-12 silent since"), std::string::npos) << a.summary();
  EXPECT_NE(a.summary().find("00:08 UTC"), std::string::npos) << a.summary();  // 00:08:50
  ASSERT_EQ(a.gpus_size(), 1);
  EXPECT_EQ(a.gpus(0).host(), "n1");
  EXPECT_EQ(a.gpus(0).gpu_index(), 2);
  EXPECT_EQ(api::TimestampToUnixMs(a.evidence().last_sample_time()), kOfuJobStartMs + 530'000);
  // Its gaps are that alert's: no job-level "GPUs not reporting", no regression.
  EXPECT_TRUE(OfKind(alerts, v1::ALERT_KIND_DATA_QUALITY).empty()) << Describe(alerts);
  EXPECT_TRUE(OfKind(alerts, v1::ALERT_KIND_REGRESSION_IN_JOB).empty()) << Describe(alerts);
}

TEST_F(ResilienceFindings, AWholeHostSilentWhileTheOtherReportsIsOneAlertNamingTheHost) {
  Feed(30, [](int host, int, int t) { return host == 2 && t >= 10 * 60 ? kSilent : kComputing; });
  const std::vector<v1::Alert> alerts = Alerts();
  const auto silent = OfKind(alerts, v1::ALERT_KIND_SILENT_GPU);
  ASSERT_EQ(silent.size(), 1u) << Describe(alerts);
  const v1::Alert& a = *silent[0];
  EXPECT_EQ(a.labels().at("host"), "n2");
  EXPECT_EQ(a.gpus_size(), 4);
  EXPECT_NE(a.summary().find("Host n2 silent since"), std::string::npos) << a.summary();
  EXPECT_NE(a.summary().find("4 GPUs of the job"), std::string::npos) << a.summary();
  EXPECT_TRUE(OfKind(alerts, v1::ALERT_KIND_DATA_QUALITY).empty()) << Describe(alerts);
}

TEST_F(ResilienceFindings, ASpinningCollectiveForMoreThanTenMinutesIsHungNotARegression) {
  // An hour of training, then every GPU spins in a collective for 25 minutes (longer than the
  // in-job stall rule's 20 windows).
  Feed(85, [](int, int, int t) { return t < 60 * 60 ? kComputing : kSpinning; });
  const std::vector<v1::Alert> alerts = Alerts();
  const auto hung = OfKind(alerts, v1::ALERT_KIND_HUNG);
  ASSERT_EQ(hung.size(), 1u) << Describe(alerts);
  EXPECT_EQ(hung[0]->state(), v1::ALERT_STATE_FIRING);
  EXPECT_EQ(api::TimestampToUnixMs(hung[0]->evidence().onset_time()), kOfuJobStartMs + 3'600'000);
  EXPECT_EQ(hung[0]->evidence().detector(), "activity/spinning");
  EXPECT_NE(hung[0]->summary().find("every GPU spinning"), std::string::npos) << hung[0]->summary();
  EXPECT_TRUE(OfKind(alerts, v1::ALERT_KIND_REGRESSION_IN_JOB).empty()) << Describe(alerts);
  EXPECT_TRUE(OfKind(alerts, v1::ALERT_KIND_IDLE_GPUS).empty()) << Describe(alerts);
  EXPECT_TRUE(OfKind(alerts, v1::ALERT_KIND_JOB_IDLE).empty()) << Describe(alerts);
}

TEST_F(ResilienceFindings, GpusIdleAfterComputingAreJobIdleWhileTheJobRuns) {
  // An hour of training, then no kernels on any GPU for 40 minutes; the job still runs.
  Feed(100, [](int, int, int t) { return t < 60 * 60 ? kComputing : kIdle; });
  const std::vector<v1::Alert> alerts = Alerts();
  const auto idle = OfKind(alerts, v1::ALERT_KIND_JOB_IDLE);
  ASSERT_EQ(idle.size(), 1u) << Describe(alerts);
  EXPECT_EQ(idle[0]->state(), v1::ALERT_STATE_FIRING);
  EXPECT_EQ(api::TimestampToUnixMs(idle[0]->evidence().onset_time()), kOfuJobStartMs + 3'600'000);
  EXPECT_NE(idle[0]->summary().find("Job idle since"), std::string::npos) << idle[0]->summary();
  EXPECT_TRUE(OfKind(alerts, v1::ALERT_KIND_REGRESSION_IN_JOB).empty()) << Describe(alerts);
  EXPECT_TRUE(OfKind(alerts, v1::ALERT_KIND_HUNG).empty()) << Describe(alerts);
}

TEST_F(ResilienceFindings, ASixMinuteCheckpointDipIsNothing) {
  Feed(60, [](int, int, int t) { return t >= 30 * 60 && t < 36 * 60 ? kCheckpoint : kComputing; });
  const std::vector<v1::Alert> alerts = Alerts();
  EXPECT_TRUE(alerts.empty()) << Describe(alerts);
}

// Every cause planted in one 100-minute job of 8 GPUs: GPU n2/3 idle all along, n1/2 silent
// for minutes 20-30, every GPU spinning in a collective for minutes 40-55, and a 2.5x drop
// in tensor activity from minute 70. The engine's ledger gives each its GPU-hours (to within
// a window of where the detectors put its onset) and the parts sum to the allocation.
TEST_F(ResilienceFindings, TheLedgerGivesEachPlantedCauseItsGpuHoursAndSumsToTheAllocation) {
  constexpr Activity kSlow{.reports = true, .tensor = 0.16, .sm = 0.8, .gr = 0.95};
  Feed(100, [](int host, int g, int t) {
    if (host == 2 && g == 3) return kIdle;
    if (host == 1 && g == 2 && t >= 20 * 60 && t < 30 * 60) return kSilent;
    if (t >= 40 * 60 && t < 55 * 60) return kSpinning;
    if (t >= 70 * 60) return kSlow;
    return kComputing;
  });
  const std::vector<v1::Alert> alerts = Alerts();
  ASSERT_TRUE(ledger_.has_value()) << Describe(alerts);
  const core::JobLedger& l = *ledger_;
  const double m = 1 / 60.0;  // a GPU-minute
  const double window = 8 * m;  // one minute of the job
  EXPECT_NEAR(l.allocated_gpu_hours, 8 * 100 * m, window) << Describe(alerts);
  EXPECT_NEAR(l.Sum(), l.allocated_gpu_hours, 0.001 * l.allocated_gpu_hours);
  EXPECT_NEAR(l.silent_gpus, 1 * 10 * m, 2 * m);
  EXPECT_NEAR(l.hung, 8 * 15 * m, 2 * window) << Describe(alerts);
  // Idle all along, but in the hang it is the hung job's.
  EXPECT_NEAR(l.idle_gpus, 1 * 85 * m, 2 * m);
  // From minute 70, 7 busy GPUs at 0.4 of their level before: 7 x 30 minutes x 0.6.
  EXPECT_NEAR(l.regression, 7 * 30 * m * 0.6, 2 * window) << Describe(alerts);
  EXPECT_EQ(l.job_idle, 0);
  EXPECT_EQ(l.no_telemetry, 0);
  EXPECT_GT(l.productive, 7 * 40 * m);
}

TEST(ResilienceConfig, TheTimesLoadAndOutOfRangeOnesAreNamed) {
  auto tree = platform::ConfigTree::LoadString(
      "alerting: {silent_gpu_after_s: 120, hung_after_s: 900, job_idle_after_s: 3600}");
  ASSERT_TRUE(tree.ok()) << tree.status();
  auto c = alerting::LoadAlertingConfig(*tree);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->engine.detectors.silent_gpu_after_s, 120);
  EXPECT_EQ(c->engine.detectors.hung_after_s, 900);
  EXPECT_EQ(c->engine.detectors.job_idle_after_s, 3600);
  auto defaults = alerting::LoadAlertingConfig(*platform::ConfigTree::LoadString("alerting: {}"));
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->engine.detectors.silent_gpu_after_s, 300);
  EXPECT_EQ(defaults->engine.detectors.hung_after_s, 600);
  EXPECT_EQ(defaults->engine.detectors.job_idle_after_s, 1800);
  auto bad = platform::ConfigTree::LoadString("alerting: {hung_after_s: 30}");
  ASSERT_TRUE(bad.ok());
  auto refused = alerting::LoadAlertingConfig(*bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("alerting.hung_after_s"), std::string::npos)
      << refused.status();
}

}  // namespace
}  // namespace goodput::ofu
