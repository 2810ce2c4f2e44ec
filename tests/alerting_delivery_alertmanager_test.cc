// Alertmanager delivery against a real prometheus-alertmanager: the firing alert shows in its
// GET /api/v2/alerts with the stable labels and the annotations, is re-sent while it fires,
// and its resolution (endsAt) closes it: it leaves the active alerts and Alertmanager's own
// receiver is notified that it resolved, at the time goodput gave.
#include <nlohmann/json.hpp>
#include <thread>

#include "absl/strings/match.h"
#include "httplib.h"
#include "services/alerting/targets/alertmanager_target.h"
#include "tests/alerting_delivery_fixture.h"
#include "tests/support/alertmanager_server.h"
#include "tests/support/free_port.h"

namespace goodput::alerting {
namespace {

// Alertmanager's webhook receiver: collects the notifications it sends.
class NotificationSink {
 public:
  ~NotificationSink() {
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }
  int Start() {
    server_.Post("/am", [this](const httplib::Request& req, httplib::Response& res) {
      absl::MutexLock lock(&mu_);
      received_.push_back(nlohmann::json::parse(req.body, nullptr, false));
      res.status = 200;
    });
    const int port = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::yield();
    return port;
  }
  std::vector<nlohmann::json> received() {
    absl::MutexLock lock(&mu_);
    return received_;
  }

 private:
  absl::Mutex mu_;
  std::vector<nlohmann::json> received_;
  httplib::Server server_;
  std::thread thread_;
};

nlohmann::json ActiveAlerts(const std::string& am_url_host, int port) {
  httplib::Client client(am_url_host, port);
  auto res = client.Get("/api/v2/alerts");
  if (!res || res->status != 200) return nlohmann::json::array();
  return nlohmann::json::parse(res->body, nullptr, false);
}

class AlertmanagerDeliveryTest : public DeliveryTest {};

TEST_F(AlertmanagerDeliveryTest, FiringAlertIsShownResentAndThenResolved) {
  NotificationSink sink;
  const int sink_port = sink.Start();
  auto am = testing::AlertmanagerServer::Create(
      {.config_yaml = absl::StrCat("route:\n"
                                   "  receiver: sink\n"
                                   "  group_by: [alertname, cluster, job_id]\n"
                                   "  group_wait: 0s\n"
                                   "  group_interval: 1s\n"
                                   "  repeat_interval: 1h\n"
                                   "receivers:\n"
                                   "  - name: sink\n"
                                   "    webhook_configs:\n"
                                   "      - url: http://127.0.0.1:",
                                   sink_port,
                                   "/am\n"
                                   "        send_resolved: true\n")});
  ASSERT_TRUE(am.ok()) << am.status();
  const int am_port = (*am)->port();

  std::vector<std::unique_ptr<Target>> targets;
  targets.push_back(std::make_unique<AlertmanagerTarget>(AlertmanagerTargetConfig{
      .name = "am", .url = (*am)->Url(), .resend_interval = absl::Minutes(5)}));
  auto worker = MakeWorker(std::move(targets));
  const Notification firing = TestNotification(3, "firing");
  EnqueueOrDie(firing, {"am"});
  EXPECT_EQ(StepOrDie(*worker, "am").delivered, 1);

  nlohmann::json alerts;
  ASSERT_TRUE(testing::PollUntil(
      [&] {
        alerts = ActiveAlerts("127.0.0.1", am_port);
        return alerts.is_array() && alerts.size() == 1;
      },
      absl::Seconds(10)))
      << alerts.dump() << (*am)->LogTail();
  const nlohmann::json& a = alerts[0];
  EXPECT_EQ(a["labels"]["alertname"], "GoodputRegressionInJob");
  EXPECT_EQ(a["labels"]["cluster"], "eos");
  EXPECT_EQ(a["labels"]["job_id"], "4242");
  EXPECT_EQ(a["labels"]["severity"], "critical");
  EXPECT_EQ(a["labels"]["kind"], "regression_in_job");
  EXPECT_EQ(a["labels"]["team"], "llm");
  EXPECT_EQ(a["annotations"]["summary"], firing.summary);
  EXPECT_EQ(a["annotations"]["description"], firing.description);
  EXPECT_EQ(a["annotations"]["factor"], "2.50");
  EXPECT_EQ(a["annotations"]["dashboard_url"], firing.dashboard_url);
  EXPECT_EQ(a["status"]["state"], "active");
  absl::Time starts;
  std::string err;
  ASSERT_TRUE(absl::ParseTime(absl::RFC3339_full, a["startsAt"].get<std::string>(), &starts, &err));
  EXPECT_EQ(starts, absl::FromChrono(firing.start_time));

  // Re-sent while it fires; not before its interval.
  clock_.Advance(absl::Minutes(4));
  EXPECT_EQ(StepOrDie(*worker, "am").resent, 0);
  clock_.Advance(absl::Minutes(1));
  EXPECT_EQ(StepOrDie(*worker, "am").resent, 1);
  EXPECT_EQ(Query("SELECT attempts FROM alert_outbox WHERE idempotency_key = '3:am:firing'"), "2");
  EXPECT_EQ(ActiveAlerts("127.0.0.1", am_port).size(), 1u);

  // The resolution closes it, and the re-sending stops.
  const Notification resolved = TestNotification(3, "resolved");
  EnqueueOrDie(resolved, {"am"});
  EXPECT_EQ(StepOrDie(*worker, "am").delivered, 1);
  clock_.Advance(absl::Minutes(10));
  EXPECT_EQ(StepOrDie(*worker, "am").resent, 0);
  EXPECT_EQ(Query("SELECT count(*) FROM alert_outbox WHERE resend_at IS NOT NULL"), "0");
  ASSERT_TRUE(testing::PollUntil([&] { return ActiveAlerts("127.0.0.1", am_port).empty(); },
                                 absl::Seconds(10)))
      << ActiveAlerts("127.0.0.1", am_port).dump();

  // Alertmanager told its receiver: first firing, then resolved with goodput's end time.
  nlohmann::json resolved_note;
  ASSERT_TRUE(testing::PollUntil(
      [&] {
        for (const nlohmann::json& note : sink.received()) {
          if (note.is_object() && note.value("status", "") == "resolved") resolved_note = note;
        }
        return !resolved_note.is_null();
      },
      absl::Seconds(20)))
      << "notifications: " << sink.received().size();
  ASSERT_EQ(resolved_note["alerts"].size(), 1u);
  EXPECT_EQ(resolved_note["alerts"][0]["labels"]["job_id"], "4242");
  absl::Time ends;
  ASSERT_TRUE(absl::ParseTime(
      absl::RFC3339_full, resolved_note["alerts"][0]["endsAt"].get<std::string>(), &ends, &err));
  EXPECT_EQ(ends, absl::FromChrono(*resolved.end_time));
  EXPECT_EQ(sink.received().front().value("status", ""), "firing");
}

}  // namespace
}  // namespace goodput::alerting
