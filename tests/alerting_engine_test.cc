// The alert engine against a real PostgreSQL: replayed job windows become exactly the alerts
// (and outbox rows) they should, replays change nothing, the lifecycle (acknowledge, silence,
// resolve) behaves, stopped telemetry is found by the sweep on an injected clock, and
// SubscribeAlerts sees the changes over gRPC.

#include <atomic>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "goodput/v1/alert.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "services/alerting/alert_config.h"
#include "services/alerting/alert_engine.h"
#include "services/alerting/alert_proto.h"
#include "services/alerting/alerting_service.h"
#include "services/alerting/job_reporter.h"
#include "services/api/api_convert.h"
#include "services/platform/migrations.h"
#include "services/platform/pg_pool.h"
#include "tests/support/free_port.h"
#include "tests/support/postgres_server.h"
#include "tests/support/service_process.h"
#include "tests/support/test_steps.h"

namespace goodput::alerting {
namespace {

using ::goodput::testing::PostgresServer;

constexpr int64_t kT0 = 1'790'000'000;  // first window of the job under test (unix s)
constexpr char kProducer[] = "ofu-0-of-1";

// One-minute job-level windows: 8 minutes of warm-up ramp to `level`, then shape(minute).
std::vector<v1::OfuWindow> Windows(
    const std::string& job_id, int64_t t0, int minutes, double level,
    const std::function<double(int)>& shape = [](int) { return 1.0; },
    const std::string& fingerprint = "") {
  std::vector<v1::OfuWindow> out;
  for (int m = 0; m < minutes; ++m) {
    const double ramp = m < 8 ? 0.1 + 0.9 * m / 8.0 : 1.0;
    v1::OfuWindow w;
    w.mutable_job()->set_cluster("eos");
    w.mutable_job()->set_job_id(job_id);
    *w.mutable_start_time() = api::UnixMsToTimestamp((t0 + m * 60) * 1000);
    *w.mutable_end_time() = api::UnixMsToTimestamp((t0 + m * 60 + 60) * 1000);
    w.set_window_s(60);
    w.set_gpu_model("NVIDIA H100 80GB HBM3");
    w.set_workload_fingerprint(fingerprint);
    w.set_ofu(level * ramp * (1.0 + 0.02 * std::sin(m * 1.3)) * shape(m));
    w.set_gpus_reporting(8);
    w.set_gpus_allocated(8);
    w.set_gpu_coverage(1.0);
    w.set_gpu_ofu_median(w.ofu());
    w.set_warmup(m < 8);
    w.set_finalized(true);
    out.push_back(w);
  }
  return out;
}

double Checkpoints(int m) { return (m % 30) >= 26 ? 0.05 : 1.0; }
double DropAt120(int m) { return (m >= 120 ? 0.4 : 1.0) * Checkpoints(m); }

class AlertEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(goodput::testing::StartPostgres(&pg_));
    auto report = platform::ApplyMigrations(pg_->Dsn("goodput"),
                                            goodput::testing::SourceDir() / "migrations");
    ASSERT_TRUE(report.ok()) << report.status();
    auto pool = platform::PgPool::Create({.dsn = pg_->Dsn("goodput")});
    ASSERT_TRUE(pool.ok());
    pool_ = *std::move(pool);
    EngineConfig config;
    config.routing.routes.push_back(
        {.match = {{"cluster", "eos"}}, .targets = {"slurm-eos", "am-prod"}});
    config.routing.default_targets = {"am-default"};
    config.dashboard_url = "https://goodput.example/";
    config.target_kinds = {{"slurm-eos", "slurm"}, {"am-prod", "alertmanager"}};
    engine_ = std::make_unique<AlertEngine>(pool_.get(), config, &hub_, platform::Logger(), [this] {
      return absl::FromUnixMillis(now_ms_.load());
    });
    AddJob("j1");
  }

  void Sql(const std::string& sql) { ASSERT_TRUE(pg_->Execute("goodput", sql).ok()) << sql; }
  int64_t Count(const std::string& sql) {
    auto v = pg_->QueryValue("goodput", sql);
    EXPECT_TRUE(v.ok()) << v.status() << " " << sql;
    return v.ok() ? std::stoll(*v) : -1;
  }
  void AddJob(const std::string& job_id, const std::string& fingerprint = "") {
    Sql(absl::StrCat("INSERT INTO jobs (cluster, job_id, scheduler, team, user_name, ",
                     "workload_fingerprint, labels) VALUES ('eos', '", job_id,
                     "', 'slurm', 'llm', 'ada', '", fingerprint, "', '{\"project\": \"p7\"}')"));
  }

  // Pushes `windows` in order, `per_push` at a time, as ofu's forwarder does.
  std::vector<v1::DeliveryAck> Push(const std::vector<v1::OfuWindow>& windows, int per_push = 10,
                                    std::optional<int64_t> first_seq = std::nullopt) {
    std::vector<v1::DeliveryAck> acks;
    int64_t seq = first_seq.value_or(next_seq_);
    for (size_t i = 0; i < windows.size(); i += static_cast<size_t>(per_push)) {
      v1::PushWindowsRequest req;
      req.mutable_position()->set_producer_id(kProducer);
      req.mutable_position()->set_sequence(seq);
      req.mutable_position()->set_previous_sequence(seq - 1);
      for (size_t j = i; j < std::min(windows.size(), i + static_cast<size_t>(per_push)); ++j) {
        *req.add_windows() = windows[j];
      }
      auto ack = engine_->PushWindows(req);
      EXPECT_TRUE(ack.ok()) << ack.status();
      if (ack.ok()) acks.push_back(*ack);
      ++seq;
    }
    if (!first_seq) next_seq_ = seq;
    return acks;
  }

  std::vector<v1::Alert> Alerts(const std::string& job_id = "") {
    v1::ListAlertsRequest req;
    if (!job_id.empty()) {
      req.mutable_job()->set_cluster("eos");
      req.mutable_job()->set_job_id(job_id);
    }
    auto r = engine_->ListAlerts(req);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? std::vector<v1::Alert>(r->alerts().begin(), r->alerts().end())
                  : std::vector<v1::Alert>{};
  }

