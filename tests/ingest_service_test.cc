// goodput-ingest as a running process against a real PostgreSQL: jobs registered and samples
// attributed, retried batches stored once, bad input refused item by item with the rest kept,
// late registration attaching earlier samples, overlapping allocations refused, and every
// acknowledged sample present exactly once after PostgreSQL restarts during pushes.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "goodput/v1/ingest.grpc.pb.h"
#include "goodput/v1/job.grpc.pb.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "httplib.h"
#include "tests/support/child_process.h"
#include "tests/support/postgres_server.h"
#include "tests/support/service_process.h"
#include "tests/support/test_steps.h"

namespace goodput {
namespace {

using ::goodput::testing::PollUntil;
using ::goodput::testing::PostgresServer;
using ::goodput::testing::ServiceProcess;
using ::testing::ElementsAre;
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

  // Pushes an exposition body of cluster eos scraped at `scrape_ms`.
  grpc::Status PushBody(const std::string& batch_id, const std::string& body, int64_t scrape_ms,
                        v1::PushExpositionResponse* response) {
    v1::PushExpositionRequest request;
    request.set_batch_id(batch_id);
    request.set_cluster("eos");
    request.set_scrape_time_unix_ms(scrape_ms);
    request.set_body(body);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    return ingest_stub_->PushExposition(&ctx, request, response);
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
  // A model the catalog does not know keeps its telemetry (ofu flags its OFU unavailable).
  EXPECT_EQ(response.stored_count(), 3);
  EXPECT_EQ(response.refused_count(), 4);
  ASSERT_EQ(response.refusals_size(), 4);
  EXPECT_EQ(response.refusals(0).message(),
            "sample 1 of batch b-3: tensor_active=1.7 is outside [0, 1]");
  EXPECT_EQ(response.refusals(1).code(), v1::REFUSAL_CODE_NOT_FINITE);
  EXPECT_EQ(response.refusals(2).field(), "sm_clock_mhz");
  EXPECT_EQ(response.refusals(3).code(), v1::REFUSAL_CODE_FUTURE_TIMESTAMP);
  EXPECT_EQ(Query("SELECT count(*) FROM samples"), "3");
  EXPECT_EQ(Query("SELECT gpu_model FROM samples WHERE gpu_index = 4"), "NVIDIA Imaginary X1");
}

// Values and strings PostgreSQL cannot store used to fail the whole COPY: the batch answered
// INTERNAL, its good samples were lost and the sender retried the poison batch forever.
TEST_F(IngestServiceIntegration, PoisonValuesAreRefusedAloneAndTheGoodSamplesAreStored) {
  const int64_t now = NowMs();
  v1::PushSamplesRequest poison;
  poison.set_batch_id("poison-1");
  poison.set_cluster("eos");
  *poison.add_samples() = MakeSample("n1", 0, now - 1000);
  v1::GpuSample huge_power = MakeSample("n1", 1, now - 1000);
  huge_power.set_power_w(1e39);
  *poison.add_samples() = huge_power;
  v1::GpuSample huger_power = MakeSample("n1", 2, now - 1000);
  huger_power.set_power_w(1e300);
  *poison.add_samples() = huger_power;
  *poison.add_samples() = MakeSample("n1", 3, now - 1000, 5e-324);  // below a float: stored as 0
  *poison.add_samples() = MakeSample(std::string("n1\0evil", 7), 4, now - 1000);
  *poison.add_samples() = MakeSample(std::string(3000, 'h'), 5, now - 1000);
  v1::GpuSample long_label = MakeSample("n1", 6, now - 1000);
  (*long_label.mutable_labels())["hpc_job"] = std::string(3000, '7');
  *poison.add_samples() = long_label;
  v1::GpuSample nul_label = MakeSample("n1", 7, now - 1000);
  (*nul_label.mutable_labels())["pod"] = std::string("a\0b", 3);
  *poison.add_samples() = nul_label;
  *poison.add_samples() = MakeSample("n1", 8, now - 1000);
  v1::PushSamplesRequest after;
  after.set_batch_id("after-poison");
  after.set_cluster("eos");
  *after.add_samples() = MakeSample("n2", 0, now - 1000);

  v1::PushSamplesResponse response;
  grpc::Status status = Push({poison, after}, &response);
  ASSERT_TRUE(status.ok()) << status.error_message() << ingest_->process().LogTail();
  ASSERT_EQ(response.batches_size(), 2);  // the batch after the poison one is acknowledged too
  EXPECT_EQ(response.batches(0).stored_count(), 3);
  EXPECT_EQ(response.batches(0).refused_count(), 6);
  EXPECT_EQ(response.batches(1).stored_count(), 1);
  ASSERT_EQ(response.refusals_size(), 6);
  EXPECT_EQ(response.refusals(0).field(), "power_w");
  EXPECT_THAT(response.refusals(0).message(), HasSubstr("4-byte real"));
  EXPECT_EQ(response.refusals(1).field(), "power_w");
  EXPECT_EQ(response.refusals(2).field(), "gpu.host");
  EXPECT_THAT(response.refusals(2).message(), HasSubstr("NUL byte at byte 2"));
  EXPECT_EQ(response.refusals(2).value(), "n1\\x00evil");  // escaped, never raw
  EXPECT_EQ(response.refusals(3).field(), "gpu.host");
  EXPECT_THAT(response.refusals(3).message(), HasSubstr("3000 bytes; the limit is 255"));
  EXPECT_LE(response.refusals(3).message().size(), 400u);
  EXPECT_EQ(response.refusals(4).field(), "labels.hpc_job");
  EXPECT_EQ(response.refusals(5).field(), "labels.pod");
  EXPECT_EQ(Query("SELECT string_agg(gpu_index::text || ':' || tensor_active, ',' "
                  "ORDER BY gpu_index) FROM samples WHERE host = 'n1'"),
            "0:0.4,3:0,8:0.4");
  EXPECT_EQ(Query("SELECT count(*) FROM samples"), "4");
}

// A message the server cannot parse used to end the stream as if the client had finished:
// status OK, the batches after it silently dropped.
TEST_F(IngestServiceIntegration, UnreadableMessageFailsTheStreamNamingItsPositionAfterTheCommitted) {
  const int64_t now = NowMs();
  auto batch = [&](const std::string& id, const std::string& host) {
    v1::PushSamplesRequest b;
    b.set_batch_id(id);
    b.set_cluster("eos");
    *b.add_samples() = MakeSample(host, 0, now - 1000);
    return b.SerializeAsString();
  };
  const std::vector<std::string> messages = {batch("first", "n1"), std::string("\xff\xff\xff\x01", 4),
                                             batch("third", "n3")};
  grpc::GenericStub stub(ingest_->Channel());
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  grpc::CompletionQueue cq;
  void* tag = nullptr;
  bool ok = false;
  auto call = stub.PrepareCall(&ctx, "/goodput.v1.IngestService/PushSamples", &cq);
  call->StartCall(reinterpret_cast<void*>(1));
  ASSERT_TRUE(cq.Next(&tag, &ok) && ok);
  for (const std::string& m : messages) {
    grpc::Slice slice(m);
    grpc::ByteBuffer buffer(&slice, 1);
    call->Write(buffer, reinterpret_cast<void*>(2));
    ASSERT_TRUE(cq.Next(&tag, &ok));
    if (!ok) break;  // the server has already ended the stream
  }
  call->WritesDone(reinterpret_cast<void*>(3));
  ASSERT_TRUE(cq.Next(&tag, &ok));
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(4));
  ASSERT_TRUE(cq.Next(&tag, &ok));

  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("message 2 of the stream"));
  EXPECT_THAT(status.error_message(), HasSubstr("the 1 messages before it were committed"));
  const auto& trailers = ctx.GetServerTrailingMetadata();
  auto it = trailers.find("goodput-committed-batches-bin");
  ASSERT_NE(it, trailers.end());
  v1::PushSamplesResponse committed;
  ASSERT_TRUE(committed.ParseFromString(std::string(it->second.data(), it->second.size())));
  ASSERT_EQ(committed.batches_size(), 1);
  EXPECT_EQ(committed.batches(0).batch_id(), "first");
  EXPECT_EQ(committed.stored_count(), 1);
  EXPECT_EQ(Query("SELECT string_agg(host, ',') FROM samples"), "n1");
}

