// goodput-ingest while job registrations pile up (issue 27, item 7): registrations that
// cannot finish (here: held in PostgreSQL by locks the test takes) neither stop a PushSamples
// from being stored nor queue without bound. JobService's calls run on workers and a
// connection pool of their own (ingest.jobs.pool_size), with at most ingest.jobs.max_pending
// queued or running; beyond that a registration is refused at once, RESOURCE_EXHAUSTED over
// gRPC and 429 with Retry-After over HTTP, which the Slurm scripts' retrier honours.
#include <chrono>
#include <memory>
#include <pqxx/pqxx>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "goodput/v1/ingest.grpc.pb.h"
#include "goodput/v1/job.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "tests/support/child_process.h"
#include "tests/support/postgres_server.h"
#include "tests/support/service_process.h"
#include "tests/support/test_steps.h"

namespace goodput::testing {
namespace {

using ::testing::HasSubstr;

constexpr int kJobsPoolSize = 2;
constexpr int kMaxPending = 6;

v1::Job OneGpuJob(const std::string& job_id, const std::string& host) {
  v1::Job job;
  job.mutable_key()->set_cluster("eos");
  job.mutable_key()->set_job_id(job_id);
  job.set_scheduler(v1::SCHEDULER_KIND_SLURM);
  job.mutable_start_time()->set_seconds(absl::ToUnixSeconds(absl::Now()));
  v1::GpuAllocation* a = job.add_allocations();
  a->mutable_gpu()->set_host(host);
  a->mutable_gpu()->set_gpu_index(0);
  return job;
}

grpc::Status RegisterWithDeadline(ServiceProcess& ingest, const v1::Job& job, int seconds) {
  auto stub = v1::JobService::NewStub(ingest.Channel());
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
  v1::RegisterJobRequest request;
  *request.mutable_job() = job;
  v1::RegisterJobResponse response;
  return stub->RegisterJob(&ctx, request, &response);
}

TEST(IngestJobBurst, StuckRegistrationsNeitherStopSampleIngestNorQueueWithoutBound) {
  std::unique_ptr<PostgresServer> pg;
  ASSERT_NO_FATAL_FAILURE(StartPostgres(&pg));
  std::unique_ptr<ServiceProcess> ingest;
  ASSERT_NO_FATAL_FAILURE(StartService(
      {.binary = BuiltBinary("services/ingest/goodput-ingest"),
       .config_yaml = absl::StrCat(PostgresConfigYaml(*pg), "ingest:\n  jobs:\n    pool_size: ",
                                   kJobsPoolSize, "\n    max_pending: ", kMaxPending, "\n"),
       .extra_args = MigrateArgs()},
      &ingest));

  // Registration serializes on an advisory lock per job key (job_store.cc): holding those of
  // jobs eos/stuck-0..5 keeps their registrations waiting inside PostgreSQL.
  pqxx::connection locker(pg->Dsn(kDatabase));
  pqxx::work held(locker);
  for (int i = 0; i < kMaxPending; ++i) {
    held.exec_params("SELECT pg_advisory_xact_lock(hashtext($1))", absl::StrCat("eos/stuck-", i));
  }
  std::vector<grpc::Status> stuck(kMaxPending);
  std::vector<std::thread> callers;
  for (int i = 0; i < kMaxPending; ++i) {
    callers.emplace_back([&, i] {
      stuck[i] = RegisterWithDeadline(*ingest, OneGpuJob(absl::StrCat("stuck-", i),
                                                         absl::StrCat("node-", i)),
                                      120);
    });
  }
  // Every registration the jobs pool can run is waiting for its lock.
  EXPECT_TRUE(PollUntil(
      [&] {
        return QueryScalar(*pg,
                           "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND "
                           "NOT granted") == absl::StrCat(kJobsPoolSize);
      },
      absl::Seconds(60), absl::Milliseconds(100)));

  // Samples are still stored: PushSamples needs neither JobService's threads nor its
  // connections.
  {
    auto stub = v1::IngestService::NewStub(ingest->Channel());
    v1::PushSamplesRequest batch;
    batch.set_batch_id("during-stuck-registrations");
    batch.set_cluster("eos");
    for (int gpu = 0; gpu < 8; ++gpu) {
      v1::GpuSample* s = batch.add_samples();
      s->mutable_gpu()->set_host("telemetry-node");
      s->mutable_gpu()->set_gpu_index(gpu);
      s->set_time_unix_ms(absl::ToUnixMillis(absl::Now()));
      s->set_gpu_model("NVIDIA H100 80GB HBM3");
      s->set_tensor_active(0.4);
      s->set_sm_clock_mhz(1500);
    }
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::PushSamplesResponse response;
    auto writer = stub->PushSamples(&ctx, &response);
    writer->Write(batch);
    writer->WritesDone();
    grpc::Status pushed = writer->Finish();
    EXPECT_TRUE(pushed.ok()) << pushed.error_code() << ": " << pushed.error_message();
    EXPECT_EQ(response.stored_count(), 8);
  }

  // Once kMaxPending calls are queued or running, one more is refused at once, naming the
  // bound, over gRPC and over HTTP (429 with Retry-After).
  EXPECT_TRUE(PollUntil(
      [&] {
        grpc::Status s = RegisterWithDeadline(*ingest, OneGpuJob("one-more", "node-99"), 30);
        return s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED &&
               s.error_message().find("ingest.jobs.max_pending") != std::string::npos;
      },
      absl::Seconds(60), absl::Milliseconds(100)));
  httplib::Client http("127.0.0.1", ingest->http_port());
  http.set_read_timeout(30, 0);
  httplib::Result posted = http.Post(
      "/api/v1/jobs:register",
      R"({"job": {"key": {"cluster": "eos", "jobId": "over-http"}, "startTime": "2026-01-01T00:00:00Z",
          "allocations": [{"gpu": {"host": "node-98", "gpuIndex": 0}}]}})",
      "application/json");
  ASSERT_TRUE(posted) << httplib::to_string(posted.error());
  EXPECT_EQ(posted->status, 429) << posted->body;
  EXPECT_TRUE(posted->has_header("Retry-After"));
  EXPECT_THAT(posted->body, HasSubstr("ingest.jobs.max_pending"));

  // Released, every stuck registration goes through.
  held.commit();
  for (std::thread& t : callers) t.join();
  for (int i = 0; i < kMaxPending; ++i) {
    EXPECT_TRUE(stuck[i].ok()) << "stuck-" << i << ": " << stuck[i].error_message();
  }
  EXPECT_EQ(QueryScalar(*pg, "SELECT count(*) FROM jobs WHERE job_id LIKE 'stuck-%'"),
            absl::StrCat(kMaxPending));
}

}  // namespace
}  // namespace goodput::testing