  int64_t OutboxRows(const std::string& alert_id, const std::string& state = "") {
    return Count(absl::StrCat("SELECT count(*) FROM alert_outbox WHERE alert_id = ", alert_id,
                              state.empty() ? "" : absl::StrCat(" AND state = '", state, "'")));
  }

  std::unique_ptr<PostgresServer> pg_;
  std::unique_ptr<platform::PgPool> pool_;
  AlertHub hub_;
  std::unique_ptr<AlertEngine> engine_;
  std::atomic<int64_t> now_ms_{(kT0 + 200 * 60) * 1000};
  int64_t next_seq_ = 1;
};

TEST_F(AlertEngineTest, RegressingJobFiresOnceWithFactorOnsetAndOneOutboxRowPerTarget) {
  const auto windows = Windows("j1", kT0, 200, 0.5, DropAt120);
  Push(windows);
  std::vector<v1::Alert> alerts = Alerts();
  ASSERT_EQ(alerts.size(), 1u);
  const v1::Alert& a = alerts[0];
  EXPECT_EQ(a.kind(), v1::ALERT_KIND_REGRESSION_IN_JOB);
  EXPECT_EQ(a.state(), v1::ALERT_STATE_FIRING);
  EXPECT_EQ(a.severity(), v1::SEVERITY_CRITICAL);
  EXPECT_NEAR(a.evidence().factor(), 2.5, 0.15);
  EXPECT_NEAR(a.evidence().before_ofu(), 0.5, 0.02);
  EXPECT_EQ(api::TimestampToUnixMs(a.evidence().onset_time()), (kT0 + 120 * 60) * 1000);
  EXPECT_GT(a.evidence().windows_size(), 10);
  EXPECT_LE(a.evidence().windows_size(), 60);
  EXPECT_EQ(a.labels().at("team"), "llm");
  EXPECT_EQ(a.labels().at("project"), "p7");
  EXPECT_EQ(a.dashboard_url(), "https://goodput.example/#/job/eos/j1");
  EXPECT_NE(a.summary().find("OFU fell 2."), std::string::npos) << a.summary();
  EXPECT_NE(a.description().find("Look first"), std::string::npos) << a.description();
  EXPECT_EQ(OutboxRows(a.alert_id(), "firing"), 2);
  EXPECT_EQ(Count("SELECT count(*) FROM alert_outbox WHERE target IN ('slurm-eos', 'am-prod')"), 2);

  // GetAlert shows the deliveries.
  auto got = engine_->GetAlert(a.alert_id());
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->deliveries_size(), 2);
  EXPECT_EQ(got->deliveries(0).state(), v1::DELIVERY_STATE_PENDING);
  EXPECT_EQ(got->deliveries(0).idempotency_key(), absl::StrCat(a.alert_id(), ":slurm-eos:firing"));
  EXPECT_EQ(got->deliveries(0).target_kind(), v1::TARGET_KIND_SLURM);
  EXPECT_EQ(got->deliveries(1).target_kind(), v1::TARGET_KIND_ALERTMANAGER);

  // The same pushes again (a forwarder retrying after a lost acknowledgement): nothing new.
  const int64_t windows_before = Count("SELECT count(*) FROM alert_windows");
  std::vector<v1::DeliveryAck> acks = Push(windows, 10, 1);
  for (const v1::DeliveryAck& ack : acks) EXPECT_TRUE(ack.duplicate());
  EXPECT_EQ(acks.back().watermark_sequence(), 20);
  EXPECT_EQ(Count("SELECT count(*) FROM alerts"), 1);
  EXPECT_EQ(Count("SELECT count(*) FROM alert_outbox"), 2);
  EXPECT_EQ(Count("SELECT count(*) FROM alert_windows"), windows_before);
  auto again = engine_->GetAlert(a.alert_id());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->update_time().seconds(), a.update_time().seconds());
}

TEST_F(AlertEngineTest, WarmupCheckpointDipsAndShortStallsDoNotAlert) {
  Push(Windows("j1", kT0, 300, 0.45,
               [](int m) { return m >= 114 && m < 120 ? 0.0 : Checkpoints(m); }));
  EXPECT_TRUE(Alerts().empty());
  EXPECT_EQ(Count("SELECT count(*) FROM alert_outbox"), 0);
}

