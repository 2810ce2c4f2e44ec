// Slurm target: tells the job itself.
//
// With `mode: scontrol` (default) it runs, for the job of the notification:
//   scontrol notify <job> "<message>"          -> a line on the job's stderr (running jobs)
//   scontrol update JobId=<job> Comment=...    -> the job's comment (squeue %k, sacct)
// and optionally (off by default, firing alerts at or above action_min_severity)
//   scontrol requeue <job>  or  scontrol requeuehold <job>.
// With `mode: rest` it sets the comment through slurmrestd instead
// (POST /slurm/v0.0.38/job/<job> {"comment": ...}; notify and actions have no REST form).
//
// The comment keeps whatever the user put there and appends
// "[goodput <idempotency key>] <message>", replacing an earlier goodput part. That marker is
// how a retry recognises a notification the job already has: Send reads the comment first
// and does nothing when the key is there. `scontrol notify` itself cannot be deduplicated by
// Slurm, so the marker is written right after the notify returns: a duplicate line on the
// job's stderr needs the sender to stop in the few milliseconds between those two commands.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "services/alerting/targets/target.h"

namespace goodput::alerting {

struct SlurmTargetConfig {
  enum class Mode { kScontrol, kRest };
  std::string name = {};
  Mode mode = Mode::kScontrol;
  std::string cluster = {};  // when set, jobs of other clusters are refused (permanent)
  absl::Duration timeout = absl::Seconds(10);
  bool notify = true;
  bool comment = true;
  bool requeue = false;
  bool hold = false;  // with requeue: requeuehold
  std::string action_min_severity = "critical";
  // scontrol mode
  std::string scontrol_path = "scontrol";
  std::string slurm_conf = {};  // SLURM_CONF for scontrol; empty = Slurm's default
  // rest mode
  std::string rest_url = {};  // e.g. http://slurmrestd:6820 (or http://localhost with a socket)
  std::string rest_unix_socket = {};  // connect through this socket when set
  std::vector<std::pair<std::string, std::string>> headers = {};  // X-SLURM-USER-NAME/TOKEN
};

// "[goodput <key>]".
std::string SlurmCommentMarker(const std::string& idempotency_key);
// The job's new comment: `current` without any earlier goodput part, then the marker and
// the message.
std::string SlurmComment(const std::string& current, const std::string& idempotency_key,
                         const std::string& message);
// True for Slurm job ids: 123, 123_4 (array task), 123+1 (het component).
bool IsSlurmJobId(const std::string& job_id);

class SlurmTarget final : public Target {
 public:
  explicit SlurmTarget(SlurmTargetConfig config) : config_(std::move(config)) {}

  // Target:
  const std::string& name() const override { return config_.name; }
  const char* kind() const override { return "slurm"; }
  absl::Status Send(const SendRequest& request) override;

 private:
  struct JobView {
    std::string state;  // RUNNING, PENDING, COMPLETED, ...
    std::string comment;
  };
  absl::StatusOr<std::string> Scontrol(const std::vector<std::string>& args);
  absl::StatusOr<JobView> ShowJob(const std::string& job_id);
  absl::Status SendWithScontrol(const SendRequest& request);
  absl::StatusOr<JobView> RestGetJob(const std::string& job_id);
  absl::Status SendWithRest(const SendRequest& request);

  SlurmTargetConfig config_;
};

}  // namespace goodput::alerting
