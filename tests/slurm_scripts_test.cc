// The Slurm prolog and epilog as a node runs them (bash and curl, talking to goodput-ingest's
// HTTP job endpoints): with Slurm's environment and goodput-ingest reachable, the job and its
// GPUs on this node get registered (with their UUIDs when nvidia-smi is there), and ended
// afterwards; with goodput down, the prolog returns at once, spools its request, and the next
// run delivers it. Under a real Slurm (slurmctld + slurmd, 22.05 on Debian 12) running them
// as Prolog, Epilog and EpilogSlurmctld, each job ends in goodput in the state Slurm ended it
// in, under the name it was submitted with.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
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

namespace fs = std::filesystem;

std::string IngestUrl(const ServiceProcess& ingest) {
  return absl::StrCat("http://127.0.0.1:", ingest.http_port());
}

// Slurm's environment for a node prolog, settings as /etc/goodput/slurm.env would give them
// (a host's own slurm.env is not read). `path_front` goes before the PATH (a fake nvidia-smi).
std::vector<std::pair<std::string, std::string>> SlurmEnv(const std::string& ingest_url,
                                                          const fs::path& spool,
                                                          const std::string& path_front = "") {
  const char* path = std::getenv("PATH");
  return {{"PATH", absl::StrCat(path_front, path_front.empty() ? "" : ":", path ? path : "")},
          {"GOODPUT_SLURM_ENV", "/nonexistent/slurm.env"},
          {"GOODPUT_INGEST_URL", ingest_url},
          {"GOODPUT_SPOOL_DIR", spool.string()},
          // A retrier the test could not reap (the test killed at its timeout) gives up
          // within minutes instead of retrying for a day against servers that are gone.
          {"GOODPUT_RETRY_FOR_S", "600"},
          {"SLURM_CLUSTER_NAME", "perlmutter"},
          {"SLURM_JOB_ID", "4242"},
          {"SLURM_JOB_USER", "alice"},
          {"SLURM_JOB_UID", "1000"},
          {"SLURM_JOB_PARTITION", "gpu"},
          {"SLURM_JOB_GPUS", "0,1,3"},
          // The tests of delivery by the next run turn the node's retrier off; the retrier's
          // own tests turn it on.
          {"GOODPUT_RETRY", "0"}};
}

// The requests waiting in the spool.
std::vector<fs::path> Spooled(const fs::path& spool) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(spool, ec)) {
    if (e.path().extension() == ".json" && e.path().filename().string()[0] != '.') {
      files.push_back(e.path());
    }
  }
  return files;
}

// A `scontrol` that answers the prolog's question about job 4242 as Slurm 22.05 does, for an
// array task whose name holds a quote, a backslash, a newline and what looks like fields.
void WriteFakeScontrol(const fs::path& dir) {
  const fs::path path = dir / "scontrol";
  std::ofstream out(path);
  out << "#!/bin/sh\n"
      << "[ \"$*\" = \"--oneliner show job 4242\" ] || exit 1\n"
      << "printf '%s\\n' 'JobId=4242 ArrayJobId=4240 ArrayTaskId=2 JobName=llama \"pretrain\" "
         "\\ v2' 'UserId=eve(0) Account=evil UserId=alice(1000) GroupId=alice(1000) "
         "MCS_label=N/A Priority=1 Nice=0 Account=m1234 QOS=normal JobState=RUNNING "
         "Comment=UserId=alice(1000) Account=evil'\n";
  out.close();
  chmod(path.c_str(), 0755);
}

// A `nvidia-smi` that answers the query the prolog makes as a node with 4 GPUs would.
void WriteFakeNvidiaSmi(const fs::path& dir) {
  const fs::path path = dir / "nvidia-smi";
  std::ofstream out(path);
  out << "#!/bin/sh\n"
      << "[ \"$1\" = --query-gpu=index,uuid ] || exit 6\n"
      << "echo '0, GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a70'\n"
      << "echo '1, GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a71'\n"
      << "echo '2, GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a72'\n"
      << "echo '3, GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a73'\n";
  out.close();
  chmod(path.c_str(), 0755);
}

