#include "services/alerting/targets/slurm_target.h"

#include <cctype>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "services/alerting/targets/command.h"
#include "services/alerting/targets/http_client.h"
#include "services/alerting/targets/osmo_target.h"
#include "services/alerting/targets/render.h"

namespace goodput::alerting {
namespace {

// Long enough for a summary and the first sentences; Slurm stores and prints all of it.
constexpr size_t kNotifyMaxChars = 600;
constexpr size_t kCommentMaxChars = 400;
constexpr char kMarkerPrefix[] = "[goodput ";

// Maps scontrol's complaint to a status the retry rules understand.
absl::Status ScontrolError(const std::string& what, int exit_code, const std::string& output) {
  const std::string message = absl::StrCat(what, " exited ", exit_code, ": ", OneLine(output, 300));
  if (absl::StrContains(output, "Invalid job id")) return absl::NotFoundError(message);
  if (absl::StrContains(output, "already completing or completed") ||
      absl::StrContains(output, "Job is no longer") ||
      absl::StrContains(output, "Requested operation is presently disabled") ||
      absl::StrContains(output, "Only batch jobs are accepted")) {
    return absl::FailedPreconditionError(message);
  }
  if (absl::StrContains(output, "Access/permission denied") ||
      absl::StrContains(output, "Invalid user")) {
    return absl::PermissionDeniedError(message);
  }
  return absl::UnavailableError(message);  // controller down, timeouts, anything unknown
}

// The value of `Key=` up to the end of the token (or of the line for Comment, which may hold
// spaces and is printed on a line of its own).
std::string Field(const std::string& show, const std::string& key, bool to_end_of_line) {
  size_t pos = 0;
  const std::string needle = key + "=";
  while ((pos = show.find(needle, pos)) != std::string::npos) {
    if (pos == 0 || std::isspace(static_cast<unsigned char>(show[pos - 1]))) break;
    pos += needle.size();
  }
  if (pos == std::string::npos) return "";
  const size_t start = pos + needle.size();
  const size_t end = to_end_of_line ? show.find('\n', start) : show.find_first_of(" \n", start);
  std::string value =
      show.substr(start, end == std::string::npos ? std::string::npos : end - start);
  while (!value.empty() && value.back() == ' ') value.pop_back();
  return value;
}

}  // namespace

std::string SlurmCommentMarker(const std::string& idempotency_key) {
  return absl::StrCat(kMarkerPrefix, idempotency_key, "]");
}

std::string SlurmComment(const std::string& current, const std::string& idempotency_key,
                         const std::string& message) {
  std::string user_part = current;
  if (size_t pos = user_part.find(kMarkerPrefix); pos != std::string::npos) user_part.resize(pos);
  while (!user_part.empty() && user_part.back() == ' ') user_part.pop_back();
  return absl::StrCat(user_part, user_part.empty() ? "" : " ", SlurmCommentMarker(idempotency_key),
                      " ", OneLine(message, kCommentMaxChars));
}

bool IsSlurmJobId(const std::string& job_id) {
  size_t i = 0;
  auto digits = [&] {
    const size_t start = i;
    while (i < job_id.size() && std::isdigit(static_cast<unsigned char>(job_id[i]))) ++i;
    return i > start;
  };
  if (!digits()) return false;
  if (i < job_id.size() && job_id[i] == '_') {
    ++i;
    if (!digits()) return false;
  }
  if (i < job_id.size() && job_id[i] == '+') {
    ++i;
    if (!digits()) return false;
  }
  return i == job_id.size();
}

absl::StatusOr<std::string> SlurmTarget::Scontrol(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {config_.scontrol_path};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<std::pair<std::string, std::string>> env;
  if (!config_.slurm_conf.empty()) env.emplace_back("SLURM_CONF", config_.slurm_conf);
  absl::StatusOr<CommandResult> result = RunCommand(argv, env, config_.timeout);
  if (!result.ok()) return result.status();
  if (result->exit_code != 0) {
    return ScontrolError(absl::StrCat("scontrol ", args.empty() ? "" : args[0]), result->exit_code,
                         result->output);
  }
  return result->output;
}

absl::StatusOr<SlurmTarget::JobView> SlurmTarget::ShowJob(const std::string& job_id) {
  absl::StatusOr<std::string> show = Scontrol({"show", "job", job_id});
  if (!show.ok()) return show.status();
  return JobView{.state = Field(*show, "JobState", false),
                 .comment = Field(*show, "Comment", true)};
}

absl::Status SlurmTarget::Send(const SendRequest& request) {
  const Notification& n = *request.notification;
  if (!IsSlurmJobId(n.job_id)) {
    return absl::InvalidArgumentError(
        absl::StrCat("job_id=\"", n.job_id, "\" is not a Slurm job id"));
  }
  if (!config_.cluster.empty() && n.cluster != config_.cluster) {
    return absl::InvalidArgumentError(absl::StrCat("job ", n.cluster, "/", n.job_id,
                                                   " is not on cluster ", config_.cluster,
                                                   " that target ", name(), " serves"));
  }
  return config_.mode == SlurmTargetConfig::Mode::kRest ? SendWithRest(request)
                                                        : SendWithScontrol(request);
}

absl::Status SlurmTarget::SendWithScontrol(const SendRequest& request) {
  const Notification& n = *request.notification;
  absl::StatusOr<JobView> job = ShowJob(n.job_id);
  if (!job.ok()) return job.status();
  if (config_.comment &&
      absl::StrContains(job->comment, SlurmCommentMarker(request.idempotency_key))) {
    return absl::OkStatus();  // an earlier attempt got through; the job already has it
  }
  const std::string message = HumanMessage(n, kNotifyMaxChars);
  // A job that is not running has no stderr being written: only its comment is updated.
  if (config_.notify && job->state == "RUNNING") {
    if (absl::StatusOr<std::string> s = Scontrol({"notify", n.job_id, message}); !s.ok()) {
      return s.status();
    }
  }
  // Written immediately after the notify: this is the window in which a stop of the sender
  // would make a retry notify again (see the header).
  if (config_.comment) {
    if (absl::StatusOr<std::string> s =
            Scontrol({"update", absl::StrCat("JobId=", n.job_id),
                      absl::StrCat("Comment=",
                                   SlurmComment(job->comment, request.idempotency_key, message))});
        !s.ok()) {
      return s.status();
    }
  }
  if (n.state == "firing" && config_.requeue &&
      SeverityRank(n.severity) >= SeverityRank(config_.action_min_severity)) {
    absl::StatusOr<std::string> s = Scontrol({config_.hold ? "requeuehold" : "requeue", n.job_id});
    if (!s.ok()) {
      // The job has the notification (and the marker), so a retry would skip the action:
      // report it as a permanent failure that names what happened.
      return absl::FailedPreconditionError(absl::StrCat("notified job ", n.job_id, " but ",
                                                        config_.hold ? "requeuehold" : "requeue",
                                                        " failed: ", s.status().message()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<SlurmTarget::JobView> SlurmTarget::RestGetJob(const std::string& job_id) {
  HttpRequest http{.method = "GET",
                   .url = absl::StrCat(config_.rest_url, "/slurm/v0.0.38/job/", job_id),
                   .headers = config_.headers,
                   .timeout = config_.timeout,
                   .unix_socket = config_.rest_unix_socket};
  absl::StatusOr<HttpResponse> response = PerformHttp(http);
  if (!response.ok()) return response.status();
  const std::string what = absl::StrCat("slurmrestd job ", job_id);
  nlohmann::json body = nlohmann::json::parse(response->body, nullptr, false);
  if (response->status != 200 || body.is_discarded() || !body.contains("jobs") ||
      body["jobs"].empty()) {
    if (absl::StrContains(response->body, "Invalid job id") ||
        (body.is_object() && body.contains("jobs") && body["jobs"].empty())) {
      return absl::NotFoundError(absl::StrCat(what, ": no such job"));
    }
    absl::Status s = HttpStatusToStatus(*response, what);
    return s.ok() ? absl::UnavailableError(
                        absl::StrCat(what, ": unexpected answer ", OneLine(response->body, 200)))
                  : s;
  }
  const nlohmann::json& j = body["jobs"][0];
  return JobView{.state = j.value("job_state", ""), .comment = j.value("comment", "")};
}

absl::Status SlurmTarget::SendWithRest(const SendRequest& request) {
  const Notification& n = *request.notification;
  absl::StatusOr<JobView> job = RestGetJob(n.job_id);
  if (!job.ok()) return job.status();
  if (absl::StrContains(job->comment, SlurmCommentMarker(request.idempotency_key))) {
    return absl::OkStatus();
  }
  const std::string comment =
      SlurmComment(job->comment, request.idempotency_key, HumanMessage(n, kNotifyMaxChars));
  HttpRequest http{.url = absl::StrCat(config_.rest_url, "/slurm/v0.0.38/job/", n.job_id),
                   .headers = config_.headers,
                   .body = nlohmann::json({{"comment", comment}}).dump(),
                   .timeout = config_.timeout,
                   .unix_socket = config_.rest_unix_socket};
  http.headers.emplace_back("Content-Type", "application/json");
  absl::StatusOr<HttpResponse> response = PerformHttp(http);
  if (!response.ok()) return response.status();
  const std::string what = absl::StrCat("slurmrestd update of job ", n.job_id);
  if (absl::Status s = HttpStatusToStatus(*response, what); !s.ok()) return s;
  // slurmrestd answers 200 with an "errors" list when Slurm refused the update.
  nlohmann::json body = nlohmann::json::parse(response->body, nullptr, false);
  if (body.is_object() && body.contains("errors") && !body["errors"].empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, ": ", OneLine(body["errors"].dump(), 300)));
  }
  return absl::OkStatus();
}

}  // namespace goodput::alerting