// A Slurm prolog registering `hostname -f` and an exporter printing the short name (or the
// reverse) name one machine.
TEST_F(IngestServiceIntegration, AllocationAndSamplesMatchWhicheverFormOfTheHostEachUses) {
  const int64_t now = NowMs();
  v1::RegisterJobResponse registered;
  ASSERT_TRUE(
      Register(SlurmJob("5001", "Gpu-Node-9.eos.example.com", {0, 1}, now - 60'000), &registered)
          .ok());
  EXPECT_EQ(registered.job().allocations(0).gpu().host(), "gpu-node-9");
  v1::PushSamplesRequest batch;
  batch.set_batch_id("hosts-1");
  batch.set_cluster("eos");
  *batch.add_samples() = MakeSample("gpu-node-9", 0, now - 1000);
  *batch.add_samples() = MakeSample("GPU-NODE-9.EOS.EXAMPLE.COM", 1, now - 1000);
  v1::PushSamplesResponse response;
  ASSERT_TRUE(Push({batch}, &response).ok());
  EXPECT_EQ(response.unattributed_count(), 0);
  EXPECT_EQ(Query("SELECT count(*) FROM samples s JOIN jobs j ON j.id = s.job "
                  "WHERE j.job_id = '5001' AND s.host = 'gpu-node-9'"),
            "2");
}

// The node's epilog never ran for job 6001: job 6002 is given the same GPU later. Its
// registration succeeds, the stale allocation is closed where 6002 starts, the samples from
// then on move to 6002, and 6001 is ended without a final state.
TEST_F(IngestServiceIntegration, MissingEpilogIsClosedByTheNextJobOnTheGpu) {
  const int64_t now = NowMs();
  v1::RegisterJobResponse first;
  ASSERT_TRUE(Register(SlurmJob("6001", "n4", {0}, now - 7'200'000), &first).ok());
  v1::PushSamplesRequest batch;
  batch.set_batch_id("epilog-1");
  batch.set_cluster("eos");
  *batch.add_samples() = MakeSample("n4", 0, now - 5'400'000);  // 6001's
  *batch.add_samples() = MakeSample("n4", 0, now - 1'800'000);  // 6002's, attributed to 6001 now
  v1::PushSamplesResponse pushed;
  ASSERT_TRUE(Push({batch}, &pushed).ok());
  ASSERT_EQ(pushed.unattributed_count(), 0);

  v1::RegisterJobResponse second;
  grpc::Status status = Register(SlurmJob("6002", "n4", {0}, now - 3'600'000), &second);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(second.attached_sample_count(), 1);
  EXPECT_EQ(Query("SELECT string_agg(j.job_id, ',' ORDER BY s.sample_time) FROM samples s "
                  "JOIN jobs j ON j.id = s.job"),
            "6001,6002");
  v1::GetJobRequest get;
  get.mutable_key()->set_cluster("eos");
  get.mutable_key()->set_job_id("6001");
  grpc::ClientContext ctx;
  v1::GetJobResponse old;
  ASSERT_TRUE(jobs_->GetJob(&ctx, get, &old).ok());
  EXPECT_EQ(old.job().state(), v1::JOB_STATE_ENDED);
  EXPECT_EQ(old.job().end_time().seconds(), (now - 3'600'000) / 1000);

  // A GPU held by a job that started later is still refused: not a missing epilog.
  v1::RegisterJobResponse third;
  status = Register(SlurmJob("6003", "n4", {0}, now - 4'000'000), &third);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), HasSubstr("overlaps job"));
}

