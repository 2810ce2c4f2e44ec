// goodput-ingest as a running process against a real PostgreSQL: jobs registered and samples
// attributed, retried batches stored once, bad input refused item by item with the rest kept,
// late registration attaching earlier samples, overlapping allocations refused, and every
// acknowledged sample present exactly once after PostgreSQL restarts during pushes.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <map>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "goodput/v1/ingest.grpc.pb.h"
#include "goodput/v1/job.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "tests/support/child_process.h"
#include "tests/support/postgres_server.h"
#include "tests/support/service_process.h"
#include "tests/support/test_steps.h"

namespace goodput {
namespace {

using ::goodput::testing::PollUntil;
using ::goodput::testing::PostgresServer;
using ::goodput::testing::ServiceProcess;
using ::testing::HasSubstr;

constexpr char kH100[] = "NVIDIA H100 80GB HBM3";

int64_t NowMs() { return absl::ToUnixMillis(absl::Now()); }

void SetTime(int64_t ms, google::protobuf::Timestamp* t) {
  t->set_seconds(ms / 1000);
  t->set_nanos(static_cast<int32_t>((ms % 1000) * 1000000));
}

class IngestServiceIntegration : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(testing::StartPostgres(&pg_));
    StartIngest("");
  }

  void StartIngest(const std::string& extra_config) {
    ASSERT_NO_FATAL_FAILURE(testing::StartService(
        {.binary = testing::BuiltBinary("services/ingest/goodput-ingest"),
         .config_yaml =
             absl::StrCat("postgres:\n  dsn: \"", pg_->Dsn("goodput"), "\"\n  pool_size: 4\n",
                          "redis:\n  host: \"\"\n", "log:\n  format: text\n",
                          "ingest:\n  maintenance_interval_s: 3600\n", extra_config),
         .extra_args = testing::MigrateArgs()},
        &ingest_));
    jobs_ = v1::JobService::NewStub(ingest_->Channel());
    ingest_stub_ = v1::IngestService::NewStub(ingest_->Channel());
  }

  std::string Query(const std::string& sql) { return testing::QueryScalar(*pg_, sql); }

  grpc::Status Register(const v1::Job& job, v1::RegisterJobResponse* response) {
    return testing::RegisterJob(*jobs_, job, response);
  }

  grpc::Status Push(const std::vector<v1::PushSamplesRequest>& batches,
                    v1::PushSamplesResponse* response) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    auto writer = ingest_stub_->PushSamples(&ctx, response);
    for (const auto& b : batches) {
      if (!writer->Write(b)) break;
    }
    writer->WritesDone();
    return writer->Finish();
  }

  static v1::Job SlurmJob(const std::string& id, const std::string& host, std::vector<int> gpus,
                          int64_t start_ms) {
    v1::Job job;
    job.mutable_key()->set_cluster("eos");
    job.mutable_key()->set_job_id(id);
    job.set_scheduler(v1::SCHEDULER_KIND_SLURM);
    job.set_user("alice");
    job.set_team("llm");
    job.set_gpu_model(kH100);
    SetTime(start_ms, job.mutable_start_time());
    for (int g : gpus) {
      auto* a = job.add_allocations();
      a->mutable_gpu()->set_host(host);
      a->mutable_gpu()->set_gpu_index(g);
    }
    return job;
  }

  static v1::GpuSample MakeSample(const std::string& host, int gpu, int64_t time_ms,
                                  double tensor_active = 0.4) {
    v1::GpuSample s;
    s.mutable_gpu()->set_host(host);
    s.mutable_gpu()->set_gpu_index(gpu);
    s.set_time_unix_ms(time_ms);
    s.set_gpu_model(kH100);
    s.set_tensor_active(tensor_active);
    s.set_sm_clock_mhz(1755);
    s.set_power_w(612.5);
    return s;
  }

  std::unique_ptr<PostgresServer> pg_;
  std::unique_ptr<ServiceProcess> ingest_;
  std::unique_ptr<v1::JobService::Stub> jobs_;
  std::unique_ptr<v1::IngestService::Stub> ingest_stub_;
};

