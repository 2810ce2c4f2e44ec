#pragma once

// A private one-node Slurm cluster for one test: munged, slurmctld and slurmd from the
// distribution's packages, run as root on loopback with a generated slurm.conf (free ports,
// state, spool and logs in a temporary folder, its own munge key and socket). No cgroups:
// proctrack/linuxproc and task/none, so it runs in containers. Jobs are real: sbatch starts
// them on the node through slurmstepd.
//
//   ASSERT_OK_AND_ASSIGN(auto slurm, SlurmCluster::Create());
//   ASSERT_OK_AND_ASSIGN(std::string job, slurm->SubmitSleepJob({.comment = "ablation"}));
//   ASSERT_OK(slurm->WaitForJobState(job, "RUNNING", absl::Seconds(30)));
//   // scontrol / squeue with slurm->Env(): SLURM_CONF points at the cluster's slurm.conf
//
// With `.accounting = true` the cluster also has slurmdbd (accounting_storage/mysql on a
// private MariaDB, see mariadb_server.h) on a free DbdPort, slurmctld records its jobs there,
// and the cluster, an account and root as its user are created with `sacctmgr -i add`, so
// `sacct` and `sacctmgr` work with Env() as on a production cluster:
//
//   ASSERT_OK_AND_ASSIGN(auto slurm, SlurmCluster::Create({.accounting = true}));
//   ASSERT_OK_AND_ASSIGN(std::string comment, slurm->SacctField(job, "AdminComment"));
//   ASSERT_OK(slurm->StopSlurmdbd());   // slurmctld queues its records until StartSlurmdbd
//
// The destructor cancels every job, stops the daemons and removes the folder.
// FAILED_PRECONDITION when not run as root (slurmd must be root to start jobs).

#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tests/support/child_process.h"
#include "tests/support/mariadb_server.h"
#include "tests/support/temp_dir.h"

namespace goodput::testing {

struct SlurmClusterOptions {
  absl::Duration start_timeout = absl::Seconds(60);
  // More slurm.conf lines, e.g. "Epilog=/path/epilog.sh" or another partition.
  std::vector<std::string> extra_conf = {};
  // slurmdbd with a MariaDB behind it, and slurmctld recording jobs there.
  bool accounting = false;
};

struct SleepJobOptions {
  int seconds = 600;         // the job is cancelled with the cluster anyway
  std::string comment = {};  // sbatch --comment
  std::string name = {};     // sbatch --job-name; empty: sbatch's default ("wrap")
};

class SlurmCluster {
 public:
  static absl::StatusOr<std::unique_ptr<SlurmCluster>> Create(SlurmClusterOptions options = {});

  SlurmCluster(const SlurmCluster&) = delete;
  SlurmCluster& operator=(const SlurmCluster&) = delete;
  ~SlurmCluster();

  // SLURM_CONF for the cluster's clients.
  std::vector<std::pair<std::string, std::string>> Env() const;
  const std::filesystem::path& slurm_conf() const { return conf_path_; }
  const std::filesystem::path& dir() const { return dir_.path(); }

  // Runs a Slurm client (scontrol, squeue, sbatch, ...) against the cluster; its output, or
  // an error with the output when it exits non-zero.
  absl::StatusOr<std::string> Run(std::vector<std::string> argv);

  // Submits `sleep <seconds>` with sbatch; returns the job id. Its stdout and stderr go to
  // JobStdoutPath / JobStderrPath.
  absl::StatusOr<std::string> SubmitSleepJob(const SleepJobOptions& options = {});
  // Submits shell command `command` with sbatch and more sbatch options `sbatch_args`
  // (e.g. "--partition=urgent"); returns the job id.
  absl::StatusOr<std::string> SubmitJob(const std::string& command,
                                        const std::vector<std::string>& sbatch_args = {});
  std::filesystem::path JobStderrPath(const std::string& job_id) const;
  // Polls squeue until the job's state is `state` (RUNNING, PENDING, ...).
  absl::Status WaitForJobState(const std::string& job_id, const std::string& state,
                               absl::Duration timeout);
  // `scontrol show job <id>`.
  absl::StatusOr<std::string> ShowJob(const std::string& job_id);

  // The job's (not its steps') `field` as `sacct -n -P -X -o FIELD` prints it, without the
  // line end; needs accounting.
  absl::StatusOr<std::string> SacctField(const std::string& job_id, const std::string& field);
  // Stops slurmdbd (SIGTERM, then waits for it to exit) and starts it again on the same port
  // and database; FAILED_PRECONDITION without accounting.
  absl::Status StopSlurmdbd();
  absl::Status StartSlurmdbd();
  static constexpr char kClusterName[] = "goodputtest";
  static constexpr char kAccount[] = "goodput";

  // Starts slurmrestd (openapi/v0.0.38, rest_auth/local) on a unix socket in the folder and
  // returns the socket's path.
  absl::StatusOr<std::filesystem::path> StartRestd();

 private:
  explicit SlurmCluster(TempDir dir) : dir_(std::move(dir)) {}
  absl::Status Start(const SlurmClusterOptions& options);
  // MariaDB, slurmdbd.conf and slurmdbd; before slurmctld, which needs the database at its
  // first start.
  absl::Status StartAccounting(int dbd_port, const std::filesystem::path& munge_socket,
                               absl::Duration timeout);
  // The cluster, its account and root as a user, once slurm.conf names slurmdbd.
  absl::Status AddAccountingRecords();
  void KillLeftoverSteps();

  TempDir dir_;
  std::filesystem::path conf_path_;
  std::unique_ptr<ChildProcess> munged_;
  std::unique_ptr<ChildProcess> slurmctld_;
  std::unique_ptr<ChildProcess> slurmd_;
  std::unique_ptr<ChildProcess> slurmrestd_;
  std::unique_ptr<MariaDbServer> mariadb_;
  std::unique_ptr<ChildProcess> slurmdbd_;
  int dbd_port_ = 0;
};

}  // namespace goodput::testing