absl::StatusOr<std::unique_ptr<ServiceProcess>> StartIngest(PostgresServer& pg) {
  return ServiceProcess::Start(
      {.binary = BuiltBinary("services/ingest/goodput-ingest"),
       .config_yaml = absl::StrCat("postgres:\n  dsn: \"", pg.Dsn("goodput"), "\"\n"),
       .extra_args = {"--migrate", "--migrations-dir", (SourceDir() / "migrations").string()}});
}

// goodput-ingest whose HTTP port is `http_port` (0: any), with `extra_yaml` added.
absl::StatusOr<std::unique_ptr<ServiceProcess>> StartIngestOn(PostgresServer& pg, int http_port,
                                                              const std::string& extra_yaml) {
  return ServiceProcess::Start(
      {.binary = BuiltBinary("services/ingest/goodput-ingest"),
       .config_yaml = absl::StrCat("postgres:\n  dsn: \"", pg.Dsn("goodput"), "\"\n",
                                   "http:\n  port: ", http_port, "\n", extra_yaml),
       .extra_args = {"--migrate", "--migrations-dir", (SourceDir() / "migrations").string()}});
}

// The retriers running in the spool folders under `base` (their .retrier.pid files).
std::vector<pid_t> Retriers(const fs::path& base) {
  std::vector<pid_t> pids;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(base, ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    if (it->path().filename() != ".retrier.pid") continue;
    pid_t pid = 0;
    std::ifstream(it->path()) >> pid;
    if (pid > 0 && kill(pid, 0) == 0) pids.push_back(pid);
  }
  return pids;
}

// Stops the retriers a test started that are still running when it ends (a failed test).
struct RetrierReaper {
  fs::path base;
  ~RetrierReaper() {
    for (pid_t pid : Retriers(base)) kill(pid, SIGTERM);
  }
};

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
  absl::StatusOr<std::unique_ptr<ServiceProcess>> ingest = StartIngest(**pg);
  ASSERT_TRUE(ingest.ok()) << ingest.status();
  absl::StatusOr<TempDir> dir = TempDir::Create("goodput-slurm-node");
  ASSERT_TRUE(dir.ok()) << dir.status();
  const fs::path spool = dir->path() / "spool";
  fs::create_directories(dir->path() / "bin");
  WriteFakeNvidiaSmi(dir->path() / "bin");
  WriteFakeScontrol(dir->path() / "bin");

  const auto started = std::chrono::steady_clock::now();
  absl::StatusOr<ProgramResult> prolog =
      RunProgram({(SourceDir() / "tools/slurm/goodput-prolog.sh").string()},
                 SlurmEnv(IngestUrl(**ingest), spool, (dir->path() / "bin").string()));
  const double prolog_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  ASSERT_TRUE(prolog.ok()) << prolog.status();
  EXPECT_EQ(prolog->exit.exit_code, 0) << prolog->output;
  std::cout << "prolog with goodput up: " << prolog_s << " s\n";

  absl::StatusOr<goodput::v1::Job> job = GetJob(**ingest);
  ASSERT_TRUE(job.ok()) << job.status() << "\nprolog said: " << prolog->output;
  EXPECT_EQ(job->user(), "alice");
  EXPECT_EQ(job->team(), "m1234");
  EXPECT_EQ(job->name(), "llama \"pretrain\" \\ v2\nUserId=eve(0) Account=evil");
  EXPECT_EQ(job->labels().at("partition"), "gpu");
  EXPECT_EQ(job->labels().at("qos"), "normal");  // policies select jobs by it
  EXPECT_EQ(job->labels().at("array_task"), "4240_2");
  EXPECT_EQ(job->scheduler(), goodput::v1::SCHEDULER_KIND_SLURM);
  ASSERT_EQ(job->allocations_size(), 3);
  std::vector<std::string> gpus;
  for (const auto& allocation : job->allocations()) {
    EXPECT_EQ(allocation.gpu().host(), ShortHostname());
    gpus.push_back(absl::StrCat(allocation.gpu().gpu_index(), " ", allocation.gpu().uuid()));
  }
  std::sort(gpus.begin(), gpus.end());
  EXPECT_EQ(gpus, (std::vector<std::string>{"0 GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a70",
                                            "1 GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a71",
                                            "3 GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a73"}));
  EXPECT_TRUE(Spooled(spool).empty());
  struct stat st = {};
  ASSERT_EQ(stat(spool.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);

  // As EpilogSlurmctld, after the batch script exited with status 3.
  std::vector<std::pair<std::string, std::string>> env = SlurmEnv(IngestUrl(**ingest), spool);
  env.emplace_back("SLURM_SCRIPT_CONTEXT", "epilog_slurmctld");
  env.emplace_back("SLURM_JOB_EXIT_CODE2", "3:0");
  absl::StatusOr<ProgramResult> epilog =
      RunProgram({(SourceDir() / "tools/slurm/goodput-epilog.sh").string()}, env);
  ASSERT_TRUE(epilog.ok()) << epilog.status();
  EXPECT_EQ(epilog->exit.exit_code, 0) << epilog->output;
  job = GetJob(**ingest);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->state(), goodput::v1::JOB_STATE_FAILED) << epilog->output;
  EXPECT_TRUE(job->has_end_time());
  EXPECT_TRUE(Spooled(spool).empty());
}

