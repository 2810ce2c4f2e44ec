// The Slurm prolog and epilog as a node runs them: with Slurm's environment, goodputctl on the
// PATH and goodput-ingest reachable, the job and its GPUs on this node get registered, and
// ended afterwards; with goodput down, the scripts still exit 0 so the job is not held up.
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "goodput/v1/job.grpc.pb.h"
#include "gtest/gtest.h"
#include "tests/support/free_port.h"
#include "tests/support/postgres_server.h"
#include "tests/support/service_process.h"

namespace goodput::testing {
namespace {

std::string ShortHostname() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  std::string host = name;
  return host.substr(0, host.find('.'));
}

std::vector<std::pair<std::string, std::string>> SlurmEnv(const std::string& ingest_addr) {
  const char* path = std::getenv("PATH");
  return {{"PATH", absl::StrCat(BuiltBinary("tools/goodputctl").string(), ":", path ? path : "")},
          {"GOODPUT_INGEST_ADDR", ingest_addr},
          {"SLURM_CLUSTER_NAME", "perlmutter"},
          {"SLURM_JOB_ID", "4242"},
          {"SLURM_JOB_USER", "alice"},
          {"SLURM_JOB_ACCOUNT", "m1234"},
          {"SLURM_JOB_NAME", "llama-pretrain"},
          {"SLURM_JOB_PARTITION", "gpu"},
          {"SLURM_JOB_GPUS", "0,1,3"}};
}

absl::StatusOr<goodput::v1::Job> GetJob(ServiceProcess& ingest) {
  auto stub = goodput::v1::JobService::NewStub(ingest.Channel());
  grpc::ClientContext ctx;
  goodput::v1::GetJobRequest request;
  request.mutable_key()->set_cluster("perlmutter");
  request.mutable_key()->set_job_id("4242");
  goodput::v1::GetJobResponse response;
  grpc::Status status = stub->GetJob(&ctx, request, &response);
  if (!status.ok()) return absl::UnknownError(status.error_message());
  return response.job();
}

TEST(SlurmScripts, PrologRegistersTheNodesGpusAndEpilogEndsTheJob) {
  absl::StatusOr<std::unique_ptr<PostgresServer>> pg = PostgresServer::Create();
  ASSERT_TRUE(pg.ok()) << pg.status();
  ASSERT_TRUE((*pg)->CreateDatabase("goodput").ok());
  absl::StatusOr<std::unique_ptr<ServiceProcess>> ingest = ServiceProcess::Start(
      {.binary = BuiltBinary("services/ingest/goodput-ingest"),
       .config_yaml = absl::StrCat("postgres:\n  dsn: \"", (*pg)->Dsn("goodput"), "\"\n"),
       .extra_args = {"--migrate", "--migrations-dir", (SourceDir() / "migrations").string()}});
  ASSERT_TRUE(ingest.ok()) << ingest.status();

  absl::StatusOr<ProgramResult> prolog =
      RunProgram({(SourceDir() / "tools/slurm/goodput-prolog.sh").string()},
                 SlurmEnv((*ingest)->grpc_address()));
  ASSERT_TRUE(prolog.ok()) << prolog.status();
  EXPECT_EQ(prolog->exit.exit_code, 0) << prolog->output;

  absl::StatusOr<goodput::v1::Job> job = GetJob(**ingest);
  ASSERT_TRUE(job.ok()) << job.status() << "\nprolog said: " << prolog->output;
  EXPECT_EQ(job->user(), "alice");
  EXPECT_EQ(job->team(), "m1234");
  EXPECT_EQ(job->scheduler(), goodput::v1::SCHEDULER_KIND_SLURM);
  ASSERT_EQ(job->allocations_size(), 3);
  std::vector<int> indexes;
  for (const auto& allocation : job->allocations()) {
    EXPECT_EQ(allocation.gpu().host(), ShortHostname());
    indexes.push_back(allocation.gpu().gpu_index());
  }
  std::sort(indexes.begin(), indexes.end());
  EXPECT_EQ(indexes, (std::vector<int>{0, 1, 3}));

  absl::StatusOr<ProgramResult> epilog =
      RunProgram({(SourceDir() / "tools/slurm/goodput-epilog.sh").string()},
                 SlurmEnv((*ingest)->grpc_address()));
  ASSERT_TRUE(epilog.ok()) << epilog.status();
  EXPECT_EQ(epilog->exit.exit_code, 0) << epilog->output;
  job = GetJob(**ingest);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->state(), goodput::v1::JOB_STATE_COMPLETED);
  EXPECT_TRUE(job->has_end_time());
}

TEST(SlurmScripts, PrologExitsZeroWhenGoodputIsDown) {
  absl::StatusOr<int> port = FreePort();
  ASSERT_TRUE(port.ok());
  absl::StatusOr<ProgramResult> prolog =
      RunProgram({(SourceDir() / "tools/slurm/goodput-prolog.sh").string()},
                 SlurmEnv(absl::StrCat("127.0.0.1:", *port)));
  ASSERT_TRUE(prolog.ok()) << prolog.status();
  EXPECT_EQ(prolog->exit.exit_code, 0) << prolog->output;
}

}  // namespace
}  // namespace goodput::testing