// `scontrol requeue`: job 7001 runs, ends, and runs again under the same id on other GPUs.
TEST_F(IngestServiceIntegration, RequeuedJobRunsAgainAndBothRunsStayVisible) {
  const int64_t now = NowMs();
  v1::RegisterJobResponse r;
  ASSERT_TRUE(Register(SlurmJob("7001", "n5", {0}, now - 10'800'000), &r).ok());
  grpc::ClientContext end_ctx;
  v1::EndJobRequest end;
  end.mutable_key()->set_cluster("eos");
  end.mutable_key()->set_job_id("7001");
  SetTime(now - 7'200'000, end.mutable_end_time());
  end.set_final_state(v1::JOB_STATE_PREEMPTED);
  v1::EndJobResponse ended;
  ASSERT_TRUE(jobs_->EndJob(&end_ctx, end, &ended).ok());

  grpc::Status status = Register(SlurmJob("7001", "n6", {1}, now - 3'600'000), &r);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_FALSE(r.created());
  EXPECT_EQ(r.job().state(), v1::JOB_STATE_RUNNING);
  EXPECT_FALSE(r.job().has_end_time());
  EXPECT_EQ(r.job().labels().at("requeues"), "1");
  ASSERT_EQ(r.job().allocations_size(), 2);

  v1::PushSamplesRequest batch;
  batch.set_batch_id("requeue-1");
  batch.set_cluster("eos");
  *batch.add_samples() = MakeSample("n5", 0, now - 9'000'000);  // first run
  *batch.add_samples() = MakeSample("n6", 1, now - 1'800'000);  // second run
  *batch.add_samples() = MakeSample("n5", 0, now - 1'800'000);  // n5 after the first run
  v1::PushSamplesResponse pushed;
  ASSERT_TRUE(Push({batch}, &pushed).ok());
  EXPECT_EQ(pushed.unattributed_count(), 1);
  EXPECT_EQ(Query("SELECT string_agg(s.host, ',' ORDER BY s.sample_time) FROM samples s "
                  "JOIN jobs j ON j.id = s.job WHERE j.job_id = '7001'"),
            "n5,n6");
}

