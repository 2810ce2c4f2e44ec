// ofu -> alerting end to end with the real binaries, PostgreSQL and Redis: samples of a job
// whose OFU falls 2.5x are stored, goodput-ofu computes and forwards its windows, and
// goodput-alerting raises exactly one regression_in_job alert with one outbox row per routed
// target, which its delivery worker sends to two webhooks once each. Killed with SIGKILL and
// restarted, alerting is caught up again and adds and sends nothing.

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "goodput/v1/alert.grpc.pb.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "tests/support/child_process.h"
#include "tests/support/free_port.h"
#include "tests/support/postgres_server.h"
#include "tests/support/redis_server.h"
#include "tests/support/service_process.h"
#include "tests/support/test_steps.h"
#include "tests/support/webhook_receiver.h"

namespace goodput::alerting {
namespace {

using ::goodput::testing::BuiltBinary;
using ::goodput::testing::PollUntil;
using ::goodput::testing::PostgresServer;
using ::goodput::testing::RedisServer;
using ::goodput::testing::ServiceProcess;
using ::goodput::testing::SourceDir;
namespace v1 = ::goodput::v1;

constexpr goodput::testing::RegressingJobShape kJob;


class AlertingProcess : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(goodput::testing::StartPostgres(&pg_));
    ASSERT_NO_FATAL_FAILURE(goodput::testing::StartRedis(&redis_));
    // Recent enough that the job's telemetry is not "stopped" for the sweep.
    start_ms_ = (absl::ToUnixSeconds(absl::Now()) / 60 - kJob.minutes - 5) * 60 * 1000;
  }

  std::string Common() const {
    return goodput::testing::PostgresConfigYaml(*pg_) + goodput::testing::RedisConfigYaml(*redis_);
  }

  absl::StatusOr<std::unique_ptr<ServiceProcess>> StartAlerting(int grpc_port, int hook_port) {
    const std::string hook = absl::StrCat("http://127.0.0.1:", hook_port, "/hook");
    return ServiceProcess::Start(
        {.binary = BuiltBinary("services/alerting/goodput-alerting"),
         .config_yaml = absl::StrCat(Common(), "grpc:\n  port: ", grpc_port,
                                     "\nalerting:\n  sweep_interval_s: 1\n"
                                     "  routes:\n    - match: {cluster: c1}\n"
                                     "      targets: [hook-a, hook-b]\n"
                                     "  default_targets: [hook-a]\n"
                                     "  delivery: {poll_interval_s: 0.2}\n"
                                     "  targets:\n"
                                     "    - {name: hook-a, kind: webhook, url: \"",
                                     hook,
                                     "\", secret: s3cret}\n"
                                     "    - {name: hook-b, kind: webhook, url: \"",
                                     hook, "\", secret: s3cret}\n"),
         .extra_args = goodput::testing::MigrateArgs()});
  }

  absl::StatusOr<std::unique_ptr<ServiceProcess>> StartOfu(const std::string& alerting) {
    return ServiceProcess::Start(
        {.binary = BuiltBinary("services/ofu/goodput-ofu"),
         .config_yaml = absl::StrCat(Common(),
                                     "ofu:\n  poll_interval_s: 0.1\n  idle_flush_s: 2\n"
                                     "  forward:\n    alerting_address: \"",
                                     alerting, "\"\n    timeout_s: 5\n"),
         .extra_args = goodput::testing::MigrateArgs()});
  }

  void Sql(const std::string& sql) {
    absl::Status s = pg_->Execute("goodput", sql);
    ASSERT_TRUE(s.ok()) << s;
  }
  int64_t Value(const std::string& sql) {
    auto v = pg_->QueryValue("goodput", sql);
    return v.ok() && !v->empty() ? std::stoll(*v) : -1;
  }

  // A job on 4 GPUs: warm-up, steady at ~50% tensor activity, then 2.5x lower.
  void StoreJob() {
    goodput::testing::ExecuteAll(*pg_, goodput::testing::RegressingJobSql("j1", start_ms_, kJob));
  }