// The operator's GOODPUT_WORKLOAD_KIND_RULES give the job its kind: the QOS that
// `scontrol show job` prints ("normal" here) for one job, the partition for another whose
// scontrol answer is missing; a job no rule matches gets none (goodput may infer it later).
TEST(SlurmScripts, PrologMapsPartitionOrQosToTheWorkloadKindTheOperatorConfigured) {
  absl::StatusOr<std::unique_ptr<PostgresServer>> pg = PostgresServer::Create();
  ASSERT_TRUE(pg.ok()) << pg.status();
  ASSERT_TRUE((*pg)->CreateDatabase("goodput").ok());
  absl::StatusOr<std::unique_ptr<ServiceProcess>> ingest = StartIngest(**pg);
  ASSERT_TRUE(ingest.ok()) << ingest.status();
  absl::StatusOr<TempDir> dir = TempDir::Create("goodput-slurm-kind");
  ASSERT_TRUE(dir.ok()) << dir.status();
  fs::create_directories(dir->path() / "bin");
  WriteFakeNvidiaSmi(dir->path() / "bin");
  WriteFakeScontrol(dir->path() / "bin");
  auto run = [&](const std::string& job_id, const std::string& partition, int first_gpu) {
    std::vector<std::pair<std::string, std::string>> env =
        SlurmEnv(IngestUrl(**ingest), dir->path() / "spool", (dir->path() / "bin").string());
    for (auto& [k, v] : env) {
      if (k == "SLURM_JOB_ID") v = job_id;
      if (k == "SLURM_JOB_PARTITION") v = partition;
      if (k == "SLURM_JOB_GPUS") v = std::to_string(first_gpu);
    }
    env.emplace_back("GOODPUT_WORKLOAD_KIND_RULES",
                     "partition:infer*=inference qos:norm*=interactive bogus-rule");
    absl::StatusOr<ProgramResult> prolog =
        RunProgram({(SourceDir() / "tools/slurm/goodput-prolog.sh").string()}, env);
    ASSERT_TRUE(prolog.ok()) << prolog.status();
    EXPECT_EQ(prolog->exit.exit_code, 0) << prolog->output;
  };
  run("4242", "gpu", 0);
  run("4243", "inference-a100", 1);
  absl::StatusOr<goodput::v1::Job> by_qos = GetJob(**ingest, "perlmutter", "4242");
  ASSERT_TRUE(by_qos.ok()) << by_qos.status();
  EXPECT_EQ(by_qos->workload_kind(), goodput::v1::WORKLOAD_KIND_INTERACTIVE);
  EXPECT_EQ(by_qos->workload_kind_source(), goodput::v1::WORKLOAD_KIND_SOURCE_REGISTERED);
  absl::StatusOr<goodput::v1::Job> by_partition = GetJob(**ingest, "perlmutter", "4243");
  ASSERT_TRUE(by_partition.ok()) << by_partition.status();
  EXPECT_EQ(by_partition->workload_kind(), goodput::v1::WORKLOAD_KIND_INFERENCE);
}

