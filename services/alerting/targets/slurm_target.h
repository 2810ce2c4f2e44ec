// Slurm target: tells the job itself.
//
// With `mode: scontrol` (default) it reads the job's state and comment with squeue and runs,
// for the job of the notification:
//   scontrol -- notify <job> "<message>"          -> a line on the job's stderr (running jobs)
//   scontrol -- update JobId=<job> Comment=...    -> the job's comment (squeue %k, sacct)
// and optionally (off by default, firing alerts at or above action_min_severity)
//   scontrol -- requeue <job>  or  scontrol -- requeuehold <job>.
// With `mode: rest` it sets the comment through slurmrestd instead
// (POST /slurm/v0.0.38/job/<job> {"comment": ...}; notify and actions have no REST form).
//
// Nothing from the notification reaches a shell or an option position: commands are run
// directly (no shell), the job id must be a Slurm job id (digits first, so never `-...`), and
// `--` ends scontrol's options before the command, so a message is only ever a message.
//
// Reading the job. `scontrol show job` prints `Key=Value` text in which the job's name,
// comment, command, working directory and output paths are free text of the job's owner:
// a name may hold ` JobState=COMPLETED`, `Comment=...` or a newline, and no parser can tell
// every such value from Slurm's own fields. The target asks squeue for exactly the fields it
// needs (`%A %i %T %k`) between delimiters made of a random token drawn for each call, which
// the owner cannot know when writing their job's name or comment.
//
// The marker. The comment keeps whatever the user put there and appends
// "[goodput <idempotency key> <mac>] <message>", replacing an earlier goodput part. That
// marker is how a retry recognises a notification the job already has: Send reads the comment
// first and does nothing when it holds the marker of its key. The job's owner can write their
// own comment, so the marker carries a MAC: the first 128 bits of HMAC-SHA256 under the
// target's `marker_secret`, over the cluster, the job id and the key. The owner cannot make
// a marker for a key goodput has not delivered to that job (one copied from another job does
// not verify), so a forged marker never suppresses a notification; what looks like a marker
// but does not verify stays part of the user's comment. (AdminComment, which only Slurm
// administrators can write, would need goodput to run as one, and slurmrestd v0.0.38 cannot
// set it.) `scontrol notify` itself cannot be deduplicated by Slurm, so the marker is written
// right after the notify returns: a duplicate line on the job's stderr needs the sender to
// stop in the few milliseconds between those two commands.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "services/alerting/targets/target.h"

namespace goodput::alerting {

struct SlurmTargetConfig {
  enum class Mode { kScontrol, kRest };
  std::string name = {};
  Mode mode = Mode::kScontrol;
  // The cluster whose jobs it tells (required in configuration): rows of other clusters are
  // skipped by the worker and refused by Send (permanent).
  std::string cluster = {};
  absl::Duration timeout = absl::Seconds(10);
  bool notify = true;
  bool comment = true;
  bool requeue = false;
  bool hold = false;  // with requeue: requeuehold
  std::string action_min_severity = "critical";
  // Key of the comment marker's MAC; required whenever the comment is written. Changing it
  // makes the markers already written unrecognisable (their rows would notify again on a
  // retry).
  std::string marker_secret = {};
  // scontrol mode
  std::string scontrol_path = "scontrol";
  std::string squeue_path = "squeue";
  std::string slurm_conf = {};  // SLURM_CONF for scontrol and squeue; empty = Slurm's default
  // rest mode
  std::string rest_url = {};  // e.g. http://slurmrestd:6820 (or http://localhost with a socket)
  std::string rest_unix_socket = {};  // connect through this socket when set
  std::vector<std::pair<std::string, std::string>> headers = {};  // X-SLURM-USER-NAME/TOKEN
};

// The markers goodput writes into the comment of one job (see the file comment).
class SlurmCommentMarker {
 public:
  SlurmCommentMarker(absl::string_view secret, absl::string_view cluster, absl::string_view job_id);

  // "[goodput <idempotency key> <32 hex digits of MAC>]".
  std::string For(const std::string& idempotency_key) const;
  // True when `comment` holds For(idempotency_key).
  bool IsIn(const std::string& comment, const std::string& idempotency_key) const;
  // The job's new comment: `current` up to goodput's earlier part (the first marker that
  // verifies for this job), then For(idempotency_key) and `message` on one line.
  std::string Comment(const std::string& current, const std::string& idempotency_key,
                      const std::string& message) const;

 private:
  std::string Mac(absl::string_view idempotency_key) const;

  std::string secret_;
  std::string job_;  // cluster and job id, as they enter the MAC
};

// True for Slurm job ids: 123, 123_4 (array task), 123+1 (het component).
bool IsSlurmJobId(const std::string& job_id);

// A Slurm client's --format whose records and fields are delimited by `token` (which a job's
// owner cannot guess, so no name or comment can imitate a field): "<tok<%A|tok|%T>tok>".
std::string DelimitedFormat(const std::string& token, const std::vector<std::string>& fields);
// The records of such output with exactly `fields` fields, in order; text outside the
// delimiters (a warning) is ignored.
std::vector<std::vector<std::string>> DelimitedRecords(const std::string& output,
                                                       const std::string& token, size_t fields);

// What the target needs to know about a job.
struct SlurmJobView {
  std::string state = {};  // RUNNING, PENDING, COMPLETED, ...
  std::string comment = {};
};

// squeue's --format for ParseSqueueJob: job id, array/het id, state and comment, each record
// and field delimited by `token` (which a job's owner cannot guess).
std::string SqueueJobFormat(const std::string& token);
// The record of `job_id` in the output of `squeue --format=SqueueJobFormat(token)`: the one
// whose job id or array/het id is `job_id`, else the first (squeue lists every task of an
// array for its id). Text outside the delimiters (a warning) is ignored. NOT_FOUND when there
// is no record.
absl::StatusOr<SlurmJobView> ParseSqueueJob(const std::string& output, const std::string& token,
                                            const std::string& job_id);

class SlurmTarget final : public Target {
 public:
  explicit SlurmTarget(SlurmTargetConfig config) : config_(std::move(config)) {}

  // Target:
  const std::string& name() const override { return config_.name; }
  const char* kind() const override { return "slurm"; }
  const std::string& cluster() const override { return config_.cluster; }
  absl::Status Send(const SendRequest& request) override;

 private:
  absl::StatusOr<std::string> RunClient(const std::string& path, const std::string& what,
                                        const std::vector<std::string>& args);
  absl::StatusOr<std::string> Scontrol(const std::vector<std::string>& args);
  absl::StatusOr<SlurmJobView> SqueueJob(const std::string& job_id);
  absl::Status SendWithScontrol(const SendRequest& request, const SlurmCommentMarker& marker);
  absl::StatusOr<SlurmJobView> RestGetJob(const std::string& job_id);
  absl::Status SendWithRest(const SendRequest& request, const SlurmCommentMarker& marker);

  SlurmTargetConfig config_;
};

}  // namespace goodput::alerting