  std::vector<v1::Alert> Alerts(ServiceProcess& alerting) {
    auto stub = v1::AlertService::NewStub(alerting.Channel());
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::ListAlertsRequest req;
    v1::ListAlertsResponse resp;
    if (!stub->ListAlerts(&ctx, req, &resp).ok()) return {};
    return {resp.alerts().begin(), resp.alerts().end()};
  }

  std::unique_ptr<PostgresServer> pg_;
  std::unique_ptr<RedisServer> redis_;
  int64_t start_ms_ = 0;
};

TEST_F(AlertingProcess, OfuWindowsOfARegressingJobRaiseOneAlertAndARestartAddsNothing) {
  auto port = goodput::testing::FreePort();
  ASSERT_TRUE(port.ok());
  auto hook_port = goodput::testing::FreePort();
  ASSERT_TRUE(hook_port.ok());
  testing::WebhookReceiver hooks(*hook_port);
  ASSERT_TRUE(hooks.ok());
  auto alerting = StartAlerting(*port, *hook_port);
  ASSERT_TRUE(alerting.ok()) << alerting.status();
  auto ofu = StartOfu(absl::StrCat("127.0.0.1:", *port));
  ASSERT_TRUE(ofu.ok()) << ofu.status();
  StoreJob();

  ASSERT_TRUE(PollUntil([&] { return !Alerts(**alerting).empty(); }, absl::Seconds(90)))
      << "no alert; windows received: " << Value("SELECT count(*) FROM alert_windows");
  // Let ofu finish forwarding everything, then look.
  ASSERT_TRUE(PollUntil(
      [&] {
        return Value("SELECT count(*) FROM alert_windows") >= kJob.minutes - 1 &&
               Value("SELECT coalesce(max(acked_seq), 0) FROM ofu_forward_state") ==
                   Value("SELECT coalesce(max(commit_seq), 0) FROM ofu_windows WHERE gpu = ''");
      },
      absl::Seconds(90)));
  std::vector<v1::Alert> alerts = Alerts(**alerting);
  ASSERT_EQ(alerts.size(), 1u);
  EXPECT_EQ(alerts[0].kind(), v1::ALERT_KIND_REGRESSION_IN_JOB);
  EXPECT_NEAR(alerts[0].evidence().factor(), 2.5, 0.25);
  EXPECT_NEAR(static_cast<double>(alerts[0].evidence().onset_time().seconds()),
              static_cast<double>(start_ms_ / 1000 + kJob.drop_minute * 60), 60.0);
  EXPECT_EQ(Value("SELECT count(*) FROM alert_outbox WHERE state = 'firing'"), 2);
  {
    httplib::Client http("127.0.0.1", (*alerting)->http_port());
    auto metrics = http.Get("/metrics");
    ASSERT_TRUE(metrics);
    EXPECT_NE(metrics->body.find("goodput_alerting_alert_changes_total{kind=\"ALERT_KIND_"
                                 "REGRESSION_IN_JOB\",change=\"ALERT_CHANGE_FIRED\"} 1"),
              std::string::npos)
        << metrics->body;
  }
  // Delivery sends each row once.
  ASSERT_TRUE(PollUntil(
      [&] { return Value("SELECT count(*) FROM alert_outbox WHERE status = 'delivered'") == 2; },
      absl::Seconds(60)));
  std::vector<std::string> keys = hooks.keys();
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(keys, (std::vector<std::string>{absl::StrCat(alerts[0].alert_id(), ":hook-a:firing"),
                                            absl::StrCat(alerts[0].alert_id(), ":hook-b:firing")}));

  // alerting dies; ofu keeps forwarding into the void, then alerting returns and is caught up.
  ASSERT_TRUE((*alerting)->process().Signal(SIGKILL).ok());
  (void)(*alerting)->process().Wait(absl::Seconds(30));
  Sql("UPDATE ofu_forward_state SET acked_seq = 0");  // as if ofu had lost its acknowledgements
  alerting = StartAlerting(*port, *hook_port);
  ASSERT_TRUE(alerting.ok()) << alerting.status();
  ASSERT_TRUE(PollUntil(
      [&] {
        return Value("SELECT coalesce(max(acked_seq), 0) FROM ofu_forward_state") ==
               Value("SELECT coalesce(max(commit_seq), 0) FROM ofu_windows WHERE gpu = ''");
      },
      absl::Seconds(90)));
  alerts = Alerts(**alerting);
  ASSERT_EQ(alerts.size(), 1u);
  EXPECT_EQ(Value("SELECT count(*) FROM alerts"), 1);
  EXPECT_EQ(Value("SELECT count(*) FROM alert_outbox"), 2);
  EXPECT_EQ(hooks.keys().size(), 2u);
}

