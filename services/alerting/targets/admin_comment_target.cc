#include "services/alerting/targets/admin_comment_target.h"

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "services/alerting/targets/render.h"
#include "services/alerting/targets/slurm_target.h"
#include "services/platform/command.h"

namespace goodput::alerting {

absl::Status AdminCommentTarget::Send(const SendRequest&) {
  return absl::FailedPreconditionError(absl::StrCat(
      "target ", name(), " (slurm_admin_comment) takes job reports' AdminComments, not alerts"));
}

absl::Status AdminCommentTarget::SendAdminComment(const AdminCommentSendRequest& request) {
  const AdminCommentPayload& p = *request.payload;
  if (p.cluster != config_.cluster) {
    return absl::InvalidArgumentError(
        absl::StrCat("job ", OneLine(p.cluster, 100), "/", OneLine(p.job_id, 100),
                     " is not on cluster ", config_.cluster, " that target ", name(), " serves"));
  }
  if (!IsSlurmJobId(p.job_id)) {
    return absl::InvalidArgumentError(
        absl::StrCat("job_id=\"", OneLine(p.job_id, 200), "\" is not a Slurm job id"));
  }
  if (p.comment.empty() || p.comment.find_first_of(" \t\r\n") != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("the AdminComment of job ", p.job_id, " is empty or holds white space"));
  }
  std::vector<std::pair<std::string, std::string>> env;
  if (!config_.slurm_conf.empty()) env.emplace_back("SLURM_CONF", config_.slurm_conf);
  std::vector<std::string> argv;
  if (config_.mode == AdminCommentTargetConfig::Mode::kSacctmgr) {
    argv = {config_.sacctmgr_path,
            "-i",
            "update",
            "job",
            "where",
            absl::StrCat("jobid=", p.job_id),
            "set",
            absl::StrCat("AdminComment=", p.comment)};
  } else {
    argv = {config_.scontrol_path, "--", "update", absl::StrCat("JobId=", p.job_id),
            absl::StrCat("AdminComment=", p.comment)};
  }
  absl::StatusOr<platform::CommandResult> result = platform::RunCommand(argv, env, config_.timeout);
  if (!result.ok()) return absl::UnavailableError(result.status().message());
  if (result->exit_code != 0) {
    const std::string what = absl::StrCat(
        config_.mode == AdminCommentTargetConfig::Mode::kSacctmgr ? "sacctmgr" : "scontrol",
        " update ... of job ", p.job_id, " exited ", result->exit_code, ": ",
        OneLine(std::string(absl::StripAsciiWhitespace(result->output)), 300));
    // slurmctld keeps refusing a finished job: not worth retrying (use sacctmgr for those).
    if (absl::StrContains(result->output, "already finished")) {
      return absl::FailedPreconditionError(what);
    }
    return absl::UnavailableError(what);
  }
  return absl::OkStatus();
}

}  // namespace goodput::alerting