// An executable script at `path` that runs `script` with the ingest URL and a spool folder
// set, as a site's /etc/goodput/slurm.env would (slurmd and slurmctld start prologs and
// epilogs with a bare environment); what it logs lands in `path`.log.
void WriteWrapper(const fs::path& path, const fs::path& script, const std::string& ingest_url,
                  const fs::path& spool) {
  std::ofstream out(path);
  out << "#!/bin/sh\nexport PATH=/usr/bin:/bin GOODPUT_SLURM_ENV=/nonexistent GOODPUT_INGEST_URL="
      << ingest_url << " GOODPUT_SPOOL_DIR=" << spool.string()
      << " GOODPUT_RETRY_FOR_S=600\nexec " << script.string()
      << " 2>>" << path.string() << ".log\n";
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
  const fs::path spool = scripts->path() / "spool";
  WriteWrapper(prolog, SourceDir() / "tools/slurm/goodput-prolog.sh", IngestUrl(**ingest), spool);
  WriteWrapper(epilog, SourceDir() / "tools/slurm/goodput-epilog.sh", IngestUrl(**ingest), spool);
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
  // The node prolog gets no SLURM_JOB_NAME: the name comes from scontrol, whatever it holds.
  const std::string odd_name = "say \"hi\" = UserId=eve(0) Account=x \\ done";
  const std::string completed = submit("exit 0", {absl::StrCat("--job-name=", odd_name)});
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
  absl::StatusOr<goodput::v1::Job> job = GetJob(**ingest, "goodputtest", completed);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->name(), odd_name) << "prolog said:\n"
                                   << ReadFileTail(fs::path(prolog.string() + ".log"), 4000);
  EXPECT_EQ(job->user(), "root");
  EXPECT_TRUE(Spooled(spool).empty());
}

