// goodput-alerting killed in the middle of a delivery and started again: the attempt it was
// making is on record as having no outcome, the restarted service sends the row again once
// its claim lapses, with the same idempotency key, so the receiver acts on it once.
#include <signal.h>

#include <thread>

#include "absl/strings/match.h"
#include "httplib.h"
#include "tests/alerting_delivery_fixture.h"
#include "tests/support/redis_server.h"

namespace goodput::alerting {
namespace {

// A receiver that acts on a key the first time it sees it, and can be made to hang before
// answering (the sender dies waiting).
class HangingReceiver {
 public:
  HangingReceiver() {
    server_.Post("/hook", [this](const httplib::Request& req, httplib::Response& res) {
      absl::MutexLock lock(&mu_);
      const std::string key = req.get_header_value("Idempotency-Key");
      keys_.push_back(key);
      if (std::find(acted_.begin(), acted_.end(), key) == acted_.end()) acted_.push_back(key);
      mu_.Await(absl::Condition(
          +[](bool* hang) { return !*hang; }, &hang_));
      res.status = 200;
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::yield();
  }
  ~HangingReceiver() {
    Release();
    server_.stop();
    thread_.join();
  }
  void Hang() {
    absl::MutexLock lock(&mu_);
    hang_ = true;
  }
  void Release() {
    absl::MutexLock lock(&mu_);
    hang_ = false;
  }
  std::vector<std::string> keys() {
    absl::MutexLock lock(&mu_);
    return keys_;
  }
  std::vector<std::string> acted() {
    absl::MutexLock lock(&mu_);
    return acted_;
  }
  int port() const { return port_; }

 private:
  absl::Mutex mu_;
  bool hang_ = false;
  std::vector<std::string> keys_;
  std::vector<std::string> acted_;
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
};

class DeliveryRestartTest : public DeliveryTest {};

TEST_F(DeliveryRestartTest, KilledMidDeliveryRestartsAndTheReceiverActsOnce) {
  auto redis = testing::RedisServer::Create();
  ASSERT_TRUE(redis.ok()) << redis.status();
  HangingReceiver receiver;
  receiver.Hang();
  const std::string config =
      absl::StrCat("postgres: {dsn: '", pg_->Dsn("goodput"), "'}\n",
                   "redis: {host: 127.0.0.1, port: ", (*redis)->port(), "}\n",
                   "alerting:\n"
                   "  delivery: {claim_lease_s: 2, poll_interval_s: 0.2}\n"
                   "  targets:\n"
                   "    - {name: hook, kind: webhook, url: 'http://127.0.0.1:",
                   receiver.port(), "/hook', secret: s3cret, timeout_s: 60}\n");
  EnqueueOrDie(TestNotification(1, "firing"), {"hook"});

  auto first = testing::ServiceProcess::Start(
      {.binary = testing::BuiltBinary("services/alerting/goodput-alerting"),
       .config_yaml = config});
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(testing::PollUntil([&] { return receiver.keys().size() == 1; }, absl::Seconds(20)));
  // Killed while the receiver has the notification but has not answered.
  ASSERT_TRUE((*first)->process().Signal(SIGKILL).ok());
  ASSERT_TRUE((*first)->process().Wait(absl::Seconds(10)).ok());
  receiver.Release();
  EXPECT_EQ(Query("SELECT status || ':' || attempts FROM alert_outbox"), "pending:1");
  EXPECT_EQ(Query("SELECT error FROM alert_delivery_attempts WHERE attempt = 1"),
            "no outcome recorded: the sender stopped during the attempt");

  auto second = testing::ServiceProcess::Start(
      {.binary = testing::BuiltBinary("services/alerting/goodput-alerting"),
       .config_yaml = config});
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_TRUE(testing::PollUntil(
      [&] { return Query("SELECT status FROM alert_outbox") == "delivered"; }, absl::Seconds(30)))
      << (*second)->process().LogTail();
  EXPECT_EQ(receiver.keys(), (std::vector<std::string>{"1:hook:firing", "1:hook:firing"}));
  EXPECT_EQ(receiver.acted(), (std::vector<std::string>{"1:hook:firing"}));
  EXPECT_EQ(Query("SELECT string_agg(attempt || ':' || ok, ',' ORDER BY attempt) "
                  "FROM alert_delivery_attempts"),
            "1:false,2:true");
  httplib::Client metrics("127.0.0.1", (*second)->http_port());
  auto res = metrics.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_TRUE(absl::StrContains(
      res->body,
      "goodput_alerting_delivery_outcomes_total{target=\"hook\",outcome=\"delivered\"} 1"))
      << res->body;
  EXPECT_TRUE(absl::StrContains(res->body, "goodput_alerting_delivery_rate_limit_local 0"));
}

}  // namespace
}  // namespace goodput::alerting

namespace goodput::alerting {
namespace {

TEST_F(DeliveryRestartTest, RefusesToStartWithARouteToAnUnknownTarget) {
  auto redis = testing::RedisServer::Create();
  ASSERT_TRUE(redis.ok()) << redis.status();
  auto started = testing::ServiceProcess::Start(
      {.binary = testing::BuiltBinary("services/alerting/goodput-alerting"),
       .config_yaml =
           absl::StrCat("postgres: {dsn: '", pg_->Dsn("goodput"), "'}\n",
                        "redis: {host: 127.0.0.1, port: ", (*redis)->port(), "}\n",
                        "alerting:\n"
                        "  routes:\n"
                        "    - {match: {cluster: eos}, targets: [am-prod, am-typo]}\n"
                        "  targets:\n"
                        "    - {name: am-prod, kind: alertmanager, url: 'http://127.0.0.1:1'}\n")});
  ASSERT_FALSE(started.ok());
  EXPECT_TRUE(absl::StrContains(started.status().message(),
                                "alerting.routes[0].targets: \"am-typo\" is not a target in "
                                "alerting.targets (am-prod)"))
      << started.status();
}

}  // namespace
}  // namespace goodput::alerting