TEST_F(IngestServiceIntegration, RegisteredJobGetsItsGpusSamplesAndOthersStayUnattributed) {
  const int64_t now = NowMs();
  v1::RegisterJobResponse registered;
  ASSERT_TRUE(Register(SlurmJob("4211873", "n1", {0, 1}, now - 3'600'000), &registered).ok());
  EXPECT_TRUE(registered.created());
  EXPECT_EQ(registered.job().gpu_count(), 2);

  v1::PushSamplesRequest batch;
  batch.set_batch_id("b-1");
  batch.set_cluster("eos");
  for (int t = 0; t < 3; ++t) {
    for (int g : {0, 1, 5}) *batch.add_samples() = MakeSample("n1", g, now - 60'000 + t * 10'000);
  }
  v1::PushSamplesResponse response;
  grpc::Status status = Push({batch}, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.stored_count(), 9);
  EXPECT_EQ(response.refused_count(), 0);
  EXPECT_EQ(response.unattributed_count(), 3);  // GPU 5 is nobody's
  EXPECT_EQ(Query("SELECT count(*) FROM samples s JOIN jobs j ON j.id = s.job "
                  "WHERE j.job_id = '4211873'"),
            "6");
  EXPECT_EQ(Query("SELECT count(*) FROM samples WHERE job IS NULL AND gpu_index = 5"), "3");
  EXPECT_EQ(Query("SELECT round(avg(tensor_active)::numeric, 2) FROM samples"), "0.40");
}

TEST_F(IngestServiceIntegration, RetriedBatchIsAcknowledgedAsDuplicateAndNotStoredTwice) {
  const int64_t now = NowMs();
  v1::PushSamplesRequest batch;
  batch.set_batch_id("node-7-boot-1-42");
  batch.set_cluster("eos");
  for (int g = 0; g < 8; ++g) *batch.add_samples() = MakeSample("n7", g, now - 5000);
  v1::PushSamplesResponse first;
  ASSERT_TRUE(Push({batch}, &first).ok());
  v1::PushSamplesResponse retry;
  ASSERT_TRUE(Push({batch}, &retry).ok());
  ASSERT_EQ(retry.batches_size(), 1);
  EXPECT_TRUE(retry.batches(0).duplicate());
  EXPECT_EQ(retry.batches(0).stored_count(), 8);  // the first delivery's outcome
  EXPECT_EQ(retry.stored_count(), 0);
  EXPECT_EQ(Query("SELECT count(*) FROM samples"), "8");
}

TEST_F(IngestServiceIntegration, BadSamplesAreRefusedWithReasonsAndTheRestKept) {
  const int64_t now = NowMs();
  v1::PushSamplesRequest batch;
  batch.set_batch_id("b-3");
  batch.set_cluster("eos");
  *batch.add_samples() = MakeSample("n1", 0, now - 1000);
  *batch.add_samples() = MakeSample("n1", 1, now - 1000, 1.7);
  *batch.add_samples() = MakeSample("n1", 2, now - 1000, std::nan(""));
  v1::GpuSample negative_clock = MakeSample("n1", 3, now - 1000);
  negative_clock.set_sm_clock_mhz(-100);
  *batch.add_samples() = negative_clock;
  v1::GpuSample unknown = MakeSample("n1", 4, now - 1000);
  unknown.set_gpu_model("NVIDIA Imaginary X1");
  *batch.add_samples() = unknown;
  *batch.add_samples() = MakeSample("n1", 5, now + 86'400'000);
  *batch.add_samples() = MakeSample("n1", 6, now - 1000);
  v1::PushSamplesResponse response;
  ASSERT_TRUE(Push({batch}, &response).ok());
  EXPECT_EQ(response.stored_count(), 2);
  EXPECT_EQ(response.refused_count(), 5);
  ASSERT_EQ(response.refusals_size(), 5);
  EXPECT_EQ(response.refusals(0).message(),
            "sample 1 of batch b-3: tensor_active=1.7 is outside [0, 1]");
  EXPECT_EQ(response.refusals(1).code(), v1::REFUSAL_CODE_NOT_FINITE);
  EXPECT_EQ(response.refusals(2).field(), "sm_clock_mhz");
  EXPECT_EQ(response.refusals(3).code(), v1::REFUSAL_CODE_UNKNOWN_GPU_MODEL);
  EXPECT_EQ(response.refusals(4).code(), v1::REFUSAL_CODE_FUTURE_TIMESTAMP);
  EXPECT_EQ(Query("SELECT count(*) FROM samples"), "2");
}