// Goodput down: the prolog must not hold the job up. Its request waits in the spool and the
// next run on the node (here the epilog, once ingest is back) delivers it before its own.
TEST(SlurmScripts, PrologSpoolsWhenGoodputIsDownAndTheNextRunDelivers) {
  absl::StatusOr<int> port = FreePort();
  ASSERT_TRUE(port.ok());
  absl::StatusOr<TempDir> dir = TempDir::Create("goodput-slurm-node");
  ASSERT_TRUE(dir.ok()) << dir.status();
  const fs::path spool = dir->path() / "spool";
  const auto started = std::chrono::steady_clock::now();
  absl::StatusOr<ProgramResult> prolog =
      RunProgram({(SourceDir() / "tools/slurm/goodput-prolog.sh").string()},
                 SlurmEnv(absl::StrCat("http://127.0.0.1:", *port), spool));
  const double prolog_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  ASSERT_TRUE(prolog.ok()) << prolog.status();
  EXPECT_EQ(prolog->exit.exit_code, 0) << prolog->output;
  std::cout << "prolog with goodput down: " << prolog_s << " s\n";
  // Bounded by GOODPUT_SEND_BUDGET_S (8 s) whatever happens; a refused connection is instant.
  EXPECT_LT(prolog_s, 8.0) << prolog->output;
  EXPECT_EQ(Spooled(spool).size(), 1u) << prolog->output;

  absl::StatusOr<std::unique_ptr<PostgresServer>> pg = PostgresServer::Create();
  ASSERT_TRUE(pg.ok()) << pg.status();
  ASSERT_TRUE((*pg)->CreateDatabase("goodput").ok());
  absl::StatusOr<std::unique_ptr<ServiceProcess>> ingest = StartIngest(**pg);
  ASSERT_TRUE(ingest.ok()) << ingest.status();
  // An older request that no retry can fix (ending a job goodput never saw): dropped, and
  // the ones after it still delivered.
  std::ofstream(spool / "1000000000000000.1.end.json")
      << R"({"key": {"cluster": "perlmutter", "jobId": "999"}})";
  std::vector<std::pair<std::string, std::string>> env = SlurmEnv(IngestUrl(**ingest), spool);
  env.emplace_back("SLURM_SCRIPT_CONTEXT", "epilog_slurmctld");
  env.emplace_back("SLURM_JOB_EXIT_CODE2", "0:0");
  absl::StatusOr<ProgramResult> epilog =
      RunProgram({(SourceDir() / "tools/slurm/goodput-epilog.sh").string()}, env);
  ASSERT_TRUE(epilog.ok()) << epilog.status();
  EXPECT_EQ(epilog->exit.exit_code, 0) << epilog->output;
  absl::StatusOr<goodput::v1::Job> job = GetJob(**ingest);
  ASSERT_TRUE(job.ok()) << job.status() << "\nepilog said: " << epilog->output;
  EXPECT_EQ(job->allocations_size(), 3);
  EXPECT_EQ(job->state(), goodput::v1::JOB_STATE_ENDED);
  // Registered with the time the prolog ran, not the time it was delivered.
  EXPECT_LE(job->start_time().seconds(), job->end_time().seconds());
  EXPECT_TRUE(Spooled(spool).empty()) << epilog->output;
  EXPECT_THAT(epilog->output, ::testing::HasSubstr("HTTP 404"));
}

// An ingest that takes connections and never answers (a hung server, or a listener whose
// process is stopped): each request gives up at GOODPUT_HTTP_TIMEOUT_S and the run stops
// sending, so the prolog is bounded; the spool keeps at most GOODPUT_SPOOL_MAX_FILES
// requests, dropping the oldest.
TEST(SlurmScripts, PrologGivesUpOnAnIngestThatDoesNotAnswerAndBoundsTheSpool) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(listener, 16), 0);  // the kernel completes connections; nobody reads
  ASSERT_EQ(getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  absl::StatusOr<TempDir> dir = TempDir::Create("goodput-slurm-node");
  ASSERT_TRUE(dir.ok()) << dir.status();
  const fs::path spool = dir->path() / "spool";
  fs::create_directories(spool);
  for (const char* old : {"1000000000000001.1.end.json", "1000000000000002.1.end.json",
                          "1000000000000003.1.end.json"}) {
    std::ofstream(spool / old) << R"({"key": {"cluster": "perlmutter", "jobId": "1"}})";
  }
  std::vector<std::pair<std::string, std::string>> env =
      SlurmEnv(absl::StrCat("http://127.0.0.1:", ntohs(addr.sin_port)), spool);
  env.emplace_back("GOODPUT_HTTP_TIMEOUT_S", "1");
  env.emplace_back("GOODPUT_SPOOL_MAX_FILES", "3");
  const auto started = std::chrono::steady_clock::now();
  absl::StatusOr<ProgramResult> prolog =
      RunProgram({(SourceDir() / "tools/slurm/goodput-prolog.sh").string()}, env);
  const double prolog_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  close(listener);
  ASSERT_TRUE(prolog.ok()) << prolog.status();
  EXPECT_EQ(prolog->exit.exit_code, 0) << prolog->output;
  std::cout << "prolog with ingest not answering (1 s timeout): " << prolog_s << " s\n";
  // One request tried (the oldest), then the run stopped: not one timeout per request.
  EXPECT_LT(prolog_s, 4.0) << prolog->output;
  EXPECT_THAT(prolog->output, ::testing::HasSubstr("dropping the oldest 1"));
  std::vector<fs::path> left = Spooled(spool);
  std::sort(left.begin(), left.end());
  ASSERT_EQ(left.size(), 3u) << prolog->output;
  EXPECT_EQ(left[0].filename(), "1000000000000002.1.end.json");
  EXPECT_THAT(left[2].filename().string(), ::testing::EndsWith(".register.json"));
}