TEST_F(AlertEngineTest, AGapIsReportedAndNothingIsApplied) {
  v1::PushWindowsRequest req;
  req.mutable_position()->set_producer_id(kProducer);
  req.mutable_position()->set_sequence(7);
  req.mutable_position()->set_previous_sequence(6);
  *req.add_windows() = Windows("j1", kT0, 1, 0.5)[0];
  auto ack = engine_->PushWindows(req);
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_TRUE(ack->gap_detected());
  EXPECT_EQ(ack->watermark_sequence(), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM alert_windows"), 0);
  req.mutable_position()->set_producer_id("");
  EXPECT_EQ(engine_->PushWindows(req).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(AlertEngineTest, DebugFlagJobBadFromItsStartAlertsAgainstItsWorkload) {
  const std::string fp = "llama-70b/tp8-pp4/h100x256";
  for (int j = 0; j < 3; ++j) {
    const std::string id = absl::StrCat("earlier-", j);
    AddJob(id, fp);
    Push(Windows(id, kT0 - (10 - j) * 86400, 120, 0.55 + 0.01 * j, Checkpoints, fp));
  }
  AddJob("debug", fp);
  Push(Windows("debug", kT0, 60, 0.22, Checkpoints, fp));
  std::vector<v1::Alert> alerts = Alerts("debug");
  ASSERT_EQ(alerts.size(), 1u);
  const v1::Alert& a = alerts[0];
  EXPECT_EQ(a.kind(), v1::ALERT_KIND_REGRESSION_VS_WORKLOAD);
  EXPECT_NEAR(a.evidence().factor(), 2.5, 0.2);
  EXPECT_NEAR(a.evidence().baseline_ofu(), 0.56, 0.015);
  ASSERT_EQ(a.evidence().baseline_jobs_size(), 3);
  EXPECT_EQ(a.evidence().baseline_jobs(0).job_id(), "earlier-2");
  EXPECT_NE(a.description().find("same workload ran at 5"), std::string::npos) << a.description();
  EXPECT_TRUE(Alerts("earlier-0").empty());
}

TEST_F(AlertEngineTest, AcknowledgedAlertsAreNotRenotifiedAndResolveWhenTheJobEnds) {
  Push(Windows("j1", kT0, 200, 0.5, DropAt120));
  std::vector<v1::Alert> alerts = Alerts();
  ASSERT_EQ(alerts.size(), 1u);
  const std::string id = alerts[0].alert_id();

  v1::AckAlertRequest ack;
  ack.set_alert_id(id);
  EXPECT_EQ(engine_->AckAlert(ack).status().code(), absl::StatusCode::kInvalidArgument);
  ack.set_by("ada@example.org");
  ack.set_comment("looking at the NCCL settings");
  auto acked = engine_->AckAlert(ack);
  ASSERT_TRUE(acked.ok()) << acked.status();
  EXPECT_EQ(acked->state(), v1::ALERT_STATE_ACKNOWLEDGED);
  EXPECT_EQ(acked->acknowledgement().by(), "ada@example.org");
  ASSERT_TRUE(engine_->AckAlert(ack).ok());  // idempotent

  // More windows of the still-regressed job: still one alert, still acknowledged, no
  // new notification.
  Push(Windows("j1", kT0, 230, 0.5, DropAt120));
  alerts = Alerts();
  ASSERT_EQ(alerts.size(), 1u);
  EXPECT_EQ(alerts[0].state(), v1::ALERT_STATE_ACKNOWLEDGED);
  EXPECT_EQ(OutboxRows(id), 2);

  // The job ends: the sweep resolves the alert and tells the targets that heard the firing.
  Sql("UPDATE jobs SET state = 'completed' WHERE job_id = 'j1'");
  ASSERT_TRUE(engine_->Sweep().ok());
  auto resolved = engine_->GetAlert(id);
  ASSERT_TRUE(resolved.ok());
  EXPECT_EQ(resolved->state(), v1::ALERT_STATE_RESOLVED);
  EXPECT_TRUE(resolved->has_end_time());
  EXPECT_EQ(OutboxRows(id, "resolved"), 2);
  EXPECT_EQ(engine_->AckAlert(ack).status().code(), absl::StatusCode::kFailedPrecondition);
  v1::AckAlertRequest unknown;
  unknown.set_alert_id("999");
  unknown.set_by("x");
  EXPECT_EQ(engine_->AckAlert(unknown).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(AlertEngineTest, RecoveryResolvesTheAlert) {
  Push(Windows("j1", kT0, 200, 0.5, DropAt120));
  ASSERT_EQ(Alerts().size(), 1u);
  Push(Windows("j1", kT0, 260, 0.5, [](int m) { return m >= 120 && m < 200 ? 0.4 : 1.0; }));
  std::vector<v1::Alert> alerts = Alerts();
  ASSERT_EQ(alerts.size(), 1u);
  EXPECT_EQ(alerts[0].state(), v1::ALERT_STATE_RESOLVED);
  EXPECT_EQ(OutboxRows(alerts[0].alert_id(), "resolved"), 2);
}

TEST_F(AlertEngineTest, ADropConfirmedAndRecoveredInsideOneBurstIsRecordedResolved) {
  // An agent catches up after an outage: 30 minutes at once, in which a drop was confirmed
  // and recovered. Live delivery opens and resolves an alert; the burst records the same
  // finding, resolved, with its onset and end, sent to Alertmanager but not to Slurm.
  auto shape = [](int m) { return (m >= 120 && m < 145 ? 0.4 : 1.0) * Checkpoints(m); };
  const auto windows = Windows("j1", kT0, 200, 0.5, shape);
  Push(std::vector<v1::OfuWindow>(windows.begin(), windows.begin() + 115), 115);
  Push(std::vector<v1::OfuWindow>(windows.begin() + 115, windows.begin() + 165), 50);
  std::vector<v1::Alert> alerts = Alerts("j1");
  ASSERT_EQ(alerts.size(), 1u);
  const v1::Alert& a = alerts[0];
  EXPECT_EQ(a.state(), v1::ALERT_STATE_RESOLVED);
  EXPECT_EQ(a.kind(), v1::ALERT_KIND_REGRESSION_IN_JOB);
  EXPECT_FALSE(a.found_after_job_end());
  EXPECT_EQ(api::TimestampToUnixMs(a.evidence().onset_time()), (kT0 + 120 * 60) * 1000);
  ASSERT_TRUE(a.evidence().has_condition_end_time());
  const int64_t end_s = api::TimestampToUnixMs(a.evidence().condition_end_time()) / 1000;
  EXPECT_GE(end_s, kT0 + 145 * 60);
  EXPECT_LE(end_s, kT0 + 160 * 60);
  EXPECT_NEAR(a.evidence().factor(), 2.5, 0.2);
  EXPECT_NE(a.description().find("It ended at"), std::string::npos) << a.description();
  EXPECT_EQ(OutboxRows(a.alert_id(), "resolved"), 1);
  EXPECT_EQ(Count("SELECT count(*) FROM alert_outbox WHERE target = 'slurm-eos'"), 0);

  // The rest of the job, and its windows pushed again: still the one finding.
  Push(windows, 40);
  EXPECT_EQ(Alerts("j1").size(), 1u);
}

TEST_F(AlertEngineTest, FindingsConfirmedAfterTheJobEndedAreRecordedNotSentToItsScheduler) {
  // The epilog ends the job before the platform caught up: its last windows, holding a drop,
  // arrive after EndJob.
  Sql("UPDATE jobs SET state = 'completed' WHERE job_id = 'j1'");
  Push(Windows("j1", kT0, 200, 0.5, DropAt120), 200);
  std::vector<v1::Alert> alerts = Alerts("j1");
  ASSERT_EQ(alerts.size(), 1u);
  const v1::Alert& a = alerts[0];
  EXPECT_EQ(a.state(), v1::ALERT_STATE_RESOLVED);
  EXPECT_TRUE(a.found_after_job_end());
  EXPECT_NE(a.description().find("after the job had ended"), std::string::npos);
  EXPECT_EQ(OutboxRows(a.alert_id(), "resolved"), 1);
  EXPECT_EQ(OutboxRows(a.alert_id(), "firing"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM alert_outbox WHERE target = 'slurm-eos'"), 0);
  // The sweep and more pushes of the ended job record nothing twice.
  ASSERT_TRUE(engine_->Sweep().ok());
  Push(Windows("j1", kT0, 210, 0.5, DropAt120), 30);
  EXPECT_EQ(Alerts("j1").size(), 1u);
}

TEST_F(AlertEngineTest, ARestartedEngineGoesOnFromTheCheckpointWithoutDuplicates) {
  auto shape = [](int m) { return (m >= 120 && m < 200 ? 0.4 : 1.0) * Checkpoints(m); };
  const auto windows = Windows("j1", kT0, 260, 0.5, shape);
  Push(std::vector<v1::OfuWindow>(windows.begin(), windows.begin() + 180));
  ASSERT_EQ(Alerts("j1").size(), 1u);
  EXPECT_EQ(Count("SELECT count(*) FROM alert_job_state WHERE checkpoint IS NOT NULL"), 1);
  // A new process: nothing in memory; the detector state comes from the checkpoint.
  engine_ = std::make_unique<AlertEngine>(pool_.get(), engine_->config(), &hub_,
                                          platform::Logger(),
                                          [this] { return absl::FromUnixMillis(now_ms_.load()); });
  Push(std::vector<v1::OfuWindow>(windows.begin() + 180, windows.end()));
  std::vector<v1::Alert> alerts = Alerts("j1");
  ASSERT_EQ(alerts.size(), 1u);
  EXPECT_EQ(alerts[0].state(), v1::ALERT_STATE_RESOLVED);
  EXPECT_EQ(Count("SELECT count(*) FROM alert_outbox"), 4);  // firing and resolved, 2 targets

  // A revised window among those evaluated: the job is replayed, with the same result.
  v1::OfuWindow revised = windows[150];
  revised.set_revision(1);
  Push({revised});
  EXPECT_EQ(Alerts("j1").size(), 1u);
  EXPECT_EQ(Count("SELECT count(*) FROM alert_outbox"), 4);
}

TEST_F(AlertEngineTest, SilencedAlertsAreNotDeliveredUntilTheSilenceEnds) {
  v1::Silence s;
  auto* m = s.add_matchers();
  m->set_name("team");
  m->set_value("ll.*");
  m->set_comparison(v1::MATCH_OPERATOR_REGEX);
  *s.mutable_active()->mutable_end_time() = api::UnixMsToTimestamp(now_ms_ + 3'600'000);
  s.set_created_by("ada");
  auto created = engine_->CreateSilence(s);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_FALSE(created->expired());

  Push(Windows("j1", kT0, 200, 0.5, DropAt120));
  std::vector<v1::Alert> alerts = Alerts();
  ASSERT_EQ(alerts.size(), 1u);
  EXPECT_EQ(alerts[0].state(), v1::ALERT_STATE_SILENCED);
  EXPECT_EQ(OutboxRows(alerts[0].alert_id()), 0);
  auto got = engine_->GetAlert(alerts[0].alert_id());
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->silence_ids_size(), 1);
  EXPECT_EQ(got->silence_ids(0), created->silence_id());

  auto listed = engine_->ListSilences({});
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->silences_size(), 1);

  auto deleted = engine_->DeleteSilence(created->silence_id());
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_TRUE(deleted->expired());
  alerts = Alerts();
  EXPECT_EQ(alerts[0].state(), v1::ALERT_STATE_FIRING);
  EXPECT_EQ(OutboxRows(alerts[0].alert_id(), "firing"), 2);
  EXPECT_TRUE(engine_->DeleteSilence(created->silence_id()).ok());
  EXPECT_EQ(engine_->DeleteSilence("12345").status().code(), absl::StatusCode::kNotFound);

  // A silence that ends by itself: the sweep un-silences.
  EXPECT_EQ(engine_->ListSilences({})->silences_size(), 0);
  v1::Silence bad;
  bad.add_matchers()->set_name("team");
  EXPECT_EQ(engine_->CreateSilence(bad).status().code(), absl::StatusCode::kInvalidArgument);
  auto* re = bad.mutable_matchers(0);
  re->set_value("(");
  re->set_comparison(v1::MATCH_OPERATOR_REGEX);
  *bad.mutable_active()->mutable_end_time() = api::UnixMsToTimestamp(now_ms_ + 60'000);
  auto refused = engine_->CreateSilence(bad);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("silence.matchers[0].value"), std::string::npos)
      << refused.status();
}

TEST_F(AlertEngineTest, SweepFindsStoppedTelemetryOfARunningJobAndResolvesWhenItReturns) {
  const int64_t last_end_ms = (kT0 + 30 * 60) * 1000;
  now_ms_ = last_end_ms + 2 * 60 * 1000;  // delivered as usual: a window plus ofu's lateness
  Push(Windows("j1", kT0, 30, 0.45));
  now_ms_ = last_end_ms + 5 * 60 * 1000;
  ASSERT_TRUE(engine_->Sweep().ok());
  EXPECT_TRUE(Alerts().empty());
  now_ms_ = last_end_ms + 20 * 60 * 1000;
  ASSERT_TRUE(engine_->Sweep().ok());
  std::vector<v1::Alert> alerts = Alerts();
  ASSERT_EQ(alerts.size(), 1u);
  EXPECT_EQ(alerts[0].kind(), v1::ALERT_KIND_TELEMETRY_STOPPED);
  EXPECT_EQ(api::TimestampToUnixMs(alerts[0].evidence().last_sample_time()), last_end_ms);
  ASSERT_TRUE(engine_->Sweep().ok());
  EXPECT_EQ(Alerts().size(), 1u);  // one alert, however many sweeps

  Push(Windows("j1", kT0, 50, 0.45));
  ASSERT_TRUE(engine_->Sweep().ok());
  alerts = Alerts();
  ASSERT_EQ(alerts.size(), 1u);
  EXPECT_EQ(alerts[0].state(), v1::ALERT_STATE_RESOLVED);
}

// Offered more than it can carry, the platform delivers every job's windows late: no job's
// telemetry stopped, and one alert for the operator says how far behind goodput is. A job
// whose telemetry did stop meanwhile is still found, judged against the data the platform
// has reached. When the backlog clears, the platform alert resolves.
TEST_F(AlertEngineTest, APlatformBehindItsTelemetryBlamesNoJobAndRaisesOneAlertOfItsOwn) {
  const std::vector<std::string> jobs = {"j1", "j2", "j3", "j4", "j5"};
  for (size_t i = 1; i < jobs.size(); ++i) AddJob(jobs[i]);
  std::map<std::string, std::vector<v1::OfuWindow>> windows;
  for (const std::string& j : jobs) windows[j] = Windows(j, kT0, 60, 0.45);
  auto end_ms = [](int minute) { return (kT0 + minute * 60 + 60) * 1000; };
  // Minute m's windows of every job (j3's stop after minute 15), delivered `age_s` after
  // they end, then a sweep.
  auto deliver = [&](int minute, int64_t age_s) {
    std::vector<v1::OfuWindow> push;
    for (const std::string& j : jobs) {
      if (j == "j3" && minute > 15) continue;
      push.push_back(windows[j][minute]);
    }
    now_ms_ = end_ms(minute) + age_s * 1000;
    Push(push);
    ASSERT_TRUE(engine_->Sweep().ok());
  };
  auto open_of_kind = [&](v1::AlertKind kind) {
    std::vector<v1::Alert> out;
    for (const v1::Alert& a : Alerts()) {
      if (a.kind() == kind && a.state() != v1::ALERT_STATE_RESOLVED) out.push_back(a);
    }
    return out;
  };
  for (int m = 0; m < 10; ++m) deliver(m, 120);  // as usual
  EXPECT_TRUE(Alerts().empty());
  // Overloaded: windows reach alerting 15 minutes after they end (12 beyond the usual 3),
  // longer than telemetry_stopped_after_s (10 minutes), for 20 minutes.
  for (int m = 10; m < 30; ++m) deliver(m, 900);
  std::vector<v1::Alert> platform = open_of_kind(v1::ALERT_KIND_PLATFORM_LAGGING);
  ASSERT_EQ(platform.size(), 1u);
  const v1::Alert& p = platform[0];
  EXPECT_EQ(p.job().cluster(), "");
  EXPECT_EQ(p.job().job_id(), "");
  EXPECT_EQ(p.summary(), "goodput is 12 minutes behind its telemetry");
  EXPECT_NE(p.description().find("reach alerting 15 minutes after they end"), std::string::npos)
      << p.description();
  EXPECT_NE(p.description().find("Look first at ingest"), std::string::npos);
  EXPECT_EQ(p.labels().at("kind"), "platform_lagging");
  EXPECT_EQ(p.labels().at("component"), "goodput");
  EXPECT_EQ(p.labels().count("cluster"), 0u);
  EXPECT_EQ(p.labels().count("job_id"), 0u);
  EXPECT_EQ(p.dashboard_url(), "https://goodput.example/");
  EXPECT_EQ(api::TimestampToUnixMs(p.evidence().last_sample_time()), end_ms(29));
  EXPECT_EQ(api::TimestampToUnixMs(p.evidence().onset_time()), end_ms(10) + 900 * 1000);
  // To the operator's default route only: never to a job's scheduler.
  EXPECT_EQ(Count(absl::StrCat("SELECT count(*) FROM alert_outbox WHERE alert_id = ",
                               p.alert_id(), " AND target = 'am-default'")),
            1);
  EXPECT_EQ(OutboxRows(p.alert_id()), 1);
  EXPECT_EQ(Count(absl::StrCat("SELECT count(*) FROM alert_outbox WHERE alert_id = ",
                               p.alert_id(), " AND kind = 'alert' AND ",
                               "payload ->> 'kind' = 'platform_lagging'")),
            1);
  // No job is blamed for the backlog, but j3, whose windows stopped after minute 15 while
  // the others kept coming (late), has stopped: 14 minutes behind the data reached.
  std::vector<v1::Alert> stopped = open_of_kind(v1::ALERT_KIND_TELEMETRY_STOPPED);
  ASSERT_EQ(stopped.size(), 1u);
  EXPECT_EQ(stopped[0].job().job_id(), "j3");
  EXPECT_EQ(api::TimestampToUnixMs(stopped[0].evidence().last_sample_time()), end_ms(15));

  // Caught up: windows arrive as usual again, the platform alert resolves, j3 stays stopped.
  for (int m = 30; m < 33; ++m) deliver(m, 120);
  EXPECT_TRUE(open_of_kind(v1::ALERT_KIND_PLATFORM_LAGGING).empty());
  EXPECT_EQ(OutboxRows(p.alert_id(), "resolved"), 1);
  stopped = open_of_kind(v1::ALERT_KIND_TELEMETRY_STOPPED);
  ASSERT_EQ(stopped.size(), 1u);
  EXPECT_EQ(stopped[0].job().job_id(), "j3");
  EXPECT_EQ(Count("SELECT count(*) FROM alerts WHERE kind = 'telemetry_stopped'"), 1);
}

TEST_F(AlertEngineTest, ListAlertsFiltersAndPages) {
  for (int j = 0; j < 5; ++j) {
    const std::string id = absl::StrCat("p", j);
    AddJob(id);
    Push(Windows(id, kT0, 200, 0.5, DropAt120));
  }
  v1::ListAlertsRequest req;
  req.set_page_size(2);
  std::vector<std::string> seen;
  for (int page = 0; page < 5; ++page) {
    auto r = engine_->ListAlerts(req);
    ASSERT_TRUE(r.ok()) << r.status();
    for (const auto& a : r->alerts()) seen.push_back(a.job().job_id());
    if (r->next_page_token().empty()) break;
    req.set_page_token(r->next_page_token());
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"p4", "p3", "p2", "p1", "p0"}));
  v1::ListAlertsRequest filtered;
  auto* m = filtered.add_matchers();
  m->set_name("job_id");
  m->set_value("p[13]");
  m->set_comparison(v1::MATCH_OPERATOR_REGEX);
  filtered.add_kinds(v1::ALERT_KIND_REGRESSION_IN_JOB);
  filtered.set_min_severity(v1::SEVERITY_WARNING);
  auto r = engine_->ListAlerts(filtered);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->alerts_size(), 2);
  filtered.clear_kinds();
  filtered.add_kinds(v1::ALERT_KIND_STRAGGLER);
  EXPECT_EQ(engine_->ListAlerts(filtered)->alerts_size(), 0);
}

TEST_F(AlertEngineTest, SubscribeAlertsSeesOpenAlertsAndChanges) {
  Push(Windows("j1", kT0, 200, 0.5, DropAt120));
  auto port = goodput::testing::FreePort();
  ASSERT_TRUE(port.ok());
  AlertServiceImpl service(engine_.get(), &hub_);
  grpc::ServerBuilder b;
  b.AddListeningPort(absl::StrCat("127.0.0.1:", *port), grpc::InsecureServerCredentials());
  b.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = b.BuildAndStart();
  ASSERT_NE(server, nullptr);
  auto stub = v1::AlertService::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", *port), grpc::InsecureChannelCredentials()));

  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::SubscribeAlertsRequest req;
  req.set_include_open(true);
  req.set_cluster("eos");
  auto reader = stub->SubscribeAlerts(&ctx, req);
  v1::SubscribeAlertsResponse msg;
  ASSERT_TRUE(reader->Read(&msg));
  EXPECT_EQ(msg.change(), v1::ALERT_CHANGE_SNAPSHOT);
  const std::string first = msg.alert().alert_id();

  // Changes made through the API arrive in order.
  AddJob("j2");
  Push(Windows("j2", kT0, 200, 0.5, DropAt120));
  ASSERT_TRUE(reader->Read(&msg));
  EXPECT_EQ(msg.change(), v1::ALERT_CHANGE_FIRED);
  EXPECT_EQ(msg.alert().job().job_id(), "j2");
  grpc::ClientContext ack_ctx;
  v1::AckAlertRequest ack;
  ack.set_alert_id(first);
  ack.set_by("ada");
  v1::AckAlertResponse ack_resp;
  ASSERT_TRUE(stub->AckAlert(&ack_ctx, ack, &ack_resp).ok());
  ASSERT_TRUE(reader->Read(&msg));
  EXPECT_EQ(msg.change(), v1::ALERT_CHANGE_ACKNOWLEDGED);
  EXPECT_EQ(msg.alert().alert_id(), first);
  ctx.TryCancel();
  reader->Finish();
  server->Shutdown(std::chrono::system_clock::now());
}

TEST_F(AlertEngineTest, DivergenceVerdictsAlertAndPrecisionSwitchesAnnotate) {
  auto push = [&](int64_t seq, const std::vector<v1::DivergenceEvent>& events) {
    v1::PushDivergenceEventsRequest req;
    req.mutable_position()->set_producer_id("mfu-0");
    req.mutable_position()->set_sequence(seq);
    req.mutable_position()->set_previous_sequence(seq - 1);
    for (const auto& e : events) *req.add_events() = e;
    auto ack = engine_->PushDivergenceEvents(req);
    EXPECT_TRUE(ack.ok()) << ack.status();
    return ack.ok() ? *ack : v1::DeliveryAck{};
  };
  Push(Windows("j1", kT0, 60, 0.4));
  v1::DivergenceEvent e;
  e.set_event_id("v1");
  e.mutable_job()->set_cluster("eos");
  e.mutable_job()->set_job_id("j1");
  *e.mutable_time() = api::UnixMsToTimestamp((kT0 + 3600) * 1000);
  *e.mutable_interval()->mutable_start_time() = api::UnixMsToTimestamp(kT0 * 1000);
  *e.mutable_interval()->mutable_end_time() = api::UnixMsToTimestamp((kT0 + 3600) * 1000);
  v1::Divergence* d = e.mutable_verdict();
  d->set_verdict(v1::VERDICT_APP_FLOPS_OVERCOUNT);
  d->set_ratio(2.12);
  d->set_confidence(0.97);
  d->set_correction_factor(0.47);
  d->add_causes()->set_cause(v1::DIVERGENCE_CAUSE_LATENT_PROJECTION_MOE);
  EXPECT_FALSE(push(1, {e}).duplicate());
  EXPECT_TRUE(push(1, {e}).duplicate());
  std::vector<v1::Alert> alerts = Alerts();
  ASSERT_EQ(alerts.size(), 1u);
  EXPECT_EQ(alerts[0].kind(), v1::ALERT_KIND_DIVERGENCE);
  EXPECT_EQ(alerts[0].evidence().divergence().verdict(), v1::VERDICT_APP_FLOPS_OVERCOUNT);
  EXPECT_NE(alerts[0].description().find("MoE"), std::string::npos) << alerts[0].description();
  EXPECT_EQ(OutboxRows(alerts[0].alert_id(), "firing"), 2);

  // Too little evidence for a while: the last decisive verdict stands.
  e.set_event_id("v1b");
  *e.mutable_time() = api::UnixMsToTimestamp((kT0 + 5400) * 1000);
  d->set_verdict(v1::VERDICT_INSUFFICIENT_EVIDENCE);
  push(2, {e});
  alerts = Alerts();
  ASSERT_EQ(alerts.size(), 1u);
  EXPECT_EQ(alerts[0].state(), v1::ALERT_STATE_FIRING);

  // The framework fixed its formula: the verdict is consistent again.
  e.set_event_id("v2");
  *e.mutable_time() = api::UnixMsToTimestamp((kT0 + 7200) * 1000);
  d->set_verdict(v1::VERDICT_CONSISTENT);
  push(3, {e});
  alerts = Alerts();
  ASSERT_EQ(alerts.size(), 1u);
  EXPECT_EQ(alerts[0].state(), v1::ALERT_STATE_RESOLVED);

  // FP8 doubles the peak: OFU halves at the switch, which annotates, not alerts.
  AddJob("fp8");
  v1::DivergenceEvent sw;
  sw.set_event_id("s1");
  sw.mutable_job()->set_cluster("eos");
  sw.mutable_job()->set_job_id("fp8");
  *sw.mutable_time() = api::UnixMsToTimestamp((kT0 + 120 * 60) * 1000);
  *sw.mutable_precision_switch()->mutable_time() = sw.time();
  sw.mutable_precision_switch()->set_peak_tflops_before(989);
  sw.mutable_precision_switch()->set_peak_tflops_after(1979);
  push(4, {sw});
  Push(Windows("fp8", kT0, 200, 0.5, [](int m) { return m >= 120 ? 0.5 : 1.0; }));
  EXPECT_TRUE(Alerts("fp8").empty());
}

TEST_F(AlertEngineTest, PersistentlyIdleGpusAndStragglersAlertWithTheirGpus) {
  auto windows = Windows("j1", kT0, 40, 0.4);
  for (v1::OfuWindow& w : windows) {
    v1::GpuRef* idle = w.add_idle_gpus();
    idle->set_host("n2");
    idle->set_gpu_index(7);
    v1::Straggler* s = w.add_stragglers();
    s->mutable_gpu()->set_host("n1");
    s->mutable_gpu()->set_gpu_index(3);
    s->set_score(0.6);
    s->set_ofu(w.ofu() * 0.6);
  }
  Push(windows);
  std::vector<v1::Alert> alerts = Alerts();
  ASSERT_EQ(alerts.size(), 2u);
  for (const v1::Alert& a : alerts) {
    ASSERT_EQ(a.gpus_size(), 1);
    if (a.kind() == v1::ALERT_KIND_IDLE_GPUS) {
      EXPECT_EQ(a.gpus(0).host(), "n2");
      EXPECT_GT(a.evidence().idle_gpu_hours(), 0.5);
    } else {
      EXPECT_EQ(a.kind(), v1::ALERT_KIND_STRAGGLER);
      EXPECT_EQ(a.gpus(0).host(), "n1");
      EXPECT_EQ(a.labels().at("gpu"), "n1/3/");
      EXPECT_NEAR(a.evidence().stragglers(0).score(), 0.6, 0.05);
    }
  }
}

// An inference service's engines (one host per job) scraped every 30 s, 15 s off the windows
// (vLLM's vllm:prompt_tokens_total and vllm:generation_tokens_total as ingest stores them):
// counters that grow at `tokens_per_s(minute)`, a quarter prompt, three quarters generation, restarting
// from zero at minute `restart_at` (an engine restart) when set.
void ServingCounters(PostgresServer& pg, const std::string& job_id, int minutes,
                     const std::function<double(int)>& tokens_per_s, int restart_at = -1) {
  std::string sql =
      "INSERT INTO serving_samples (cluster, host, engine, model, series, metric, sample_time, "
      "value, job, batch_id) VALUES ";
  double total = 0;
  bool first = true;
  for (int k = 1; k < minutes * 2; ++k) {
    const int64_t t = kT0 + 15 + 30 * k;
    total += 30 * tokens_per_s(static_cast<int>((t - 15 - kT0) / 60));
    if (restart_at >= 0 && k == restart_at * 2) total = 0;
    for (const auto& [metric, share] : {std::pair{"prompt_tokens", 0.25},
                                        std::pair{"generation_tokens", 0.75}}) {
      absl::StrAppend(&sql, first ? "" : ", ", "('eos', 'node-", job_id, "', 'vllm', ",
                      "'meta-llama/Llama-3.1-8B-Instruct', 'engine=0', '", metric,
                      "', to_timestamp(", t, "), ", total * share,
                      ", (SELECT id FROM jobs WHERE job_id = '", job_id, "'), 'b')");
      first = false;
    }
  }
  ASSERT_TRUE(pg.Execute("goodput", sql).ok());
}

// The OFU paper's requirement that every workload be read, on a service against a training
// run: the night that halves a service's traffic halves its OFU, which is no regression of
// the service although the same drop is one of a training run; a release that makes each
// token cost 2.5x the GPU time at the same traffic is one, though its OFU barely moves.
TEST_F(AlertEngineTest, AnInferenceServiceIsReadByItsCostPerTokenAtAComparableLoad) {
  for (const char* id : {"svc-night", "svc-slow"}) {
    AddJob(id);
    Sql(absl::StrCat("UPDATE jobs SET workload_kind = 'inference', workload_kind_source = "
                     "'registered' WHERE job_id = '",
                     id, "'"));
  }
  auto night = [](int m) { return m >= 120 ? 0.5 : 1.0; };
  // The training run: the same drop is a regression.
  Push(Windows("j1", kT0, 240, 0.4, night));
  ASSERT_EQ(Alerts("j1").size(), 1u);

  // The service at night: tokens, busy time and OFU halve together.
  std::vector<v1::OfuWindow> svc = Windows("svc-night", kT0, 240, 0.4, night);
  for (v1::OfuWindow& w : svc) w.set_gr_engine_active_mean(2 * w.ofu());
  ASSERT_NO_FATAL_FAILURE(ServingCounters(*pg_, "svc-night", 240, [&](int m) {
    return 2500 * svc[static_cast<size_t>(m)].ofu();
  }, /*restart_at=*/60));
  Push(svc);
  EXPECT_TRUE(Alerts("svc-night").empty()) << Alerts("svc-night")[0].summary();

  // The slow release at minute 150: the same traffic, 2.5x the busy time per token.
  std::vector<v1::OfuWindow> slow = Windows("svc-slow", kT0, 240, 0.18);
  for (size_t m = 0; m < slow.size(); ++m) {
    slow[m].set_gr_engine_active_mean((m >= 150 ? 5 : 2) * slow[m].ofu());
  }
  ASSERT_NO_FATAL_FAILURE(ServingCounters(*pg_, "svc-slow", 240, [&](int m) {
    return 22000 * slow[static_cast<size_t>(m)].ofu();
  }));
  Push(slow);
  std::vector<v1::Alert> alerts = Alerts("svc-slow");
  ASSERT_EQ(alerts.size(), 1u);
  const v1::Alert& a = alerts[0];
  EXPECT_EQ(a.kind(), v1::ALERT_KIND_REGRESSION_IN_JOB);
  EXPECT_EQ(a.labels().at("workload_kind"), "inference");
  EXPECT_EQ(api::TimestampToUnixMs(a.evidence().onset_time()), (kT0 + 150 * 60) * 1000);
  const v1::ServingEvidence& e = a.evidence().serving();
  EXPECT_NEAR(e.gpu_seconds_per_token_after() / e.gpu_seconds_per_token_before(), 2.5, 0.05);
  EXPECT_NEAR(e.load_after_tokens_per_s(), 22000 * 0.18, 0.05 * 22000 * 0.18);
  EXPECT_NEAR(e.load_before_tokens_per_s(), e.load_after_tokens_per_s(),
              0.05 * e.load_after_tokens_per_s());
  EXPECT_GE(e.comparable_windows(), 100);
  EXPECT_NE(a.summary().find("GPU time per token rose"), std::string::npos) << a.summary();
  EXPECT_NE(a.description().find("inference service"), std::string::npos) << a.description();
}

TEST(AlertingConfig, RoutesAndRulesLoadAndBadOnesAreNamed) {
  auto tree = platform::ConfigTree::LoadString(R"(
alerting:
  dashboard_url: https://goodput.example
  default_targets: [am-default]
  routes:
    - match: {cluster: eos, severity: critical}
      targets: [slurm-eos, am-prod]
      continue: true
    - match: {team: llm}
      targets: hook-llm
  severity_rules:
    - match: {team: llm}
      min_factor: 1.5
      severity: critical
)");
  ASSERT_TRUE(tree.ok()) << tree.status();
  auto c = LoadAlertingConfig(*tree);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->engine.routing.routes.size(), 2u);
  EXPECT_TRUE(c->engine.routing.routes[0].continue_matching);
  EXPECT_EQ(c->engine.routing.routes[1].targets, std::vector<std::string>{"hook-llm"});
  EXPECT_EQ(c->engine.routing.default_targets, std::vector<std::string>{"am-default"});
  ASSERT_EQ(c->engine.severity_rules.size(), 1u);
  EXPECT_EQ(c->engine.dashboard_url, "https://goodput.example");

  auto bad = platform::ConfigTree::LoadString(R"(
alerting:
  routes:
    - match: {colour: red}
      targets: [x]
)");
  ASSERT_TRUE(bad.ok());
  auto refused = LoadAlertingConfig(*bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("alerting.routes[0].match.colour"), std::string::npos)
      << refused.status();
  auto bad_severity = platform::ConfigTree::LoadString(
      "alerting: {severity_rules: [{match: {kind: idle_gpus}, severity: urgent}]}");
  ASSERT_TRUE(bad_severity.ok());
  EXPECT_NE(LoadAlertingConfig(*bad_severity).status().message().find("urgent"), std::string::npos);
  // The platform's own backlog: its two keys, in range.
  auto lag = platform::ConfigTree::LoadString(
      "alerting: {expected_window_delay_s: 90, platform_lag_alert_s: 600}");
  ASSERT_TRUE(lag.ok());
  auto lagging = LoadAlertingConfig(*lag);
  ASSERT_TRUE(lagging.ok()) << lagging.status();
  EXPECT_EQ(lagging->engine.platform_lag.expected_window_delay_s, 90);
  EXPECT_EQ(lagging->engine.platform_lag.alert_after_s, 600);
  auto too_eager = platform::ConfigTree::LoadString("alerting: {platform_lag_alert_s: 5}");
  ASSERT_TRUE(too_eager.ok());
  EXPECT_NE(LoadAlertingConfig(*too_eager).status().message().find("alerting.platform_lag_alert_s"),
            std::string::npos);
}

// Every kind crosses the API both ways (a kind the API names but the engine cannot read back
// would be refused as a filter and sent under another kind's name).
TEST(AlertProto, EveryKindRoundTripsThroughTheApi) {
  for (Kind k : kAllKinds) {
    EXPECT_TRUE(v1::AlertKind_IsValid(KindToProto(k))) << KindName(k);
    EXPECT_EQ(KindFromProto(KindToProto(k)), k) << KindName(k);
    EXPECT_EQ(absl::AsciiStrToLower(v1::AlertKind_Name(KindToProto(k)).substr(11)), KindName(k));
  }
  EXPECT_FALSE(KindFromProto(v1::ALERT_KIND_UNSPECIFIED));
  EXPECT_FALSE(KindFromProto(static_cast<v1::AlertKind>(std::size(kAllKinds) + 1)));
}

// Carbon and cost rates per site (alerting.reports.sites): loaded, and a bad entry named.
TEST(AlertingConfig, ReportSitesLoadAndBadOnesAreNamed) {
  auto tree = platform::ConfigTree::LoadString(R"(
alerting:
  reports:
    ofu_address: 127.0.0.1:1
    sites:
      - {cluster: "*", pue: 1.4, grid_gco2e_per_kwh: 400}
      - {cluster: eos, pue: 1.15, currency: EUR, price_per_gpu_hour: 2.10, price_per_kwh: 0.18}
)");
  ASSERT_TRUE(tree.ok()) << tree.status();
  auto o = LoadReporterOptions(*tree);
  ASSERT_TRUE(o.ok()) << o.status();
  ASSERT_EQ(o->sites.size(), 2u);
  EXPECT_EQ(core::RatesFor(o->sites, "eos")->currency, "EUR");
  EXPECT_EQ(core::RatesFor(o->sites, "eos")->price_per_kwh, 0.18);
  EXPECT_EQ(core::RatesFor(o->sites, "other")->grid_gco2e_per_kwh, 400);
  auto refused = [](const std::string& sites) {
    auto t = platform::ConfigTree::LoadString(
        absl::StrCat("alerting:\n  reports:\n    ofu_address: 127.0.0.1:1\n    sites: ", sites, "\n"));
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? std::string(LoadReporterOptions(*t).status().message()) : "";
  };
  EXPECT_EQ(refused("[{cluster: eos, pue: 0.9}]"),
            "config key alerting.reports.sites[0].pue: 0.9 is outside [1, 5] (facility energy / "
            "IT energy)");
  EXPECT_EQ(refused("[{cluster: eos, pue: high}]"),
            "config key alerting.reports.sites[0].pue: \"high\" is not a number");
  EXPECT_TRUE(absl::StartsWith(refused("[{cluster: eos, colour: red}]"),
                               "config key alerting.reports.sites[0].colour: unknown key "
                               "(cluster, pue, "));
  EXPECT_EQ(refused("[{cluster: eos}, {cluster: eos}]"),
            "config key alerting.reports.sites[1].cluster: \"eos\" has rates already");
  EXPECT_EQ(refused("{cluster: eos}"), "config key alerting.reports.sites: expected a list");
}

}  // namespace
}  // namespace goodput::alerting
