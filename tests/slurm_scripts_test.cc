// The Slurm prolog and epilog as a node runs them: with Slurm's environment, goodputctl on the
// PATH and goodput-ingest reachable, the job and its GPUs on this node get registered, and
// ended afterwards; with goodput down, the scripts still exit 0 so the job is not held up.
// Under a real Slurm (slurmctld + slurmd, 22.05 on Debian 12) running them as Prolog, Epilog
// and EpilogSlurmctld, each job ends in goodput in the state Slurm ended it in.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "goodput/v1/job.grpc.pb.h"
#include "gtest/gtest.h"
#include "tests/support/free_port.h"
#include "tests/support/postgres_server.h"
#include "tests/support/service_process.h"
#include "tests/support/slurm_cluster.h"
#include "tests/support/temp_dir.h"

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

absl::StatusOr<goodput::v1::Job> GetJob(ServiceProcess& ingest,
                                        const std::string& cluster = "perlmutter",
                                        const std::string& job_id = "4242") {
  auto stub = goodput::v1::JobService::NewStub(ingest.Channel());
  grpc::ClientContext ctx;
  goodput::v1::GetJobRequest request;
  request.mutable_key()->set_cluster(cluster);
  request.mutable_key()->set_job_id(job_id);
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

  // As EpilogSlurmctld, after the batch script exited with status 3.
  std::vector<std::pair<std::string, std::string>> env = SlurmEnv((*ingest)->grpc_address());
  env.emplace_back("SLURM_SCRIPT_CONTEXT", "epilog_slurmctld");
  env.emplace_back("SLURM_JOB_EXIT_CODE2", "3:0");
  absl::StatusOr<ProgramResult> epilog =
      RunProgram({(SourceDir() / "tools/slurm/goodput-epilog.sh").string()}, env);
  ASSERT_TRUE(epilog.ok()) << epilog.status();
  EXPECT_EQ(epilog->exit.exit_code, 0) << epilog->output;
  job = GetJob(**ingest);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->state(), goodput::v1::JOB_STATE_FAILED);
  EXPECT_TRUE(job->has_end_time());
}

// An executable script at `path` that runs `script` with goodputctl on the PATH and the
// ingest address set, as a site's /etc/goodput/slurm.env would (slurmd and slurmctld start
// prologs and epilogs with a bare environment).
void WriteWrapper(const std::filesystem::path& path, const std::filesystem::path& script,
                  const std::string& ingest_addr) {
  std::ofstream out(path);
  out << "#!/bin/sh\nexport PATH=" << BuiltBinary("tools/goodputctl").string()
      << ":/usr/bin:/bin GOODPUT_INGEST_ADDR=" << ingest_addr << "\nexec " << script.string()
      << "\n";
  out.close();
  chmod(path.c_str(), 0755);
}