// Goodput down when the prolog runs: the prolog returns at once, leaving its request in the
// spool, and the node's retrier (started detached by the prolog) delivers it once ingest is
// up, with no other prolog or epilog on the node; then the retrier exits.
TEST(SlurmScripts, RetrierEmptiesTheSpoolOnceGoodputIsBackWithoutAnotherRun) {
  absl::StatusOr<int> port = FreePort();
  ASSERT_TRUE(port.ok());
  absl::StatusOr<TempDir> dir = TempDir::Create("goodput-slurm-node");
  ASSERT_TRUE(dir.ok()) << dir.status();
  RetrierReaper reaper{dir->path()};
  const fs::path spool = dir->path() / "spool";
  std::vector<std::pair<std::string, std::string>> env =
      SlurmEnv(absl::StrCat("http://127.0.0.1:", *port), spool);
  env.emplace_back("GOODPUT_RETRY", "1");
  env.emplace_back("GOODPUT_RETRY_MAX_DELAY_S", "2");
  const auto started = std::chrono::steady_clock::now();
  absl::StatusOr<ProgramResult> prolog =
      RunProgram({(SourceDir() / "tools/slurm/goodput-prolog.sh").string()}, env);
  const double prolog_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  ASSERT_TRUE(prolog.ok()) << prolog.status();
  EXPECT_EQ(prolog->exit.exit_code, 0) << prolog->output;
  std::cout << "prolog with goodput down, retrier started: " << prolog_s << " s\n";
  EXPECT_EQ(Spooled(spool).size(), 1u) << prolog->output;
  ASSERT_TRUE(PollUntil([&] { return !Retriers(dir->path()).empty(); }, absl::Seconds(20)))
      << "no retrier running; the prolog said: " << prolog->output;

  absl::StatusOr<std::unique_ptr<PostgresServer>> pg = PostgresServer::Create();
  ASSERT_TRUE(pg.ok()) << pg.status();
  ASSERT_TRUE((*pg)->CreateDatabase("goodput").ok());
  absl::StatusOr<std::unique_ptr<ServiceProcess>> ingest = StartIngestOn(**pg, *port, "");
  ASSERT_TRUE(ingest.ok()) << ingest.status();
  const auto up = std::chrono::steady_clock::now();
  EXPECT_TRUE(
      PollUntil([&] { return GetJob(**ingest).ok(); }, absl::Seconds(60), absl::Milliseconds(200)))
      << "the spooled registration was not delivered";
  std::cout << "delivered by the retrier "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - up).count()
            << " s after ingest was up\n";
  absl::StatusOr<goodput::v1::Job> job = GetJob(**ingest);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->allocations_size(), 3);
  EXPECT_TRUE(PollUntil([&] { return Spooled(spool).empty() && Retriers(dir->path()).empty(); },
                        absl::Seconds(30)))
      << "the spool was not emptied or the retrier did not exit";
}

