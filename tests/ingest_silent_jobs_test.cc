// Jobs whose epilog never came, against a real PostgreSQL: ingest's maintenance ends a running
// job whose GPUs have sent nothing for `silent_after` (at its last sample), leaves busy,
// young, requeued and pending jobs alone, and gives way to the scheduler's EndJob when it
// arrives after all (the allocation moves to the real end and takes the samples it covers).
// The maintenance clock is injected; nothing waits.

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "goodput/v1/job.pb.h"
#include "services/api/api_convert.h"
#include "services/ingest/job_store.h"
#include "services/ingest/maintenance.h"
#include "services/ingest/sample_store.h"
#include "services/platform/migrations.h"
#include "services/platform/pg_pool.h"
#include "tests/support/postgres_server.h"
#include "tests/support/test_steps.h"

namespace goodput::ingest {
namespace {

constexpr int64_t kHourMs = 3'600'000;
constexpr int64_t kSilentAfterMs = 6 * kHourMs;

class SilentJobsIntegration : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(testing::StartPostgres(&pg_));
    const std::string dsn = pg_->Dsn(testing::kDatabase);
    absl::StatusOr<platform::MigrationReport> migrated =
        platform::ApplyMigrations(dsn, std::string(GOODPUT_SOURCE_DIR) + "/migrations");
    ASSERT_TRUE(migrated.ok()) << migrated.status();
    auto pool = platform::PgPool::Create({.dsn = dsn});
    ASSERT_TRUE(pool.ok()) << pool.status();
    pool_ = *std::move(pool);
    jobs_ = std::make_unique<JobStore>(pool_.get());
    samples_ = std::make_unique<SampleStore>(pool_.get());
  }

  // Registers Slurm job `id` of cluster eos on GPUs `gpus` of `host` from `start_ms`, as its
  // prolog would at that time.
  void Register(const std::string& id, const std::string& host, std::vector<int> gpus,
                std::optional<int64_t> start_ms) {
    v1::Job job;
    job.mutable_key()->set_cluster("eos");
    job.mutable_key()->set_job_id(id);
    job.set_scheduler(v1::SCHEDULER_KIND_SLURM);
    if (start_ms) {
      *job.mutable_start_time() = api::UnixMsToTimestamp(*start_ms);
    } else {
      job.set_state(v1::JOB_STATE_PENDING);
    }
    for (int g : gpus) {
      v1::GpuAllocation* a = job.add_allocations();
      a->mutable_gpu()->set_host(host);
      a->mutable_gpu()->set_gpu_index(g);
    }
    absl::StatusOr<RegisterJobResult> r =
        jobs_->Register(job, start_ms.value_or(now_ - 8 * kHourMs));
    ASSERT_TRUE(r.ok()) << id << ": " << r.status();
  }

  // Stores one sample of GPU `gpu` of `host` at `time_ms`, attributed as ingest does.
  void Sample(const std::string& host, int gpu, int64_t time_ms) {
    ingest::Sample s;
    s.gpu = {.host = host, .gpu_index = gpu};
    s.time_unix_ms = time_ms;
    s.set(SampleField::kTensorActive, 0.4);
    absl::StatusOr<Attributor> attributor = samples_->LoadAttributor("eos", {&s});
    ASSERT_TRUE(attributor.ok()) << attributor.status();
    BatchWrite write{.batch_id = absl::StrCat("b", ++batches_),
                     .cluster = "eos",
                     .source = "grpc",
                     .samples = {&s},
                     .job_row_ids = {attributor->Attribute(s)},
                     .hosts_seen = {}};
    absl::StatusOr<BatchWriteResult> written = samples_->WriteBatch(write);
    ASSERT_TRUE(written.ok()) << written.status();
  }

  // One maintenance round at `now_` that ends jobs silent for `silent_after_ms`.
  absl::Status Sweep(int64_t silent_after_ms = kSilentAfterMs) {
    MaintenanceOptions options;
    options.silent_job_after_ms = silent_after_ms;
    Maintenance maintenance(
        samples_.get(), jobs_.get(), options, [this] { return now_; }, platform::Logger());
    return maintenance.RunOnce();
  }

  v1::Job Get(const std::string& id) {
    v1::JobKey key;
    key.set_cluster("eos");
    key.set_job_id(id);
    absl::StatusOr<v1::Job> job = jobs_->Get(key);
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? *job : v1::Job();
  }

  absl::StatusOr<v1::Job> End(const std::string& id, int64_t end_ms, v1::JobState state) {
    v1::JobKey key;
    key.set_cluster("eos");
    key.set_job_id(id);
    return jobs_->End(key, end_ms, state, now_);
  }

  static int64_t Ms(const google::protobuf::Timestamp& t) { return api::TimestampToUnixMs(t); }

  std::string Query(const std::string& sql) { return testing::QueryScalar(*pg_, sql); }

