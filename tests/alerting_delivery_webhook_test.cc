// Webhook delivery against a receiver on loopback: the body arrives signed (HMAC-SHA256 over
// timestamp and body, checked here with OpenSSL directly), exactly once across a retry after
// the receiver was down; a failing receiver's attempts are recorded with their errors and
// backed off; permanent refusals and exhausted retries end as failed; rate limits postpone
// rows (in Redis, and in-process while Redis is down) without losing any.
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <deque>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "httplib.h"
#include "services/alerting/targets/webhook_target.h"
#include "services/platform/redis_client.h"
#include "tests/alerting_delivery_fixture.h"
#include "tests/support/free_port.h"
#include "tests/support/redis_server.h"

namespace goodput::alerting {
namespace {

constexpr char kSecret[] = "whsec-test-0123";

std::string HmacHex(const std::string& key, const std::string& text) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(text.data()), text.size(), mac, &len);
  return absl::BytesToHexString(std::string(reinterpret_cast<char*>(mac), len));
}

// A webhook receiver as a careful integrator writes one: it checks the signature, and acts on
// each idempotency key once.
class HookReceiver {
 public:
  struct Request {
    std::string key;
    std::string timestamp;
    std::string signature;
    std::string body;
    bool signature_ok = false;
  };

  ~HookReceiver() { Stop(); }

  void Start(int port) {
    server_ = std::make_unique<httplib::Server>();
    server_->Post("/hook", [this](const httplib::Request& req, httplib::Response& res) {
      absl::MutexLock lock(&mu_);
      Request r{.key = req.get_header_value("Idempotency-Key"),
                .timestamp = req.get_header_value("X-Goodput-Timestamp"),
                .signature = req.get_header_value("X-Goodput-Signature"),
                .body = req.body};
      r.signature_ok = r.signature == "sha256=" + HmacHex(kSecret, r.timestamp + "." + req.body);
      requests_.push_back(r);
      int code = 200;
      if (!responses_.empty()) {
        code = responses_.front();
        responses_.pop_front();
      }
      if (code == 200 && r.signature_ok && !acted_.count(r.key)) acted_[r.key] = r.body;
      res.status = code;
      res.set_content(code == 200 ? "ok" : "try later", "text/plain");
    });
    ASSERT_TRUE(server_->bind_to_port("127.0.0.1", port));
    thread_ = std::thread([this] { server_->listen_after_bind(); });
    while (!server_->is_running()) std::this_thread::yield();
  }
  void Stop() {
    if (server_) server_->stop();
    if (thread_.joinable()) thread_.join();
    server_.reset();
  }
  void AnswerNext(std::vector<int> codes) {
    absl::MutexLock lock(&mu_);
    responses_.assign(codes.begin(), codes.end());
  }
  std::vector<Request> requests() {
    absl::MutexLock lock(&mu_);
    return requests_;
  }
  // What it acted on, by key: the first accepted body of each key.
  std::map<std::string, std::string> acted() {
    absl::MutexLock lock(&mu_);
    return acted_;
  }

 private:
  absl::Mutex mu_;
  std::vector<Request> requests_;
  std::deque<int> responses_;
  std::map<std::string, std::string> acted_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
};

class WebhookDeliveryTest : public DeliveryTest {
 protected:
  void SetUp() override {
    DeliveryTest::SetUp();
    auto port = testing::FreePort();
    ASSERT_TRUE(port.ok());
    port_ = *port;
  }
  std::vector<std::unique_ptr<Target>> Hook() {
    std::vector<std::unique_ptr<Target>> t;
    t.push_back(std::make_unique<WebhookTarget>(
        WebhookTargetConfig{.name = "hook",
                            .url = absl::StrCat("http://127.0.0.1:", port_, "/hook"),
                            .secret = kSecret,
                            .timeout = absl::Seconds(5)}));
    return t;
  }
  int port_ = 0;
  HookReceiver receiver_;
};

