// A fixture for tests of what ofu does with the windows it commits: a migrated goodput
// database with sample partitions for the day from kOfuJobStartMs, one H100 job c1/j1, an
// OfuStore and an OfuConsumer on it whose clock the test sets (`now_`), and Feed() to add
// samples and let the consumer catch up (CatchUp() alone after samples stored otherwise).
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "services/core/gpu_catalog.h"
#include "services/ofu/ofu_consumer.h"
#include "services/ofu/ofu_store.h"
#include "services/platform/logging.h"
#include "services/platform/migrations.h"
#include "services/platform/pg_pool.h"
#include "tests/support/postgres_server.h"
#include "tests/support/service_process.h"
#include "tests/support/test_steps.h"

namespace goodput::testing {

inline constexpr int64_t kOfuJobStartMs = 1'767'225'600'000;  // 2026-01-01T00:00:00Z

class OfuJobFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(StartPostgres(&pg_));
    auto report = platform::ApplyMigrations(pg_->Dsn(kDatabase), SourceDir() / "migrations");
    ASSERT_TRUE(report.ok()) << report.status();
    auto pool = platform::PgPool::Create({.dsn = pg_->Dsn(kDatabase)});
    ASSERT_TRUE(pool.ok());
    pool_ = *std::move(pool);
    Sql(absl::StrCat("SELECT samples_create_partitions(timestamptz 'epoch' + ", kOfuJobStartMs,
                     " * interval '1 millisecond', timestamptz 'epoch' + ",
                     kOfuJobStartMs + 86'400'000, " * interval '1 millisecond')"));
    Sql("INSERT INTO jobs (cluster, job_id, gpu_model) VALUES ('c1', 'j1', 'NVIDIA H100 80GB "
        "HBM3')");
    store_ = std::make_unique<ofu::OfuStore>(pool_.get(), ofu::ShardConfig{});
    consumer_ = std::make_unique<ofu::OfuConsumer>(
        store_.get(), &core::GpuCatalog::BuiltIn(), ofu::EngineOptions{}, ofu::ConsumerOptions{},
        nullptr, platform::Logger(), [this] { return now_.load(); });
    ASSERT_TRUE(consumer_->Restore().ok());
  }

  void Sql(const std::string& sql) { ASSERT_TRUE(pg_->Execute(kDatabase, sql).ok()) << sql; }

  // Samples of 4 GPUs every `step_s` for minutes [from, to), then the consumer catches up.
  void Feed(int from_min, int to_min, int step_s = 10) {
    std::vector<std::string> values;
    for (int t = from_min * 60; t < to_min * 60; t += step_s) {
      for (int g = 0; g < 4; ++g) {
        values.push_back(absl::StrCat("(timestamptz 'epoch' + ", kOfuJobStartMs + t * 1000,
                                      " * interval '1 millisecond', 'c1', 'n1', ", g,
                                      ", (SELECT id FROM jobs), ", 0.3 + 0.01 * (t % 7),
                                      ", 1500)"));
      }
    }
    if (!values.empty()) {
      Sql(
          absl::StrCat("INSERT INTO samples (sample_time, cluster, host, gpu_index, job, "
                       "tensor_active, sm_clock_mhz) VALUES ",
                       absl::StrJoin(values, ",")));
    }
    CatchUp();
  }

  // Lets the consumer take in the samples stored so far.
  void CatchUp() {
    for (int i = 0; i < 100; ++i) {
      auto done = consumer_->StepOnce();
      ASSERT_TRUE(done.ok()) << done.status();
      if (*done) break;
    }
  }

  std::unique_ptr<PostgresServer> pg_;
  std::unique_ptr<platform::PgPool> pool_;
  std::unique_ptr<ofu::OfuStore> store_;
  std::unique_ptr<ofu::OfuConsumer> consumer_;
  std::atomic<int64_t> now_{absl::ToUnixMillis(absl::Now())};
};

}  // namespace goodput::testing