  // Whole seconds, as job times travel through the API.
  const int64_t now_ = absl::ToUnixSeconds(absl::Now()) * 1000;
  int batches_ = 0;
  std::unique_ptr<testing::PostgresServer> pg_;
  std::unique_ptr<platform::PgPool> pool_;
  std::unique_ptr<JobStore> jobs_;
  std::unique_ptr<SampleStore> samples_;
};

TEST_F(SilentJobsIntegration, JobWhoseGpusWentSilentIsEndedAtItsLastSample) {
  ASSERT_NO_FATAL_FAILURE(Register("silent", "n1", {0, 1}, now_ - 10 * kHourMs));
  ASSERT_NO_FATAL_FAILURE(Sample("n1", 0, now_ - 9 * kHourMs));
  ASSERT_NO_FATAL_FAILURE(Sample("n1", 1, now_ - 7 * kHourMs));
  ASSERT_NO_FATAL_FAILURE(Register("never-sent", "n1", {2}, now_ - 8 * kHourMs));
  ASSERT_NO_FATAL_FAILURE(Register("busy", "n2", {0}, now_ - 10 * kHourMs));
  ASSERT_NO_FATAL_FAILURE(Sample("n2", 0, now_ - 9 * kHourMs));
  ASSERT_NO_FATAL_FAILURE(Sample("n2", 0, now_ - 10 * 60'000));
  ASSERT_NO_FATAL_FAILURE(Register("young", "n3", {0}, now_ - 2 * kHourMs));
  ASSERT_NO_FATAL_FAILURE(Register("pending", "n4", {0}, std::nullopt));
  // Requeued an hour ago after its first run ended two days ago: its current run is young.
  ASSERT_NO_FATAL_FAILURE(Register("requeued", "n5", {0}, now_ - 50 * kHourMs));
  ASSERT_NO_FATAL_FAILURE(Sample("n5", 0, now_ - 49 * kHourMs));
  ASSERT_TRUE(End("requeued", now_ - 48 * kHourMs, v1::JOB_STATE_PREEMPTED).ok());
  ASSERT_NO_FATAL_FAILURE(Register("requeued", "n6", {0}, now_ - kHourMs));

  // Disabled: nothing is ended.
  ASSERT_TRUE(Sweep(0).ok());
  EXPECT_EQ(Get("silent").state(), v1::JOB_STATE_RUNNING);

  absl::Status swept = Sweep();
  ASSERT_TRUE(swept.ok()) << swept;
  v1::Job silent = Get("silent");
  EXPECT_EQ(silent.state(), v1::JOB_STATE_ENDED);
  EXPECT_EQ(Ms(silent.end_time()), now_ - 7 * kHourMs);
  EXPECT_EQ(silent.labels().at("ended_by"), "silent");
  ASSERT_EQ(silent.allocations_size(), 2);
  for (const v1::GpuAllocation& a : silent.allocations()) {
    EXPECT_EQ(Ms(a.end_time()), now_ - 7 * kHourMs) << a.ShortDebugString();
  }
  v1::Job never_sent = Get("never-sent");
  EXPECT_EQ(never_sent.state(), v1::JOB_STATE_ENDED);
  EXPECT_EQ(Ms(never_sent.end_time()), now_ - 8 * kHourMs);
  ASSERT_EQ(never_sent.allocations_size(), 1);
  EXPECT_TRUE(never_sent.allocations(0).has_end_time());

  for (const char* id : {"busy", "young", "requeued"}) {
    v1::Job job = Get(id);
    EXPECT_EQ(job.state(), v1::JOB_STATE_RUNNING) << id;
    EXPECT_FALSE(job.has_end_time()) << id;
    EXPECT_FALSE(job.labels().contains("ended_by")) << id;
  }
  v1::Job pending = Get("pending");
  EXPECT_EQ(pending.state(), v1::JOB_STATE_PENDING);
  EXPECT_FALSE(pending.has_end_time());
  EXPECT_EQ(Query("SELECT count(*) FROM job_gpus g JOIN jobs j ON j.id = g.job "
                  "WHERE upper_inf(g.valid) AND j.job_id IN ('busy', 'young', 'pending', "
                  "'requeued')"),
            "4");

  // A second round finds nothing more to end, and the sample that later arrives for the
  // silent job's GPU stays unattributed.
  ASSERT_TRUE(Sweep().ok());
  EXPECT_EQ(Get("busy").state(), v1::JOB_STATE_RUNNING);
  ASSERT_NO_FATAL_FAILURE(Sample("n1", 1, now_ - 30 * 60'000));
  EXPECT_EQ(Query("SELECT count(*) FROM samples WHERE job IS NULL"), "1");
}

TEST_F(SilentJobsIntegration, SweepEndsAtMostTheBatchSizePerRound) {
  for (int i = 0; i < 3; ++i) {
    ASSERT_NO_FATAL_FAILURE(Register(absl::StrCat("j", i), "n1", {i}, now_ - (10 - i) * kHourMs));
  }
  MaintenanceOptions options;
  options.silent_job_after_ms = kSilentAfterMs;
  options.silent_jobs_per_round = 2;
  Maintenance maintenance(
      samples_.get(), jobs_.get(), options, [this] { return now_; }, platform::Logger());
  ASSERT_TRUE(maintenance.RunOnce().ok());
  EXPECT_EQ(Query("SELECT string_agg(job_id, ',' ORDER BY job_id) FROM jobs WHERE state = 'ended'"),
            "j0,j1");
  ASSERT_TRUE(maintenance.RunOnce().ok());
  EXPECT_EQ(Query("SELECT count(*) FROM jobs WHERE state = 'ended'"), "3");
}

// The job was alive after all (its node lost its exporter, not the job): the epilog's EndJob
// with the real state replaces the guess. GPU 0's allocation reaches the real end and takes
// the sample that arrived after the sweep; GPU 1 was given to another job meanwhile, so its
// allocation stops where that job's starts.
TEST_F(SilentJobsIntegration, LateEpilogReplacesTheSilentEndWithTheRealOne) {
  ASSERT_NO_FATAL_FAILURE(Register("late", "n1", {0, 1}, now_ - 10 * kHourMs));
  ASSERT_NO_FATAL_FAILURE(Sample("n1", 0, now_ - 8 * kHourMs));
  ASSERT_TRUE(Sweep().ok());
  ASSERT_EQ(Get("late").state(), v1::JOB_STATE_ENDED);
  ASSERT_NO_FATAL_FAILURE(Sample("n1", 0, now_ - 2 * kHourMs));
  ASSERT_NO_FATAL_FAILURE(Register("next", "n1", {1}, now_ - 3 * kHourMs));

  absl::StatusOr<v1::Job> ended = End("late", now_ - kHourMs, v1::JOB_STATE_COMPLETED);
  ASSERT_TRUE(ended.ok()) << ended.status();
  EXPECT_EQ(ended->state(), v1::JOB_STATE_COMPLETED);
  EXPECT_EQ(Ms(ended->end_time()), now_ - kHourMs);
  EXPECT_FALSE(ended->labels().contains("ended_by"));
  ASSERT_EQ(ended->allocations_size(), 2);
  EXPECT_EQ(Ms(ended->allocations(0).end_time()), now_ - kHourMs);
  EXPECT_EQ(Ms(ended->allocations(1).end_time()), now_ - 3 * kHourMs);
  EXPECT_EQ(Query("SELECT count(*) FROM samples s JOIN jobs j ON j.id = s.job "
                  "WHERE j.job_id = 'late'"),
            "2");

  // The same EndJob again (another node's epilog) is answered with the job as it is.
  absl::StatusOr<v1::Job> again = End("late", now_ - kHourMs, v1::JOB_STATE_COMPLETED);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->state(), v1::JOB_STATE_COMPLETED);
}

// The next job on the GPU ended the job whose epilog never came; the epilog arrives after
// all and says it failed earlier: the end moves back, and the samples after the real end are
// no longer the job's.
TEST_F(SilentJobsIntegration, LateEpilogMovesTheEndBackBeforeTheNextJob) {
  ASSERT_NO_FATAL_FAILURE(Register("first", "n1", {0}, now_ - 5 * kHourMs));
  ASSERT_NO_FATAL_FAILURE(Sample("n1", 0, now_ - 4 * kHourMs));
  ASSERT_NO_FATAL_FAILURE(Sample("n1", 0, now_ - 150 * 60'000));
  ASSERT_NO_FATAL_FAILURE(Register("second", "n1", {0}, now_ - 2 * kHourMs));
  v1::Job first = Get("first");
  ASSERT_EQ(first.state(), v1::JOB_STATE_ENDED);
  EXPECT_EQ(first.labels().at("ended_by"), "next_job");

  absl::StatusOr<v1::Job> ended = End("first", now_ - 3 * kHourMs, v1::JOB_STATE_FAILED);
  ASSERT_TRUE(ended.ok()) << ended.status();
  EXPECT_EQ(ended->state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(Ms(ended->end_time()), now_ - 3 * kHourMs);
  ASSERT_EQ(ended->allocations_size(), 1);
  EXPECT_EQ(Ms(ended->allocations(0).end_time()), now_ - 3 * kHourMs);
  EXPECT_EQ(Query("SELECT string_agg(coalesce(j.job_id, '-'), ',' ORDER BY s.sample_time) "
                  "FROM samples s LEFT JOIN jobs j ON j.id = s.job"),
            "first,-");
}

}  // namespace
}  // namespace goodput::ingest