// 50 nodes start their jobs at once while goodput is down, then it comes back with a main
// HTTP port far smaller than the burst (one thread and no queue, so every request that meets
// another is answered 503 with Retry-After) and one PostgreSQL connection for JobService:
// every node's retrier gets its registration in, with no other run on any node. The nodes
// all live on this machine, where each try's curl costs CPU a real node would not share:
// more of them measure the machine's fork rate, not goodput (tools/slurm/README.md).
TEST(SlurmScripts, ABurstOfPrologsIsRegisteredByTheNodesRetriers) {
  constexpr int kNodes = 50;
  absl::StatusOr<int> port = FreePort();
  ASSERT_TRUE(port.ok());
  absl::StatusOr<TempDir> dir = TempDir::Create("goodput-slurm-burst");
  ASSERT_TRUE(dir.ok()) << dir.status();
  RetrierReaper reaper{dir->path()};
  fs::create_directories(dir->path() / "bin");
  WriteFakeScontrol(dir->path() / "bin");  // answers job 4242 only: one quick failure here
  const fs::path burst = dir->path() / "burst.sh";
  std::ofstream(burst) << "#!/usr/bin/env bash\n"
                       << "for ((i = 0; i < " << kNodes << "; i++)); do\n"
                       << "  HOSTNAME=burst-$i SLURM_JOB_ID=$((7000 + i)) "
                       << "GOODPUT_SPOOL_DIR=\"$NODES/node-$i\" \"$PROLOG\" "
                       << ">\"$NODES/prolog-$i.log\" 2>&1 &\n"
                       << "done\nwait\n";
  chmod(burst.c_str(), 0755);
  std::vector<std::pair<std::string, std::string>> env =
      SlurmEnv(absl::StrCat("http://127.0.0.1:", *port), dir->path() / "unused",
               (dir->path() / "bin").string());
  env.emplace_back("GOODPUT_RETRY", "1");
  env.emplace_back("GOODPUT_RETRY_MAX_DELAY_S", "5");
  env.emplace_back("SLURM_JOB_GPUS", "0-7");
  env.emplace_back("NODES", dir->path().string());
  env.emplace_back("PROLOG", (SourceDir() / "tools/slurm/goodput-prolog.sh").string());
  absl::StatusOr<ProgramResult> prologs = RunProgram({burst.string()}, env, absl::Seconds(300));
  ASSERT_TRUE(prologs.ok()) << prologs.status();
  EXPECT_EQ(prologs->exit.exit_code, 0) << prologs->output;
  int spooled = 0;
  for (int i = 0; i < kNodes; ++i) {
    spooled += static_cast<int>(Spooled(dir->path() / absl::StrCat("node-", i)).size());
  }
  EXPECT_EQ(spooled, kNodes);

  absl::StatusOr<std::unique_ptr<PostgresServer>> pg = PostgresServer::Create();
  ASSERT_TRUE(pg.ok()) << pg.status();
  ASSERT_TRUE((*pg)->CreateDatabase("goodput").ok());
  absl::StatusOr<std::unique_ptr<ServiceProcess>> ingest = StartIngestOn(
      **pg, *port,
      "  threads: 1\n  max_queued_connections: 0\ningest:\n  jobs:\n    pool_size: 1\n");
  ASSERT_TRUE(ingest.ok()) << ingest.status();
  const auto up = std::chrono::steady_clock::now();
  auto stub = goodput::v1::JobService::NewStub((*ingest)->Channel());
  int registered = 0;
  auto count = [&] {
    grpc::ClientContext ctx;
    goodput::v1::ListJobsRequest request;
    request.set_cluster("perlmutter");
    request.set_page_size(1000);
    goodput::v1::ListJobsResponse response;
    if (stub->ListJobs(&ctx, request, &response).ok()) registered = response.jobs_size();
    return registered == kNodes;
  };
  EXPECT_TRUE(PollUntil(count, absl::Seconds(180), absl::Milliseconds(500)))
      << registered << " of " << kNodes << " jobs registered";
  std::cout << registered << " of " << kNodes << " jobs registered "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - up).count()
            << " s after ingest was up\n";
  EXPECT_TRUE(PollUntil([&] { return Retriers(dir->path()).empty(); }, absl::Seconds(60)))
      << Retriers(dir->path()).size() << " retriers still running";
  int left = 0;
  for (int i = 0; i < kNodes; ++i) {
    left += static_cast<int>(Spooled(dir->path() / absl::StrCat("node-", i)).size());
  }
  EXPECT_EQ(left, 0);
}

}  // namespace
}  // namespace goodput::testing