// ingest.jobs.silent_after_s: job 8001's node went away without an epilog; the maintenance
// round ends it at its last sample, while 8002, whose GPU still reports, runs on.
TEST_F(IngestServiceIntegration, JobWhoseGpusWentSilentIsEndedByMaintenance) {
  const int64_t now = NowMs();
  v1::RegisterJobResponse r;
  ASSERT_TRUE(Register(SlurmJob("8001", "n7", {0}, now - 7'200'000), &r).ok());
  ASSERT_TRUE(Register(SlurmJob("8002", "n7", {1}, now - 7'200'000), &r).ok());
  v1::PushSamplesRequest batch;
  batch.set_batch_id("silent-1");
  batch.set_cluster("eos");
  *batch.add_samples() = MakeSample("n7", 0, now - 5'400'000);
  *batch.add_samples() = MakeSample("n7", 1, now - 60'000);
  v1::PushSamplesResponse pushed;
  ASSERT_TRUE(Push({batch}, &pushed).ok());

  ingest_.reset();
  ASSERT_NO_FATAL_FAILURE(StartIngest("  jobs:\n    silent_after_s: 3600\n"));
  auto get = [&](const std::string& id) {
    v1::GetJobRequest request;
    request.mutable_key()->set_cluster("eos");
    request.mutable_key()->set_job_id(id);
    grpc::ClientContext ctx;
    v1::GetJobResponse response;
    EXPECT_TRUE(jobs_->GetJob(&ctx, request, &response).ok());
    return response.job();
  };
  ASSERT_TRUE(
      PollUntil([&] { return get("8001").state() == v1::JOB_STATE_ENDED; }, absl::Seconds(30)));
  v1::Job silent = get("8001");
  EXPECT_EQ(silent.end_time().seconds(), (now - 5'400'000) / 1000);
  EXPECT_EQ(silent.labels().at("ended_by"), "silent");
  EXPECT_EQ(get("8002").state(), v1::JOB_STATE_RUNNING);
}

TEST_F(IngestServiceIntegration, BatchIdsOfTwoClustersDoNotCollide) {
  const int64_t now = NowMs();
  v1::PushSamplesRequest eos;
  eos.set_batch_id("node-boot-1-1");
  eos.set_cluster("eos");
  *eos.add_samples() = MakeSample("n1", 0, now - 1000);
  v1::PushSamplesRequest selene = eos;
  selene.set_cluster("selene");
  *selene.add_samples() = MakeSample("n1", 1, now - 1000);

  v1::PushSamplesResponse first;
  ASSERT_TRUE(Push({eos}, &first).ok());
  v1::PushSamplesResponse second;
  ASSERT_TRUE(Push({selene}, &second).ok());
  ASSERT_EQ(second.batches_size(), 1);
  EXPECT_FALSE(second.batches(0).duplicate());
  EXPECT_EQ(second.stored_count(), 2);
  v1::PushSamplesResponse retry;
  ASSERT_TRUE(Push({eos}, &retry).ok());
  ASSERT_EQ(retry.batches_size(), 1);
  EXPECT_TRUE(retry.batches(0).duplicate());
  // The reply says which earlier delivery it repeats: when it was committed.
  EXPECT_GE(retry.batches(0).duplicate_of_received_at().seconds(), (now - 60'000) / 1000);
  EXPECT_LE(retry.batches(0).duplicate_of_received_at().seconds(), NowMs() / 1000 + 1);
  EXPECT_EQ(Query("SELECT string_agg(cluster || ':' || n, ',' ORDER BY cluster) FROM "
                  "(SELECT cluster, count(*) AS n FROM samples GROUP BY cluster) c"),
            "eos:1,selene:2");
}

// Real exporter output (tests/data/dcgm/README.md names the sources).
std::string ReadDcgmData(const std::string& name) {
  std::ifstream in(absl::StrCat(GOODPUT_SOURCE_DIR, "/tests/data/dcgm/", name));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST_F(IngestServiceIntegration, DcgmBlankValuesAreStoredAsMissingAndOtherExportersKept) {
  // Real exporter output (tests/data/dcgm/README.md names the sources): an H100 whose
  // profiling fields are all DCGM blanks, and a V100.
  auto read = ReadDcgmData;
  const std::string h100 = read("h100_profiling_blank.prom");
  ASSERT_FALSE(h100.empty());
  v1::PushExpositionRequest request;
  request.set_batch_id("scrape-gpu-node-042-blank");
  request.set_cluster("eos");
  request.set_scrape_time_unix_ms(NowMs() - 2000);
  request.set_body(h100);
  grpc::ClientContext ctx;
  v1::PushExpositionResponse response;
  grpc::Status status = ingest_stub_->PushExposition(&ctx, request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.stored_count(), 1);
  EXPECT_EQ(response.refused_count(), 0);
  EXPECT_EQ(response.blank_value_count(), 11);
  EXPECT_EQ(Query("SELECT power_w || ' ' || fb_used_mib || ' ' || "
                  "(tensor_active IS NULL AND sm_active IS NULL AND dram_active IS NULL AND "
                  "pcie_tx_bytes IS NULL AND nvlink_rx_bytes IS NULL) FROM samples"),
            "69.437 0 true");

  v1::PushExpositionRequest v100 = request;
  v100.set_batch_id("scrape-r6i3n0-1");
  v100.set_body(read("v100_dcgm_exporter.prom"));
  grpc::ClientContext ctx2;
  v1::PushExpositionResponse v100_response;
  ASSERT_TRUE(ingest_stub_->PushExposition(&ctx2, v100, &v100_response).ok());
  // GPU 0's utilization and PCIe replay counter, GPU 1's PCIe replay counter (a fault signal:
  // services/ingest/README.md, "GPU faults"); the power limits are not used.
  EXPECT_EQ(v100_response.stored_count(), 2);
  EXPECT_EQ(v100_response.refused_count(), 0);
  EXPECT_EQ(v100_response.ignored_line_count(), 2);
  EXPECT_EQ(Query("SELECT host || ' ' || gpu_model FROM samples WHERE gpu_index = 0 AND "
                  "host = 'r6i3n0'"),
            "r6i3n0 Tesla V100-SXM2-32GB");
  // Every set-aside line is counted by source on /metrics.
  httplib::Client http("127.0.0.1", ingest_->http_port());
  httplib::Result metrics = http.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_THAT(metrics->body,
              HasSubstr("goodput_ingest_dcgm_blank_values_total{source=\"exposition\"} 11"));
  EXPECT_THAT(metrics->body,
              HasSubstr("goodput_ingest_lines_ignored_total{source=\"exposition\"} 2"));
}

TEST_F(IngestServiceIntegration, MigInstancesOfOneGpuAreAllocatedToTwoJobsAndAttributed) {
  // An A30 in four 1g.6gb instances; the exporter prints the host with its domain.
  const std::string host = "yg-data-k8s-gpu-a30-node-test-test0003";
  const std::string uuid = "GPU-265c9814-6156-355b-e589-ff2064894f16";
  const int64_t now = NowMs();
  auto mig_job = [&](const std::string& id, std::optional<int> instance) {
    v1::Job job = SlurmJob(id, host, {}, now - 600'000);
    job.set_gpu_model("NVIDIA A30");
    v1::GpuRef* gpu = job.add_allocations()->mutable_gpu();
    gpu->set_host(host);
    gpu->set_uuid(uuid);
    if (instance.has_value()) {
      gpu->mutable_mig()->set_gpu_instance_id(*instance);
      gpu->mutable_mig()->set_profile("1g.6gb");
    }
    return job;
  };
  v1::RegisterJobResponse a, b, whole;
  ASSERT_TRUE(Register(mig_job("mig-a", 3), &a).ok());
  ASSERT_TRUE(Register(mig_job("mig-b", 4), &b).ok());
  EXPECT_EQ(a.job().allocations(0).gpu().mig().gpu_instance_id(), 3);
  EXPECT_EQ(a.job().allocations(0).gpu().mig().profile(), "1g.6gb");
  // The whole GPU overlaps every instance: refused, naming the job holding one.
  grpc::Status refused = Register(mig_job("whole", std::nullopt), &whole);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(refused.error_message(), HasSubstr("overlaps job mig-"));
  // So does a second job on instance 3.
  EXPECT_EQ(Register(mig_job("mig-a2", 3), &whole).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);

  v1::PushExpositionResponse response;
  grpc::Status status = PushBody("scrape-a30-1", ReadDcgmData("a30_mig_1g6gb.prom"), now - 2000, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.stored_count(), 4);
  EXPECT_EQ(response.refused_count(), 0);
  EXPECT_EQ(Query("SELECT string_agg(s.mig_instance_id || '=' || coalesce(j.job_id, '-') || ' ' "
                  "|| s.mig_profile || ' ' || s.host, ',' ORDER BY s.mig_instance_id) "
                  "FROM samples s LEFT JOIN jobs j ON j.id = s.job"),
            absl::StrCat("3=mig-a 1g.6gb ", host, ",4=mig-b 1g.6gb ", host, ",5=- 1g.6gb ", host,
                         ",6=- 1g.6gb ", host));

  // The job shows the host name as the exporter printed it.
  v1::GetJobRequest get;
  get.mutable_key()->set_cluster("eos");
  get.mutable_key()->set_job_id("mig-a");
  grpc::ClientContext get_ctx;
  v1::GetJobResponse got;
  ASSERT_TRUE(jobs_->GetJob(&get_ctx, get, &got).ok());
  ASSERT_EQ(got.job().hosts_seen_size(), 1);
  EXPECT_EQ(got.job().hosts_seen(0).host(), host);
  EXPECT_THAT(got.job().hosts_seen(0).reported_as(), ElementsAre(host + ".mt"));
  EXPECT_EQ(got.job().gpu_count(), 1);

  // Registered after its samples arrived: instance 5's sample is attached, 6's is not.
  v1::RegisterJobResponse late;
  ASSERT_TRUE(Register(mig_job("mig-c", 5), &late).ok());
  EXPECT_EQ(late.attached_sample_count(), 1);
}

TEST_F(IngestServiceIntegration, TimeSlicedGpuSeriesPerPodAreKeptAndAttributedToTheirPods) {
  // One GPU shared by three pods: dcgm-exporter prints it once per pod.
  const int64_t now = NowMs();
  for (const char* id : {"default/pod1", "default/pod2"}) {
    v1::Job job = SlurmJob(id, "x", {}, now - 600'000);
    job.set_scheduler(v1::SCHEDULER_KIND_KUBERNETES);
    job.set_gpu_model("");
    job.set_gpu_count(1);
    v1::RegisterJobResponse registered;
    ASSERT_TRUE(Register(job, &registered).ok()) << id;
  }
  v1::PushExpositionResponse response;
  grpc::Status status = PushBody("scrape-worker1-1", ReadDcgmData("rtx4090_time_sliced_pods.prom"), now - 2000, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.stored_count(), 3);  // before: 1 stored, 2 refused as duplicates
  EXPECT_EQ(response.refused_count(), 0);
  EXPECT_EQ(Query("SELECT string_agg(s.labels ->> 'exported_pod' || '=' || coalesce(j.job_id, "
                  "'-') || ' shared by ' || (s.labels ->> 'gpu_shared_by'), ',' ORDER BY "
                  "s.labels ->> 'exported_pod') FROM samples s LEFT JOIN jobs j ON j.id = s.job"),
            "pod1=default/pod1 shared by 3,pod2=default/pod2 shared by 3,pod3=- shared by 3");
}

TEST_F(IngestServiceIntegration, RegisterJobRefusesIdentitiesItCannotStoreExactly) {
  const int64_t now = NowMs();
  struct Case {
    std::string what;
    std::function<void(v1::Job*)> spoil;
    std::string field;
  };
  const std::vector<Case> cases = {
      {"NUL in job id", [](v1::Job* j) { j->mutable_key()->set_job_id(std::string("job\0x", 5)); },
       "job.key.job_id"},
      {"unknown GPU model", [](v1::Job* j) { j->set_gpu_model("NVIDIA Imaginary X1"); },
       "job.gpu_model"},
      {"1970 start", [](v1::Job* j) { j->mutable_start_time()->set_seconds(0); },
       "job.start_time"},
      {"year 3000 end", [](v1::Job* j) { j->mutable_end_time()->set_seconds(32503680000); },
       "job.end_time"},
      {"1 MB name", [](v1::Job* j) { j->set_name(std::string(1 << 20, 'n')); }, "job.name"},
      {"2^31-1 GPUs", [](v1::Job* j) { j->set_gpu_count(2147483647); }, "job.gpu_count"},
      {"unknown scheduler", [](v1::Job* j) { j->set_scheduler(static_cast<v1::SchedulerKind>(42)); },
       "job.scheduler"},
  };
  for (const Case& c : cases) {
    v1::Job job = SlurmJob("job", "n1", {0}, now - 60'000);
    c.spoil(&job);
    v1::RegisterJobResponse response;
    grpc::Status status = Register(job, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.what;
    EXPECT_THAT(status.error_message(), HasSubstr(c.field)) << c.what;
    EXPECT_LE(status.error_message().size(), 500u) << c.what;
  }
  EXPECT_EQ(Query("SELECT count(*) FROM jobs"), "0");
}

// The configured input limits (ingest.limits.*, ingest.jobs.max_request_bytes) hold on the
// gRPC paths: a sample beyond them is refused alone, a job request refused whole.
TEST_F(IngestServiceIntegration, ConfiguredInputLimitsRefuseAloneAndKeepTheRest) {
  ingest_.reset();
  StartIngest(
      "  max_labels_per_series: 4\n  limits:\n    max_label_value_bytes: 32\n"
      "    max_text_bytes: 64\n  jobs:\n    max_request_bytes: 4096\n");
  const int64_t now = NowMs();
  v1::PushSamplesRequest batch;
  batch.set_batch_id("limits");
  batch.set_cluster("eos");
  *batch.add_samples() = MakeSample("n1", 0, now - 1000);
  v1::GpuSample markup_host = MakeSample("<img src=x onerror=alert(1)>", 1, now - 1000);
  *batch.add_samples() = markup_host;
  v1::GpuSample long_label = MakeSample("n1", 2, now - 1000);
  (*long_label.mutable_labels())["pod"] = std::string(33, 'p');
  *batch.add_samples() = long_label;
  v1::GpuSample many_labels = MakeSample("n1", 3, now - 1000);
  for (int i = 0; i < 5; ++i) (*many_labels.mutable_labels())[absl::StrCat("l", i)] = "v";
  *batch.add_samples() = many_labels;
  *batch.add_samples() = MakeSample("n1", 4, now - 1000);
  v1::PushSamplesResponse response;
  ASSERT_TRUE(Push({batch}, &response).ok());
  EXPECT_EQ(response.stored_count(), 2);
  ASSERT_EQ(response.refusals_size(), 3);
  EXPECT_EQ(response.refusals(0).field(), "gpu.host");
  EXPECT_THAT(response.refusals(0).message(), HasSubstr("contains '<' at byte 0"));
  EXPECT_THAT(response.refusals(1).message(),
              HasSubstr("is 33 bytes; the limit is 32 (ingest.limits.max_label_value_bytes)"));
  EXPECT_THAT(response.refusals(2).message(),
              HasSubstr("5 labels are more than the 4 a sample may carry"));
  EXPECT_EQ(Query("SELECT string_agg(gpu_index::text, ',' ORDER BY gpu_index) FROM samples"),
            "0,4");

  v1::Job job = SlurmJob("7", "n1", {0}, now - 60'000);
  job.set_name(std::string(65, 'n'));
  v1::RegisterJobResponse registered;
  grpc::Status status = Register(job, &registered);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("job.name=\"nnn"));
  job.set_name("ok");
  for (int g = 1; g < 400; ++g) {
    v1::GpuAllocation* a = job.add_allocations();
    a->mutable_gpu()->set_host(absl::StrCat("gpu-node-", g));
    a->mutable_gpu()->set_gpu_index(0);
  }
  status = Register(job, &registered);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(status.error_message(),
              HasSubstr("bytes; the limit is 4096 bytes (ingest.jobs.max_request_bytes)"));
  job.mutable_allocations()->DeleteSubrange(1, 399);
  job.mutable_key()->set_job_id("7;reboot");
  status = Register(job, &registered);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("job.key.job_id=\"7;reboot\" contains ';'"));
  job.mutable_key()->set_job_id("7");
  EXPECT_TRUE(Register(job, &registered).ok());
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

// A job of 1,000 GPUs (125 nodes of 8) registered in one request: each GPU's samples from the
// job's start on are attached, a GPU listed twice is held once, the GPU of a job whose epilog
// never came is taken over with its samples, a retry adds nothing, and a request whose third
// allocation overlaps the big job is refused naming that GPU, storing none of it.
TEST_F(IngestServiceIntegration, LargeRegistrationAttachesEachGpusSamplesAndARetryAddsNothing) {
  const int64_t now = NowMs();
  v1::RegisterJobResponse r;
  ASSERT_TRUE(Register(SlurmJob("abandoned", "big-n7", {3}, now - 100'000), &r).ok());
  v1::PushSamplesRequest batch;
  batch.set_batch_id("before-big");
  batch.set_cluster("eos");
  for (int node = 0; node < 125; ++node) {
    for (int gpu = 0; gpu < 8; ++gpu) {
      const std::string host = absl::StrCat("big-n", node);
      *batch.add_samples() = MakeSample(host, gpu, now - 60'000);  // before the job
      *batch.add_samples() = MakeSample(host, gpu, now - 20'000);
    }
  }
  v1::PushSamplesResponse pushed;
  ASSERT_TRUE(Push({batch}, &pushed).ok());
  EXPECT_EQ(pushed.unattributed_count(), 1998);  // big-n7 GPU 3 belongs to "abandoned"

  std::vector<int> gpus = {0, 1, 2, 3, 4, 5, 6, 7};
  v1::Job big = SlurmJob("big", "big-n0", gpus, now - 30'000);
  for (int node = 1; node < 125; ++node) {
    for (int gpu : gpus) {
      auto* a = big.add_allocations();
      a->mutable_gpu()->set_host(absl::StrCat("big-n", node));
      a->mutable_gpu()->set_gpu_index(gpu);
    }
  }
  *big.add_allocations() = big.allocations(5);  // listed twice
  ASSERT_TRUE(Register(big, &r).ok());
  EXPECT_TRUE(r.created());
  EXPECT_EQ(r.job().gpu_count(), 1000);
  EXPECT_EQ(r.attached_sample_count(), 1000);
  EXPECT_EQ(Query("SELECT count(*) FROM job_gpus g JOIN jobs j ON j.id = g.job "
                  "WHERE j.job_id = 'big'"),
            "1000");
  EXPECT_EQ(Query("SELECT count(*) FROM samples s JOIN jobs j ON j.id = s.job "
                  "WHERE j.job_id = 'big'"),
            "1000");
  EXPECT_EQ(Query("SELECT state || ' ' || (labels ->> 'ended_by') FROM jobs "
                  "WHERE job_id = 'abandoned'"),
            "ended next_job");

  ASSERT_TRUE(Register(big, &r).ok());  // a retry
  EXPECT_FALSE(r.created());
  EXPECT_EQ(r.attached_sample_count(), 0);
  EXPECT_EQ(r.job().allocations_size(), 1000);

  v1::Job late = SlurmJob("late", "big-n200", {0, 1}, now - 40'000);
  auto* taken = late.add_allocations();
  taken->mutable_gpu()->set_host("big-n5");
  taken->mutable_gpu()->set_gpu_index(2);
  grpc::Status status = Register(late, &r);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), HasSubstr("allocation of big-n5 GPU 2 overlaps job big"));
  EXPECT_EQ(Query("SELECT count(*) FROM job_gpus WHERE host = 'big-n200'"), "0");
}

TEST_F(IngestServiceIntegration, OverlappingAllocationIsRefusedNamingBothJobs) {
  const int64_t now = NowMs();
  v1::RegisterJobResponse r;
  ASSERT_TRUE(Register(SlurmJob("100", "n3", {0, 1}, now - 60'000), &r).ok());
  // Starting before the job that holds the GPU: refused (a later start would be read as job
  // 100's missing epilog, see MissingEpilogIsClosedByTheNextJobOnTheGpu).
  grpc::Status status = Register(SlurmJob("101", "n3", {1, 2}, now - 90'000), &r);
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
