// Shared set-up of the alert delivery tests: a real PostgreSQL with the migrations applied,
// the outbox store, a clock the test moves, and helpers to enqueue notifications and read
// back what the outbox recorded.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "services/alerting/delivery_store.h"
#include "services/alerting/delivery_worker.h"
#include "services/alerting/outbox.h"
#include "services/alerting/rate_limiter.h"
#include "services/platform/migrations.h"
#include "services/platform/pg_pool.h"
#include "tests/support/postgres_server.h"
#include "tests/support/service_process.h"

namespace goodput::alerting {

// A clock that moves only when the test says so.
class ManualClock {
 public:
  absl::Time Now() {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void Advance(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    now_ += d;
  }
  std::function<absl::Time()> AsFunction() {
    return [this] { return Now(); };
  }

 private:
  absl::Mutex mu_;
  // Whole seconds, so that times survive the round trip through PostgreSQL exactly; a minute
  // ahead, so that rows the test enqueues (due at PostgreSQL's now()) are due at once.
  absl::Time now_ = absl::FromUnixSeconds(absl::ToUnixSeconds(absl::Now()) + 60);
};

inline Notification TestNotification(int64_t alert_id, const std::string& state,
                                     const std::string& job_id = "4242") {
  Notification n;
  n.alert_id = alert_id;
  n.fingerprint = absl::StrCat("regression_in_job/eos/", job_id);
  n.kind = "regression_in_job";
  n.severity = "critical";
  n.state = state;
  n.cluster = "eos";
  n.job_id = job_id;
  n.scheduler = "slurm";
  n.team = "llm";
  n.user = "alice";
  n.labels = {{"osmo.workflow_id", "llama-pretrain-7"}};
  n.summary = "OFU fell 2.5x at 14:02 (58% -> 23%)";
  n.description = "Same workload ran at 55% last week; look for debug settings or new collectives.";
  n.factor = 2.5;
  n.verdict = "";
  n.dashboard_url = absl::StrCat("https://goodput.example/jobs/eos/", job_id);
  // In the recent past, as peers such as Alertmanager expect of real alerts.
  const int64_t now_s = absl::ToUnixSeconds(absl::Now());
  n.start_time = absl::ToChronoTime(absl::FromUnixSeconds(now_s - 600));
  if (state == "resolved") n.end_time = absl::ToChronoTime(absl::FromUnixSeconds(now_s - 60));
  return n;
}

class DeliveryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto pg = testing::PostgresServer::Create();
    ASSERT_TRUE(pg.ok()) << pg.status();
    pg_ = *std::move(pg);
    ASSERT_TRUE(pg_->CreateDatabase("goodput").ok());
    auto report =
        platform::ApplyMigrations(pg_->Dsn("goodput"), testing::SourceDir() / "migrations");
    ASSERT_TRUE(report.ok()) << report.status();
    auto pool = platform::PgPool::Create({.dsn = pg_->Dsn("goodput")});
    ASSERT_TRUE(pool.ok()) << pool.status();
    pool_ = *std::move(pool);
    store_ = std::make_unique<DeliveryStore>(pool_.get());
  }

  void EnqueueOrDie(const Notification& n, const std::vector<std::string>& targets) {
    absl::Status s = pool_->RunTransaction([&](pqxx::work& tx) -> absl::Status {
      absl::StatusOr<int> added = Enqueue(tx, n, targets);
      return added.status();
    });
    ASSERT_TRUE(s.ok()) << s;
  }

  std::string Query(const std::string& sql) {
    absl::StatusOr<std::string> v = pg_->QueryValue("goodput", sql);
    EXPECT_TRUE(v.ok()) << sql << ": " << v.status();
    return v.ok() ? *v : "";
  }

  std::vector<DeliveryRecord> Deliveries(int64_t alert_id) {
    absl::StatusOr<std::vector<DeliveryRecord>> out =
        pool_->RunTransactionFor<std::vector<DeliveryRecord>>(
            [&](pqxx::work& tx) { return DeliveriesForAlert(tx, alert_id); });
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? *out : std::vector<DeliveryRecord>{};
  }

  // A worker over `targets` on the manual clock, without jitter.
  std::unique_ptr<DeliveryWorker> MakeWorker(std::vector<std::unique_ptr<Target>> targets,
                                             RateLimiter* limiter = nullptr,
                                             RetryPolicy retry = {.jitter = 0}) {
    return std::make_unique<DeliveryWorker>(
        store_.get(), std::move(targets), limiter,
        DeliveryOptions{
            .retry = retry, .clock = clock_.AsFunction(), .uniform01 = [] { return 0.5; }},
        platform::Logger());
  }

  StepResult StepOrDie(DeliveryWorker& worker, const std::string& target) {
    absl::StatusOr<StepResult> r = worker.StepOnce(target);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : StepResult{};
  }

  ManualClock clock_;
  std::unique_ptr<testing::PostgresServer> pg_;
  std::unique_ptr<platform::PgPool> pool_;
  std::unique_ptr<DeliveryStore> store_;
};

}  // namespace goodput::alerting
