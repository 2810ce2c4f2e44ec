// Two ofu shards on one database split the jobs by the hash of their key (services/ofu/README.md,
// Sharding): each consumes the samples of its own jobs only, and together every sample once.
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "services/core/gpu_catalog.h"
#include "services/ofu/ofu_consumer.h"
#include "services/ofu/ofu_store.h"
#include "tests/support/ofu_job_fixture.h"

namespace goodput::ofu {
namespace {

using goodput::testing::kOfuJobStartMs;

class OfuShards : public goodput::testing::OfuJobFixture {};

TEST_F(OfuShards, TwoShardsSplitTheJobsAndTogetherConsumeEverySampleOnce) {
  // Jobs j2..j12 besides the fixture's j1, four GPUs each, a sample every 10 s for 5 minutes.
  for (int j = 2; j <= 12; ++j) {
    ASSERT_NO_FATAL_FAILURE(Sql(absl::StrCat(
        "INSERT INTO jobs (cluster, job_id, gpu_model) VALUES ('c1', 'j", j,
        "', 'NVIDIA H100 80GB HBM3')")));
  }
  ASSERT_NO_FATAL_FAILURE(Sql(absl::StrCat(
      "INSERT INTO samples (sample_time, cluster, host, gpu_index, job, tensor_active, "
      "sm_clock_mhz) SELECT timestamptz 'epoch' + (", kOfuJobStartMs,
      " + t * 10000) * interval '1 millisecond', 'c1', 'n' || j.job_id, g, j.id, 0.4, 1500 "
      "FROM jobs j, generate_series(0, 29) t, generate_series(0, 3) g")));
  auto expected = [&](int index) {
    absl::StatusOr<std::string> n = pg_->QueryValue(
        goodput::testing::kDatabase,
        absl::StrCat("SELECT count(*) FROM samples s JOIN jobs j ON j.id = s.job WHERE "
                     "((hashtextextended(j.cluster || '/' || j.job_id, 0) % 2) + 2) % 2 = ",
                     index));
    return n.ok() ? std::stoll(*n) : -1;
  };
  const int64_t total = 12 * 30 * 4;
  ASSERT_GT(expected(0), 0);
  ASSERT_GT(expected(1), 0);
  ASSERT_EQ(expected(0) + expected(1), total);

  for (int index = 0; index < 2; ++index) {
    SCOPED_TRACE(absl::StrCat("shard ", index, " of 2"));
    OfuStore store(pool_.get(), ShardConfig{.index = index, .count = 2});
    // Small pages: the reads go page by page through the other shard's rows too.
    OfuConsumer consumer(&store, &core::GpuCatalog::BuiltIn(), EngineOptions{},
                         ConsumerOptions{.page_limit = 100}, nullptr, platform::Logger(),
                         [this] { return now_.load(); });
    ASSERT_TRUE(consumer.Restore().ok());
    for (int i = 0; i < 1000; ++i) {
      absl::StatusOr<bool> done = consumer.StepOnce();
      ASSERT_TRUE(done.ok()) << done.status();
      if (*done) break;
    }
    EXPECT_EQ(consumer.Stats().samples_consumed, expected(index));
  }
}

}  // namespace
}  // namespace goodput::ofu