// Slurm decides: exit 0, exit 1, scancel, a time limit, preemption by a job of a higher
// partition. Time limits are whole minutes and slurmctld checks them every 30 s, so the
// timed-out job gets its limit lowered to 0 while it runs: the next check ends it as at a
// real limit (TIMEOUT, Reason=TimeLimit) within 30 s. Both epilogs run for every job, as a
// site may install them; EpilogSlurmctld reports what the environment tells (ENDED or
// FAILED), and the node's Epilog the exact state, which replaces ENDED.
TEST(SlurmScripts, EpilogsEndEachJobInTheStateSlurmEndedItIn) {
  absl::StatusOr<std::unique_ptr<PostgresServer>> pg = PostgresServer::Create();
  ASSERT_TRUE(pg.ok()) << pg.status();
  ASSERT_TRUE((*pg)->CreateDatabase("goodput").ok());
  absl::StatusOr<std::unique_ptr<ServiceProcess>> ingest = ServiceProcess::Start(
      {.binary = BuiltBinary("services/ingest/goodput-ingest"),
       .config_yaml = absl::StrCat("postgres:\n  dsn: \"", (*pg)->Dsn("goodput"), "\"\n"),
       .extra_args = {"--migrate", "--migrations-dir", (SourceDir() / "migrations").string()}});
  ASSERT_TRUE(ingest.ok()) << ingest.status();
  absl::StatusOr<TempDir> scripts = TempDir::Create("goodput-slurm-scripts");
  ASSERT_TRUE(scripts.ok()) << scripts.status();
  const std::filesystem::path prolog = scripts->path() / "prolog.sh";
  const std::filesystem::path epilog = scripts->path() / "epilog.sh";
  WriteWrapper(prolog, SourceDir() / "tools/slurm/goodput-prolog.sh", (*ingest)->grpc_address());
  WriteWrapper(epilog, SourceDir() / "tools/slurm/goodput-epilog.sh", (*ingest)->grpc_address());
  absl::StatusOr<std::unique_ptr<SlurmCluster>> slurm = SlurmCluster::Create(
      {.extra_conf = {absl::StrCat("Prolog=", prolog.string()),
                      absl::StrCat("Epilog=", epilog.string()),
                      absl::StrCat("EpilogSlurmctld=", epilog.string()),
                      "PartitionName=urgent Nodes=ALL MaxTime=INFINITE State=UP PriorityTier=2",
                      "PreemptType=preempt/partition_prio", "PreemptMode=CANCEL"}});
  ASSERT_TRUE(slurm.ok()) << slurm.status();
  SlurmCluster& cluster = **slurm;
  auto submit = [&](const std::string& command, const std::vector<std::string>& args = {}) {
    absl::StatusOr<std::string> id = cluster.SubmitJob(command, args);
    EXPECT_TRUE(id.ok()) << id.status();
    return id.value_or("");
  };
  auto await = [&](const std::string& id, const std::string& state, absl::Duration timeout) {
    absl::Status s = cluster.WaitForJobState(id, state, timeout);
    EXPECT_TRUE(s.ok()) << s;
    return s.ok();
  };

  std::map<std::string, goodput::v1::JobState> expected;
  const std::string timed_out = submit("sleep 300");
  ASSERT_TRUE(await(timed_out, "RUNNING", absl::Seconds(60)));
  ASSERT_TRUE(
      cluster.Run({"scontrol", "update", absl::StrCat("JobId=", timed_out), "TimeLimit=0"}).ok());
  expected[timed_out] = goodput::v1::JOB_STATE_TIMED_OUT;
  const std::string completed = submit("exit 0");
  expected[completed] = goodput::v1::JOB_STATE_COMPLETED;
  const std::string failed = submit("exit 1");
  expected[failed] = goodput::v1::JOB_STATE_FAILED;
  const std::string cancelled = submit("sleep 300");
  ASSERT_TRUE(await(timed_out, "TIMEOUT", absl::Seconds(60)));
  ASSERT_TRUE(await(cancelled, "RUNNING", absl::Seconds(60)));
  ASSERT_TRUE(cluster.Run({"scancel", cancelled}).ok());
  expected[cancelled] = goodput::v1::JOB_STATE_CANCELLED;
  ASSERT_TRUE(await(cancelled, "CANCELLED", absl::Seconds(30)));
  ASSERT_TRUE(await(completed, "COMPLETED", absl::Seconds(30)));
  ASSERT_TRUE(await(failed, "FAILED", absl::Seconds(30)));

  const std::string preempted = submit("sleep 300", {"--exclusive"});
  ASSERT_TRUE(await(preempted, "RUNNING", absl::Seconds(60)));
  const std::string urgent = submit("true", {"--exclusive", "--partition=urgent"});
  expected[preempted] = goodput::v1::JOB_STATE_PREEMPTED;
  expected[urgent] = goodput::v1::JOB_STATE_COMPLETED;
  ASSERT_TRUE(await(preempted, "PREEMPTED", absl::Seconds(30)));
  ASSERT_TRUE(await(urgent, "COMPLETED", absl::Seconds(60)));

  for (const auto& [id, state] : expected) {
    goodput::v1::JobState last = goodput::v1::JOB_STATE_UNSPECIFIED;
    PollUntil(
        [&] {
          absl::StatusOr<goodput::v1::Job> job = GetJob(**ingest, "goodputtest", id);
          last = job.ok() ? job->state() : goodput::v1::JOB_STATE_UNSPECIFIED;
          return last == state;
        },
        absl::Seconds(30), absl::Milliseconds(200));
    EXPECT_EQ(goodput::v1::JobState_Name(last), goodput::v1::JobState_Name(state))
        << "job " << id << "; scontrol says:\n"
        << cluster.ShowJob(id).value_or("(nothing)");
  }
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