TEST_F(WebhookDeliveryTest, SignedBodyArrivesExactlyOnceAcrossARetryAfterTheReceiverWasDown) {
  auto worker = MakeWorker(Hook());
  EnqueueOrDie(TestNotification(1, "firing"), {"hook"});

  // Receiver down: the attempt is recorded with its error and retried after the backoff.
  const absl::Time t0 = clock_.Now();
  EXPECT_EQ(StepOrDie(*worker, "hook").retrying, 1);
  std::vector<DeliveryRecord> d = Deliveries(1);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].status, "pending");
  EXPECT_EQ(d[0].attempts, 1);
  EXPECT_TRUE(absl::StrContains(d[0].last_error, "UNAVAILABLE")) << d[0].last_error;
  ASSERT_TRUE(d[0].next_attempt_time.has_value());
  EXPECT_EQ(absl::FromChrono(*d[0].next_attempt_time), t0 + absl::Seconds(5));
  EXPECT_EQ(Query("SELECT count(*) FILTER (WHERE NOT ok AND error LIKE 'UNAVAILABLE%') "
                  "FROM alert_delivery_attempts"),
            "1");
  // Not due yet: nothing is sent.
  EXPECT_EQ(StepOrDie(*worker, "hook").retrying, 0);

  receiver_.Start(port_);
  clock_.Advance(absl::Seconds(5));
  EXPECT_EQ(StepOrDie(*worker, "hook").delivered, 1);
  std::vector<HookReceiver::Request> got = receiver_.requests();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(got[0].signature_ok) << got[0].signature;
  EXPECT_EQ(got[0].key, "1:hook:firing");
  EXPECT_EQ(got[0].timestamp, absl::StrCat(absl::ToUnixSeconds(clock_.Now())));
  nlohmann::json body = nlohmann::json::parse(got[0].body);
  EXPECT_EQ(body["idempotency_key"], "1:hook:firing");
  EXPECT_EQ(body["state"], "firing");
  EXPECT_EQ(body["job_id"], "4242");
  EXPECT_EQ(body["summary"], "OFU fell 2.5x at 14:02 (58% -> 23%)");
  EXPECT_EQ(body["factor"], 2.5);
  d = Deliveries(1);
  EXPECT_EQ(d[0].status, "delivered");
  EXPECT_EQ(d[0].attempts, 2);
  EXPECT_EQ(Query("SELECT string_agg(attempt || ':' || ok, ',' ORDER BY attempt) "
                  "FROM alert_delivery_attempts"),
            "1:false,2:true");

  // Delivered rows are not sent again.
  clock_.Advance(absl::Hours(1));
  EXPECT_EQ(StepOrDie(*worker, "hook").delivered, 0);
  EXPECT_EQ(receiver_.requests().size(), 1u);

  // A sender that stopped between the send and the mark sends again: same key, so the
  // receiver acts once.
  ASSERT_TRUE(pg_->Execute("goodput",
                           "UPDATE alert_outbox SET status = 'pending', "
                           "next_attempt_at = now() - interval '1 hour'")
                  .ok());
  EXPECT_EQ(StepOrDie(*worker, "hook").delivered, 1);
  got = receiver_.requests();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1].key, got[0].key);
  EXPECT_TRUE(got[1].signature_ok);
  EXPECT_EQ(receiver_.acted().size(), 1u);
}

TEST_F(WebhookDeliveryTest, FailingReceiverAttemptsAreRecordedAndBackOffUntilOneDelivery) {
  receiver_.Start(port_);
  receiver_.AnswerNext({503, 503, 503});
  auto worker = MakeWorker(Hook());
  EnqueueOrDie(TestNotification(7, "firing"), {"hook"});

  const std::vector<absl::Duration> backoff = {absl::Seconds(5), absl::Seconds(10),
                                               absl::Seconds(20)};
  for (size_t i = 0; i < backoff.size(); ++i) {
    EXPECT_EQ(StepOrDie(*worker, "hook").retrying, 1) << "attempt " << i + 1;
    std::vector<DeliveryRecord> d = Deliveries(7);
    ASSERT_TRUE(d[0].next_attempt_time.has_value());
    EXPECT_EQ(absl::FromChrono(*d[0].next_attempt_time) - clock_.Now(), backoff[i]);
    EXPECT_TRUE(absl::StrContains(d[0].last_error, "answered HTTP 503: try later"))
        << d[0].last_error;
    // One second before it is due, nothing happens.
    clock_.Advance(backoff[i] - absl::Seconds(1));
    EXPECT_EQ(StepOrDie(*worker, "hook").retrying, 0);
    clock_.Advance(absl::Seconds(1));
  }
  EXPECT_EQ(StepOrDie(*worker, "hook").delivered, 1);
  EXPECT_EQ(Query("SELECT string_agg(attempt || ':' || ok || ':' || (error LIKE '%HTTP 503%'), ',' "
                  "ORDER BY attempt) FROM alert_delivery_attempts"),
            "1:false:true,2:false:true,3:false:true,4:true:false");
  std::vector<HookReceiver::Request> got = receiver_.requests();
  ASSERT_EQ(got.size(), 4u);
  for (const auto& r : got) EXPECT_EQ(r.key, "7:hook:firing");
  EXPECT_EQ(receiver_.acted().size(), 1u);
  EXPECT_EQ(Deliveries(7)[0].status, "delivered");
}