TEST_F(IngestServiceIntegration, OversizedBatchIsResourceExhaustedNamingTheLimit) {
  ingest_.reset();
  StartIngest("  max_batch_samples: 10\n");
  v1::PushSamplesRequest batch;
  batch.set_batch_id("big");
  batch.set_cluster("eos");
  for (int g = 0; g < 11; ++g) *batch.add_samples() = MakeSample("n1", g, NowMs() - 1000);
  v1::PushSamplesResponse response;
  grpc::Status status = Push({batch}, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(status.error_message(), HasSubstr("the limit is 10 samples per batch"));
  // Still healthy: a batch within the limit is stored.
  batch.mutable_samples()->DeleteSubrange(0, 5);
  batch.set_batch_id("small");
  ASSERT_TRUE(Push({batch}, &response).ok());
  EXPECT_EQ(response.stored_count(), 6);
}

TEST_F(IngestServiceIntegration, HundredMegabyteRequestIsRefusedNamingTheLimitAndServiceStaysUp) {
  v1::PushExpositionRequest request;
  request.set_batch_id("huge");
  request.set_cluster("eos");
  request.set_scrape_time_unix_ms(NowMs() - 1000);
  request.set_body(std::string(100 << 20, '#'));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  v1::PushExpositionResponse response;
  grpc::Status status = ingest_stub_->PushExposition(&ctx, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  // gRPC names both sizes: the request's and the configured ingest.max_request_bytes.
  EXPECT_THAT(status.error_message(), HasSubstr("67108864"));
  EXPECT_TRUE(ingest_->process().IsRunning());

  v1::PushSamplesRequest batch;
  batch.set_batch_id("after-huge");
  batch.set_cluster("eos");
  *batch.add_samples() = MakeSample("n1", 0, NowMs() - 1000);
  v1::PushSamplesResponse pushed;
  ASSERT_TRUE(Push({batch}, &pushed).ok());
  EXPECT_EQ(pushed.stored_count(), 1);
}

TEST_F(IngestServiceIntegration, ExpositionLinesAreStoredAttributedByHpcJobLabel) {
  const int64_t now = NowMs();
  v1::Job job = SlurmJob("777", "x", {}, now - 3'600'000);
  job.clear_allocations();
  job.set_gpu_count(8);
  v1::RegisterJobResponse registered;
  ASSERT_TRUE(Register(job, &registered).ok());

  const std::string labels =
      "UUID=\"GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52\",pci_bus_id=\"00000000:18:00.0\","
      "device=\"nvidia0\",modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"gpu-node-042\","
      "DCGM_FI_DRIVER_VERSION=\"535.129.03\",hpc_job=\"777\"";
  v1::PushExpositionRequest request;
  request.set_batch_id("scrape-gpu-node-042-1");
  request.set_cluster("eos");
  request.set_source_endpoint("http://gpu-node-042:9400/metrics");
  request.set_scrape_time_unix_ms(now - 2000);
  request.set_body(absl::StrCat(
      "# HELP DCGM_FI_DEV_SM_CLOCK SM clock frequency (in MHz).\n",
      "# TYPE DCGM_FI_DEV_SM_CLOCK gauge\n", "DCGM_FI_DEV_SM_CLOCK{gpu=\"0\",", labels, "} 1755\n",
      "# HELP DCGM_FI_PROF_PIPE_TENSOR_ACTIVE Ratio of cycles the tensor (HMMA) pipe is active.\n",
      "# TYPE DCGM_FI_PROF_PIPE_TENSOR_ACTIVE gauge\n",
      "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{gpu=\"0\",", labels, "} 0.41\n",
      "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{gpu=\"0\",", labels, " 0.41\n"));
  grpc::ClientContext ctx;
  v1::PushExpositionResponse response;
  grpc::Status status = ingest_stub_->PushExposition(&ctx, request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.stored_count(), 1);
  EXPECT_EQ(response.refused_count(), 1);
  ASSERT_EQ(response.refusals_size(), 1);
  EXPECT_EQ(response.refusals(0).line_number(), 7);
  EXPECT_EQ(Query("SELECT j.job_id || ' ' || s.sm_clock_mhz || ' ' || s.tensor_active "
                  "FROM samples s JOIN jobs j ON j.id = s.job"),
            "777 1755 0.41");
}

TEST_F(IngestServiceIntegration, LateRegistrationAttachesEarlierSamples) {
  const int64_t now = NowMs();
  v1::PushSamplesRequest batch;
  batch.set_batch_id("early");
  batch.set_cluster("eos");
  for (int t = 0; t < 5; ++t) *batch.add_samples() = MakeSample("n2", 3, now - 50'000 + t * 10'000);
  v1::PushSamplesResponse pushed;
  ASSERT_TRUE(Push({batch}, &pushed).ok());
  EXPECT_EQ(pushed.unattributed_count(), 5);

  v1::RegisterJobResponse registered;
  ASSERT_TRUE(Register(SlurmJob("late-1", "n2", {3}, now - 30'000), &registered).ok());
  EXPECT_EQ(registered.attached_sample_count(), 3);  // samples at or after the start
  EXPECT_EQ(Query("SELECT count(*) FROM samples WHERE job IS NULL"), "2");
}

TEST_F(IngestServiceIntegration, OverlappingAllocationIsRefusedNamingBothJobs) {
  const int64_t now = NowMs();
  v1::RegisterJobResponse r;
  ASSERT_TRUE(Register(SlurmJob("100", "n3", {0, 1}, now - 60'000), &r).ok());
  grpc::Status status = Register(SlurmJob("101", "n3", {1, 2}, now - 30'000), &r);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), HasSubstr("job 101"));
  EXPECT_THAT(status.error_message(), HasSubstr("overlaps job 100"));

  // Re-registering the same job (another node's prolog) is idempotent and merges GPUs.
  ASSERT_TRUE(Register(SlurmJob("100", "n3", {2}, now - 60'000), &r).ok());
  EXPECT_FALSE(r.created());
  EXPECT_EQ(r.job().gpu_count(), 3);
  v1::Job conflicting = SlurmJob("100", "n3", {}, now - 60'000);
  conflicting.set_user("mallory");
  status = Register(conflicting, &r);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_THAT(status.error_message(), HasSubstr("user"));

  // Once job 100 ended, its GPUs may go to the next job.
  grpc::ClientContext ctx;
  v1::EndJobRequest end;
  end.mutable_key()->set_cluster("eos");
  end.mutable_key()->set_job_id("100");
  SetTime(now - 20'000, end.mutable_end_time());
  end.set_final_state(v1::JOB_STATE_COMPLETED);
  v1::EndJobResponse ended;
  ASSERT_TRUE(jobs_->EndJob(&ctx, end, &ended).ok());
  EXPECT_EQ(ended.job().state(), v1::JOB_STATE_COMPLETED);
  ASSERT_TRUE(Register(SlurmJob("102", "n3", {1}, now - 10'000), &r).ok());
}

TEST_F(IngestServiceIntegration, ListJobsFiltersAndPaginatesNewestFirst) {
  const int64_t now = NowMs();
  v1::RegisterJobResponse r;
  for (int i = 0; i < 5; ++i) {
    v1::Job job = SlurmJob(absl::StrCat("j", i), "h", {i}, now - (10 - i) * 60'000);
    job.set_team(i % 2 == 0 ? "llm" : "vision");
    ASSERT_TRUE(Register(job, &r).ok());
  }
  v1::ListJobsRequest request;
  request.set_team("llm");
  request.set_page_size(2);
  std::vector<std::string> ids;
  for (int page = 0; page < 5; ++page) {
    grpc::ClientContext ctx;
    v1::ListJobsResponse response;
    ASSERT_TRUE(jobs_->ListJobs(&ctx, request, &response).ok());
    for (const auto& j : response.jobs()) ids.push_back(j.key().job_id());
    if (response.next_page_token().empty()) break;
    request.set_page_token(response.next_page_token());
  }
  EXPECT_THAT(ids, ::testing::ElementsAre("j4", "j2", "j0"));

  grpc::ClientContext ctx;
  v1::GetJobRequest get;
  get.mutable_key()->set_cluster("eos");
  get.mutable_key()->set_job_id("nope");
  v1::GetJobResponse got;
  EXPECT_EQ(jobs_->GetJob(&ctx, get, &got).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(IngestServiceIntegration, EveryAcknowledgedSampleIsPresentOnceAfterPostgresRestarts) {
  const int64_t base = NowMs() - 600'000;
  std::atomic<bool> stop{false};
  std::atomic<int> acknowledged{0};
  std::thread pusher([&] {
    int next = 0;
    while (!stop.load() || next < 40) {
      if (next >= 200) break;
      v1::PushSamplesRequest batch;
      batch.set_batch_id(absl::StrCat("r-", next));
      batch.set_cluster("eos");
      for (int g = 0; g < 8; ++g) {
        *batch.add_samples() = MakeSample("n9", g, base + next * 1000);
      }
      v1::PushSamplesResponse response;
      if (Push({batch}, &response).ok()) {
        acknowledged.store(++next);  // acknowledged: move on; otherwise retry the same id
      }
    }
  });
  ASSERT_TRUE(PollUntil([&] { return acknowledged.load() >= 5; }, absl::Seconds(60)));
  ASSERT_TRUE(pg_->Restart().ok());
  ASSERT_TRUE(PollUntil([&] { return acknowledged.load() >= 20; }, absl::Seconds(120)));
  ASSERT_TRUE(pg_->Restart().ok());
  stop.store(true);
  pusher.join();
  const int batches = acknowledged.load();
  ASSERT_GE(batches, 40);
  EXPECT_EQ(Query("SELECT count(*) FROM samples"), absl::StrCat(batches * 8));
  EXPECT_EQ(Query("SELECT count(*) FROM (SELECT host, gpu_index, sample_time FROM samples "
                  "GROUP BY 1, 2, 3 HAVING count(*) > 1) d"),
            "0");
  EXPECT_EQ(Query("SELECT count(*) FROM ingest_batches"), absl::StrCat(batches));
}

}  // namespace
}  // namespace goodput