// A detector checkpoint row is read back from PostgreSQL: one nested a million levels deep
// (what a segfault at every sweep was made of) is logged by its key, dropped and rebuilt from
// the job's windows, and the service keeps evaluating and serving.
TEST_F(AlertingProcess, ADeeplyNestedCheckpointRowIsLoggedAndRebuiltNotACrash) {
  auto port = goodput::testing::FreePort();
  ASSERT_TRUE(port.ok());
  auto hook_port = goodput::testing::FreePort();
  ASSERT_TRUE(hook_port.ok());
  testing::WebhookReceiver hooks(*hook_port);
  ASSERT_TRUE(hooks.ok());
  auto alerting = StartAlerting(*port, *hook_port);
  ASSERT_TRUE(alerting.ok()) << alerting.status();
  auto ofu = StartOfu(absl::StrCat("127.0.0.1:", *port));
  ASSERT_TRUE(ofu.ok()) << ofu.status();
  StoreJob();
  ASSERT_TRUE(PollUntil([&] { return !Alerts(**alerting).empty(); }, absl::Seconds(90)))
      << "no alert; windows received: " << Value("SELECT count(*) FROM alert_windows");
  ASSERT_TRUE(PollUntil(
      [&] {
        return Value("SELECT count(*) FROM alert_job_state WHERE checkpoint IS NOT NULL") == 1;
      },
      absl::Seconds(90)));
  ofu->reset();  // nothing new arrives: the sweep alone evaluates the job again

  // A restart empties the detector cache, so the next evaluation reads the checkpoint row.
  ASSERT_TRUE((*alerting)->process().Signal(SIGKILL).ok());
  (void)(*alerting)->process().Wait(absl::Seconds(30));
  Sql("UPDATE alert_job_state SET checkpoint = decode(repeat('81', 1000000) || '80', 'hex'), "
      "evaluated_end = NULL, updated_at = now() - interval '1 day'");
  alerting = StartAlerting(*port, *hook_port);
  ASSERT_TRUE(alerting.ok()) << alerting.status();
  const std::filesystem::path log = (*alerting)->dir() / "service.log";
  ASSERT_TRUE(PollUntil(
      [&] {
        return goodput::testing::ReadFileTail(log, 1 << 20).find("bad detector checkpoint") !=
               std::string::npos;
      },
      absl::Seconds(90)))
      << "alive: " << (*alerting)->process().IsRunning() << "\n"
      << (*alerting)->process().LogTail();
  const std::string text = goodput::testing::ReadFileTail(log, 1 << 20);
  const std::string line = text.substr(text.find("bad detector checkpoint"), 400);
  EXPECT_NE(line.find("j1"), std::string::npos) << line;
  EXPECT_NE(line.find("max_depth"), std::string::npos) << line;
  EXPECT_EQ(text.find("gYGBgYGB"), std::string::npos);  // never the row's bytes (base64)

  // Rebuilt from the windows: a checkpoint that restores replaces the row, the alert is the
  // one raised before, and the service answers.
  ASSERT_TRUE(PollUntil(
      [&] {
        return Value(
                   "SELECT count(*) FROM alert_job_state WHERE evaluated_end IS NOT NULL "
                   "AND get_byte(checkpoint, 0) <> 129") == 1;
      },
      absl::Seconds(90)))
      << (*alerting)->process().LogTail();
  EXPECT_TRUE((*alerting)->process().IsRunning());
  EXPECT_EQ(Alerts(**alerting).size(), 1u);
  EXPECT_EQ(Value("SELECT count(*) FROM alerts"), 1);
}

}  // namespace
}  // namespace goodput::alerting
