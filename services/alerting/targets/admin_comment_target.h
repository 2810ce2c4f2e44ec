// Slurm AdminComment target (`kind: slurm_admin_comment`): writes a job-end report's compact
// summary (services/api/job_report.h EncodeAdminComment) into the Slurm job's AdminComment.
// The reporter (job_reporter.h) enqueues one outbox row per report revision (kind
// 'admin_comment'); delivery sends it here with the outbox's retries, backoff, rate limit and
// give-up rule, so Slurm is written from one place.
//
//   mode: sacctmgr (default)  sacctmgr -i update job where jobid=<id> set AdminComment=<summary>
//                             (slurmdbd; finished jobs too, as jobstats does; sacctmgr
//                             lower-cases the value, so the summary is spelled in base32)
//   mode: scontrol            scontrol -- update JobId=<id> AdminComment=<summary>
//                             (slurmctld; refused once the job has finished: a permanent error)
//
// Writing the same summary again leaves the same AdminComment, so a retry changes nothing at
// the peer. The target acts only on jobs of its `cluster` (the worker skips rows of other
// clusters, and Send refuses them), and only on Slurm job ids (`123`, `123_4`, `123+1`;
// anything else is refused naming the id). Commands run without a shell; the id is only ever
// part of the one `jobid=`/`JobId=` argument, and `--` ends scontrol's options.
#pragma once

#include <string>
#include <utility>

#include "services/alerting/targets/target.h"

namespace goodput::alerting {

struct AdminCommentTargetConfig {
  enum class Mode { kSacctmgr, kScontrol };
  std::string name = {};
  std::string cluster = {};  // required: the Slurm cluster this target writes to
  Mode mode = Mode::kSacctmgr;
  std::string scontrol_path = "scontrol";
  std::string sacctmgr_path = "sacctmgr";
  std::string slurm_conf = {};  // SLURM_CONF for scontrol/sacctmgr; empty: Slurm's default
  absl::Duration timeout = absl::Seconds(15);
};

class AdminCommentTarget final : public Target {
 public:
  explicit AdminCommentTarget(AdminCommentTargetConfig config) : config_(std::move(config)) {}

  const std::string& name() const override { return config_.name; }
  const char* kind() const override { return "slurm_admin_comment"; }
  const std::string& cluster() const override { return config_.cluster; }
  // Alert notifications are not this target's: refused (permanent).
  absl::Status Send(const SendRequest& request) override;
  bool delivers_admin_comments() const override { return true; }
  absl::Status SendAdminComment(const AdminCommentSendRequest& request) override;

  // sacctmgr lower-cases the value it sets, which only the base32 spelling survives.
  bool base32() const { return config_.mode == AdminCommentTargetConfig::Mode::kSacctmgr; }

 private:
  AdminCommentTargetConfig config_;
};

}  // namespace goodput::alerting