TEST_F(WebhookDeliveryTest, RefusedOrExhaustedDeliveriesEndAsFailed) {
  receiver_.Start(port_);
  receiver_.AnswerNext({400});
  auto worker = MakeWorker(Hook(), nullptr, RetryPolicy{.jitter = 0, .max_attempts = 2});
  EnqueueOrDie(TestNotification(1, "firing"), {"hook"});
  EXPECT_EQ(StepOrDie(*worker, "hook").failed, 1);
  std::vector<DeliveryRecord> d = Deliveries(1);
  EXPECT_EQ(d[0].status, "failed");
  EXPECT_TRUE(absl::StrContains(d[0].last_error, "INVALID_ARGUMENT")) << d[0].last_error;
  EXPECT_FALSE(d[0].next_attempt_time.has_value());

  receiver_.AnswerNext({500, 500});
  EnqueueOrDie(TestNotification(2, "firing"), {"hook"});
  EXPECT_EQ(StepOrDie(*worker, "hook").retrying, 1);
  clock_.Advance(absl::Seconds(5));
  EXPECT_EQ(StepOrDie(*worker, "hook").failed, 1);
  d = Deliveries(2);
  EXPECT_EQ(d[0].status, "failed");
  EXPECT_EQ(d[0].attempts, 2);
  EXPECT_TRUE(absl::StrContains(d[0].last_error, "gave up after 2 attempts")) << d[0].last_error;
  clock_.Advance(absl::Hours(1));
  EXPECT_EQ(StepOrDie(*worker, "hook").failed, 0);
  EXPECT_EQ(receiver_.requests().size(), 3u);
}

TEST_F(WebhookDeliveryTest, RateLimitPostponesRowsInRedisAndInProcessWhenRedisIsDown) {
  receiver_.Start(port_);
  auto redis_server = testing::RedisServer::Create();
  ASSERT_TRUE(redis_server.ok()) << redis_server.status();
  auto redis = platform::RedisClient::Create({.host = (*redis_server)->host(),
                                              .port = (*redis_server)->port(),
                                              .connect_timeout = absl::Milliseconds(500),
                                              .command_timeout = absl::Milliseconds(500)});
  ASSERT_TRUE(redis.ok());
  RateLimiter limiter(redis->get(), platform::Logger());
  limiter.SetLimit("hook", RateLimit{.per_minute = 60, .burst = 1});
  auto worker = MakeWorker(Hook(), &limiter);
  for (int id = 1; id <= 3; ++id) EnqueueOrDie(TestNotification(id, "firing"), {"hook"});

  StepResult r = StepOrDie(*worker, "hook");
  EXPECT_EQ(r.delivered, 1);
  EXPECT_EQ(r.postponed, 2);
  EXPECT_FALSE(limiter.using_fallback());
  // Postponed rows wait without an attempt being counted.
  EXPECT_EQ(Query("SELECT count(*) FROM alert_outbox WHERE status = 'pending' AND attempts = 0"),
            "2");
  // The bucket lives in Redis, shared by all replicas.
  auto exists = (*redis)->Command({"HEXISTS", "alerting:ratelimit:hook", "tokens"});
  ASSERT_TRUE(exists.ok()) << exists.status();
  EXPECT_EQ(*exists->AsInt(), 1);

  clock_.Advance(absl::Seconds(1));
  r = StepOrDie(*worker, "hook");
  EXPECT_EQ(r.delivered, 1);
  EXPECT_EQ(r.postponed, 1);

  // Redis goes away: each replica limits on its own, and nothing is lost.
  ASSERT_TRUE((*redis_server)->Stop().ok());
  clock_.Advance(absl::Seconds(1));
  r = StepOrDie(*worker, "hook");
  EXPECT_EQ(r.delivered, 1);
  EXPECT_TRUE(limiter.using_fallback());
  for (int id = 4; id <= 5; ++id) EnqueueOrDie(TestNotification(id, "firing"), {"hook"});
  r = StepOrDie(*worker, "hook");
  EXPECT_EQ(r.delivered, 0);
  EXPECT_EQ(r.postponed, 2);
  for (int i = 0; i < 2; ++i) {
    clock_.Advance(absl::Seconds(1));
    EXPECT_EQ(StepOrDie(*worker, "hook").delivered, 1);
  }
  EXPECT_EQ(Query("SELECT count(*) FROM alert_outbox WHERE status = 'delivered'"), "5");
  EXPECT_EQ(receiver_.acted().size(), 5u);
  EXPECT_EQ(receiver_.requests().size(), 5u);
}

}  // namespace
}  // namespace goodput::alerting
