#include "tests/support/slurm_cluster.h"

#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tests/support/find_program.h"
#include "tests/support/free_port.h"
#include "tests/support/service_process.h"

namespace goodput::testing {
namespace {

namespace fs = std::filesystem;

constexpr char kNodeName[] = "gpnode";

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

absl::StatusOr<std::unique_ptr<SlurmCluster>> SlurmCluster::Create(SlurmClusterOptions options) {
  if (geteuid() != 0) {
    return absl::FailedPreconditionError("a test Slurm cluster needs root (slurmd starts jobs)");
  }
  absl::StatusOr<TempDir> dir = TempDir::Create("goodput-slurm");
  if (!dir.ok()) return dir.status();
  std::unique_ptr<SlurmCluster> cluster(new SlurmCluster(*std::move(dir)));
  if (absl::Status s = cluster->Start(options); !s.ok()) return s;
  return cluster;
}

std::vector<std::pair<std::string, std::string>> SlurmCluster::Env() const {
  return {{"SLURM_CONF", conf_path_.string()}};
}

absl::Status SlurmCluster::Start(const SlurmClusterOptions& options) {
  const fs::path root = dir_.path();
  for (const char* sub : {"state", "spool", "log", "jobs"}) fs::create_directories(root / sub);
  fs::permissions(root, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                            fs::perms::others_read | fs::perms::others_exec);

  // munge: a fresh key and a private socket.
  const fs::path key = root / "munge.key";
  {
    std::random_device rd;
    std::ofstream out(key, std::ios::binary);
    for (int i = 0; i < 1024; ++i) out.put(static_cast<char>(rd() & 0xff));
  }
  fs::permissions(key, fs::perms::owner_read);
  const fs::path munge_socket = root / "munge.socket";
  absl::StatusOr<std::unique_ptr<ChildProcess>> munged = ChildProcess::Start(
      {.argv = {FindProgram("munged"), "--foreground", "--force",
                absl::StrCat("--socket=", munge_socket.string()),
                absl::StrCat("--key-file=", key.string()),
                absl::StrCat("--pid-file=", (root / "munged.pid").string()),
                absl::StrCat("--seed-file=", (root / "munged.seed").string()),
                absl::StrCat("--log-file=", (root / "log" / "munged.log").string())},
       .log_path = root / "log" / "munged.out"});
  if (!munged.ok()) return munged.status();
  munged_ = *std::move(munged);
  if (!PollUntil([&] { return fs::exists(munge_socket); }, options.start_timeout)) {
    return absl::DeadlineExceededError(
        absl::StrCat("munged did not create its socket: ", munged_->LogTail()));
  }

  absl::StatusOr<int> dbd_port = FreePort();
  if (!dbd_port.ok()) return dbd_port.status();
  if (options.accounting) {
    if (absl::Status s = StartAccounting(*dbd_port, munge_socket, options.start_timeout); !s.ok()) {
      return s;
    }
  }

  absl::StatusOr<int> ctld_port = FreePort();
  if (!ctld_port.ok()) return ctld_port.status();
  absl::StatusOr<int> slurmd_port = FreePort();
  if (!slurmd_port.ok()) return slurmd_port.status();
  const unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
  conf_path_ = root / "slurm.conf";
  {
    std::ofstream conf(conf_path_);
    conf << "ClusterName=" << kClusterName << "\n"
         << "SlurmctldHost=localhost(127.0.0.1)\n"
         << "SlurmctldPort=" << *ctld_port << "\n"
         << "SlurmdPort=" << *slurmd_port << "\n"
         << "SlurmUser=root\nSlurmdUser=root\n"
         << "AuthType=auth/munge\nCredType=cred/munge\n"
         << "AuthInfo=socket=" << munge_socket.string() << "\n"
         << "StateSaveLocation=" << (root / "state").string() << "\n"
         << "SlurmdSpoolDir=" << (root / "spool").string() << "\n"
         << "SlurmctldPidFile=" << (root / "slurmctld.pid").string() << "\n"
         << "SlurmdPidFile=" << (root / "slurmd.pid").string() << "\n"
         << "SlurmctldLogFile=" << (root / "log" / "slurmctld.log").string() << "\n"
         << "SlurmdLogFile=" << (root / "log" / "slurmd.log").string() << "\n"
         << "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n"
         << "JobAcctGatherType=jobacct_gather/none\n";
    if (options.accounting) {
      // AccountingStoragePass names the munge socket for slurmdbd connections.
      conf << "AccountingStorageType=accounting_storage/slurmdbd\n"
           << "AccountingStorageHost=127.0.0.1\nAccountingStoragePort=" << *dbd_port << "\n"
           << "AccountingStoragePass=" << munge_socket.string() << "\n";
    } else {
      conf << "AccountingStorageType=accounting_storage/none\n";
    }
    conf << "JobCompType=jobcomp/none\nJobContainerType=job_container/none\n"
         << "SwitchType=switch/none\nMpiDefault=none\nMailProg=/bin/true\n"
         << "SchedulerType=sched/builtin\nSelectType=select/cons_tres\n"
         << "SelectTypeParameters=CR_Core\nReturnToService=2\n"
         << "NodeName=" << kNodeName << " NodeAddr=127.0.0.1 NodeHostname=localhost CPUs=" << cpus
         << " State=UNKNOWN\n"
         << "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n";
    for (const std::string& line : options.extra_conf) conf << line << "\n";
  }
  if (options.accounting) {
    if (absl::Status s = AddAccountingRecords(); !s.ok()) return s;
  }
  const std::vector<std::pair<std::string, std::string>> env = Env();
  absl::StatusOr<std::unique_ptr<ChildProcess>> ctld =
      ChildProcess::Start({.argv = {FindProgram("slurmctld"), "-D", "-f", conf_path_.string()},
                           .env = env,
                           .log_path = root / "log" / "slurmctld.out",
                           .working_dir = root});
  if (!ctld.ok()) return ctld.status();
  slurmctld_ = *std::move(ctld);
  absl::StatusOr<std::unique_ptr<ChildProcess>> slurmd = ChildProcess::Start(
      {.argv = {FindProgram("slurmd"), "-D", "-N", kNodeName, "-f", conf_path_.string()},
       .env = env,
       .log_path = root / "log" / "slurmd.out",
       .working_dir = root});
  if (!slurmd.ok()) return slurmd.status();
  slurmd_ = *std::move(slurmd);

  std::string last;
  const bool up = PollUntil(
      [&] {
        if (!slurmctld_->IsRunning() || !slurmd_->IsRunning()) return true;
        absl::StatusOr<ProgramResult> r =
            RunProgram({"sinfo", "-h", "-n", kNodeName, "-o", "%t"}, env, absl::Seconds(10));
        last = r.ok() ? r->output : std::string(r.status().message());
        return r.ok() && r->exit.Success() && absl::StripAsciiWhitespace(r->output) == "idle";
      },
      options.start_timeout, absl::Milliseconds(200));
  if (!slurmctld_->IsRunning() || !slurmd_->IsRunning() || !up) {
    return absl::UnavailableError(
        absl::StrCat("the test Slurm cluster did not come up (node state: ", last,
                     ")\nslurmctld: ", ReadFileTail(root / "log" / "slurmctld.log", 2000),
                     "\nslurmd: ", ReadFileTail(root / "log" / "slurmd.log", 2000)));
  }
  return absl::OkStatus();
}

SlurmCluster::~SlurmCluster() {
  if (slurmctld_ != nullptr && slurmctld_->IsRunning()) {
    (void)RunProgram({"scancel", "--user=root"}, Env(), absl::Seconds(10));
    PollUntil(
        [&] {
          absl::StatusOr<ProgramResult> r = RunProgram({"squeue", "-h"}, Env(), absl::Seconds(10));
          return !r.ok() || !r->exit.Success() || absl::StripAsciiWhitespace(r->output).empty();
        },
        absl::Seconds(15), absl::Milliseconds(200));
  }
  if (slurmrestd_) slurmrestd_->Terminate(absl::Seconds(5));
  if (slurmd_) slurmd_->Terminate(absl::Seconds(10));
  if (slurmctld_) slurmctld_->Terminate(absl::Seconds(10));
  KillLeftoverSteps();
  if (slurmdbd_) slurmdbd_->Terminate(absl::Seconds(10));
  mariadb_.reset();
  if (munged_) munged_->Terminate(absl::Seconds(5));
}

// slurmstepd detaches from slurmd, so a job that outlived the cancel is found through its
// script, which lives in this cluster's spool folder.
void SlurmCluster::KillLeftoverSteps() {
  const std::string marker = dir_.path().string();
  std::set<pid_t> victims;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator("/proc", ec)) {
    pid_t pid = 0;
    if (!absl::SimpleAtoi(e.path().filename().string(), &pid) || pid == getpid()) continue;
    std::string cmdline = ReadFile(e.path() / "cmdline");
    if (!absl::StrContains(cmdline, marker)) continue;
    victims.insert(pid);
    // The parent of a job script is its slurmstepd.
    const std::string stat = ReadFile(e.path() / "stat");
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::vector<std::string> fields = absl::StrSplit(stat.substr(close + 2), ' ');
    pid_t ppid = 0;
    if (fields.size() > 1 && absl::SimpleAtoi(fields[1], &ppid) && ppid > 1) {
      if (absl::StrContains(ReadFile(fs::path("/proc") / std::to_string(ppid) / "comm"),
                            "slurmstepd")) {
        victims.insert(ppid);
      }
    }
  }
  for (pid_t pid : victims) kill(pid, SIGKILL);
}

absl::StatusOr<std::string> SlurmCluster::Run(std::vector<std::string> argv) {
  const std::string what = argv.empty() ? "" : argv[0];
  absl::StatusOr<ProgramResult> r = RunProgram(std::move(argv), Env(), absl::Seconds(30));
  if (!r.ok()) return r.status();
  if (!r->exit.Success()) {
    return absl::InternalError(absl::StrCat(what, " ", r->exit.ToString(), ": ", r->output));
  }
  return r->output;
}

std::filesystem::path SlurmCluster::JobStderrPath(const std::string& job_id) const {
  return dir_.path() / "jobs" / absl::StrCat(job_id, ".err");
}

absl::StatusOr<std::string> SlurmCluster::SubmitSleepJob(const SleepJobOptions& options) {
  std::vector<std::string> args;
  if (!options.comment.empty()) args.push_back(absl::StrCat("--comment=", options.comment));
  if (!options.name.empty()) args.push_back(absl::StrCat("--job-name=", options.name));
  return SubmitJob(absl::StrCat("sleep ", options.seconds), args);
}

absl::StatusOr<std::string> SlurmCluster::SubmitJob(const std::string& command,
                                                    const std::vector<std::string>& sbatch_args) {
  std::vector<std::string> argv = {"sbatch", "--parsable",
                                   "-D",     (dir_.path() / "jobs").string(),
                                   "-o",     (dir_.path() / "jobs" / "%j.out").string(),
                                   "-e",     (dir_.path() / "jobs" / "%j.err").string()};
  argv.insert(argv.end(), sbatch_args.begin(), sbatch_args.end());
  argv.push_back(absl::StrCat("--wrap=", command));
  absl::StatusOr<std::string> out = Run(std::move(argv));
  if (!out.ok()) return out.status();
  std::string id(absl::StripAsciiWhitespace(*out));
  if (size_t semi = id.find(';'); semi != std::string::npos) id.resize(semi);  // "id;cluster"
  return id;
}

absl::StatusOr<std::string> SlurmCluster::ShowJob(const std::string& job_id) {
  return Run({"scontrol", "show", "job", job_id});
}

absl::Status SlurmCluster::WaitForJobState(const std::string& job_id, const std::string& state,
                                           absl::Duration timeout) {
  std::string last;
  if (PollUntil(
          [&] {
            // squeue prints the state alone, which the job's name (free text in `scontrol
            // show job`) cannot imitate.
            absl::StatusOr<std::string> squeue =
                Run({"squeue", "--noheader", "--states=all", absl::StrCat("--jobs=", job_id),
                     "--format=%T"});
            last = squeue.ok() ? *squeue : std::string(squeue.status().message());
            return squeue.ok() && absl::StripAsciiWhitespace(*squeue) == state;
          },
          timeout, absl::Milliseconds(100))) {
    return absl::OkStatus();
  }
  return absl::DeadlineExceededError(
      absl::StrCat("job ", job_id, " did not reach state ", state, ": squeue says ", last));
}

absl::Status SlurmCluster::StartAccounting(int dbd_port, const fs::path& munge_socket,
                                           absl::Duration timeout) {
  absl::StatusOr<std::unique_ptr<MariaDbServer>> db =
      MariaDbServer::Create({.start_timeout = timeout});
  if (!db.ok()) return db.status();
  mariadb_ = *std::move(db);
  constexpr char kDbUser[] = "slurm";
  const std::string password = absl::StrCat("pw", std::random_device()());
  if (absl::Status s = mariadb_->CreateUser(kDbUser, password); !s.ok()) return s;
  dbd_port_ = dbd_port;
  // slurmdbd reads slurmdbd.conf from the folder of SLURM_CONF; it must belong to SlurmUser
  // (root here) and be readable by it alone, as it holds the database password.
  const fs::path root = dir_.path();
  const fs::path dbd_conf = root / "slurmdbd.conf";
  {
    std::ofstream conf(dbd_conf);
    conf << "AuthType=auth/munge\n"
         << "AuthInfo=socket=" << munge_socket.string() << "\n"
         << "DbdHost=localhost\nDbdAddr=127.0.0.1\nDbdPort=" << dbd_port << "\n"
         << "SlurmUser=root\n"
         << "LogFile=" << (root / "log" / "slurmdbd.log").string() << "\n"
         << "PidFile=" << (root / "slurmdbd.pid").string() << "\n"
         << "StorageType=accounting_storage/mysql\n"
         << "StorageHost=" << mariadb_->host() << "\nStoragePort=" << mariadb_->port() << "\n"
         << "StorageUser=" << kDbUser << "\nStoragePass=" << password << "\n"
         << "StorageLoc=slurm_acct_db\n";
  }
  fs::permissions(dbd_conf, fs::perms::owner_read | fs::perms::owner_write);
  conf_path_ = root / "slurm.conf";
  return StartSlurmdbd();
}

absl::Status SlurmCluster::StartSlurmdbd() {
  if (mariadb_ == nullptr) {
    return absl::FailedPreconditionError("the test Slurm cluster runs without accounting");
  }
  if (slurmdbd_ != nullptr && slurmdbd_->IsRunning()) return absl::OkStatus();
  const fs::path log = dir_.path() / "log" / "slurmdbd.log";
  absl::StatusOr<std::unique_ptr<ChildProcess>> dbd =
      ChildProcess::Start({.argv = {FindProgram("slurmdbd"), "-D"},
                           .env = Env(),
                           .log_path = dir_.path() / "log" / "slurmdbd.out",
                           .working_dir = dir_.path()});
  if (!dbd.ok()) return dbd.status();
  slurmdbd_ = *std::move(dbd);
  // Its first start creates the tables before it listens.
  if (!PollUntil([&] { return !slurmdbd_->IsRunning() || PortAcceptsConnections(dbd_port_); },
                 absl::Seconds(60), absl::Milliseconds(100)) ||
      !slurmdbd_->IsRunning()) {
    return absl::UnavailableError(absl::StrCat("slurmdbd did not listen on port ", dbd_port_, ": ",
                                               slurmdbd_->LogTail(), ReadFileTail(log, 2000)));
  }
  return absl::OkStatus();
}

absl::Status SlurmCluster::StopSlurmdbd() {
  if (mariadb_ == nullptr) {
    return absl::FailedPreconditionError("the test Slurm cluster runs without accounting");
  }
  if (slurmdbd_ == nullptr) return absl::OkStatus();
  const ExitStatus exit = slurmdbd_->Terminate(absl::Seconds(30));
  slurmdbd_.reset();
  if (exit.signal == SIGKILL) {
    return absl::InternalError("slurmdbd ignored SIGTERM for 30 s and was killed");
  }
  return absl::OkStatus();
}

absl::Status SlurmCluster::AddAccountingRecords() {
  const std::vector<std::vector<std::string>> adds = {
      {"sacctmgr", "-i", "add", "cluster", kClusterName},
      {"sacctmgr", "-i", "add", "account", kAccount, absl::StrCat("cluster=", kClusterName)},
      {"sacctmgr", "-i", "add", "user", "root", absl::StrCat("account=", kAccount),
       absl::StrCat("cluster=", kClusterName)}};
  for (const std::vector<std::string>& add : adds) {
    absl::StatusOr<std::string> out = Run(add);
    if (!out.ok()) return out.status();
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> SlurmCluster::SacctField(const std::string& job_id,
                                                     const std::string& field) {
  absl::StatusOr<std::string> out = Run({"sacct", "-n", "-P", "-X", "-j", job_id, "-o", field});
  if (!out.ok()) return out.status();
  return std::string(absl::StripTrailingAsciiWhitespace(*out));
}

absl::StatusOr<std::filesystem::path> SlurmCluster::StartRestd() {
  const fs::path socket = dir_.path() / "slurmrestd.socket";
  std::vector<std::pair<std::string, std::string>> env = Env();
  // slurmrestd refuses root unless told that this is intended (a test cluster run as root).
  env.emplace_back("SLURMRESTD_SECURITY", "disable_user_check");
  absl::StatusOr<std::unique_ptr<ChildProcess>> restd = ChildProcess::Start(
      {.argv = {FindProgram("slurmrestd"), "-f", conf_path_.string(), "-a", "rest_auth/local", "-s",
                "openapi/v0.0.38", absl::StrCat("unix:", socket.string())},
       .env = env,
       .log_path = dir_.path() / "log" / "slurmrestd.out"});
  if (!restd.ok()) return restd.status();
  slurmrestd_ = *std::move(restd);
  if (!PollUntil([&] { return fs::exists(socket) || !slurmrestd_->IsRunning(); },
                 absl::Seconds(30)) ||
      !slurmrestd_->IsRunning()) {
    return absl::UnavailableError(
        absl::StrCat("slurmrestd did not start: ", slurmrestd_->LogTail()));
  }
  return socket;
}

}  // namespace goodput::testing
