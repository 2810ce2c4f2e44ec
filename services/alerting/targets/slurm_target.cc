#include "services/alerting/targets/slurm_target.h"

#include <cctype>
#include <nlohmann/json.hpp>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "services/alerting/targets/http_client.h"
#include "services/alerting/targets/osmo_target.h"
#include "services/alerting/targets/render.h"
#include "services/alerting/targets/signing.h"
#include "services/platform/command.h"

namespace goodput::alerting {

using platform::CommandResult;
using platform::RunCommand;
namespace {

// Long enough for a summary and the first sentences; Slurm stores and prints all of it.
constexpr size_t kNotifyMaxChars = 600;
constexpr size_t kCommentMaxChars = 400;
constexpr char kMarkerPrefix[] = "[goodput ";
constexpr size_t kMacHexChars = 32;  // 128 bits
constexpr size_t kTokenBytes = 16;
// squeue prints this for a job without a comment.
constexpr char kNoComment[] = "(null)";

// Maps the complaint of a Slurm client (scontrol, squeue) to a status the retry rules
// understand.
absl::Status SlurmClientError(const std::string& what, int exit_code, const std::string& output) {
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

}  // namespace

SlurmCommentMarker::SlurmCommentMarker(absl::string_view secret, absl::string_view cluster,
                                       absl::string_view job_id)
    // Lengths first, so that no two (cluster, job) pairs enter the MAC as the same text.
    : secret_(secret),
      job_(absl::StrCat(cluster.size(), ":", cluster, job_id.size(), ":", job_id)) {}

std::string SlurmCommentMarker::Mac(absl::string_view idempotency_key) const {
  return HmacSha256Hex(secret_, absl::StrCat("goodput slurm comment marker\n", job_,
                                             idempotency_key.size(), ":", idempotency_key))
      .substr(0, kMacHexChars);
}

std::string SlurmCommentMarker::For(const std::string& idempotency_key) const {
  return absl::StrCat(kMarkerPrefix, idempotency_key, " ", Mac(idempotency_key), "]");
}

bool SlurmCommentMarker::IsIn(const std::string& comment,
                              const std::string& idempotency_key) const {
  return absl::StrContains(comment, For(idempotency_key));
}

std::string SlurmCommentMarker::Comment(const std::string& current,
                                        const std::string& idempotency_key,
                                        const std::string& message) const {
  // goodput's part starts at the first marker that verifies; anything else that looks like
  // one was written by the user and stays theirs.
  size_t user_end = std::string::npos;
  for (size_t pos = current.find(kMarkerPrefix); pos != std::string::npos;
       pos = current.find(kMarkerPrefix, pos + 1)) {
    const size_t close = current.find(']', pos);
    if (close == std::string::npos) break;
    const absl::string_view inside = absl::string_view(current).substr(
        pos + sizeof(kMarkerPrefix) - 1, close - pos - (sizeof(kMarkerPrefix) - 1));
    const size_t space = inside.rfind(' ');
    if (space != absl::string_view::npos &&
        inside.substr(space + 1) == Mac(inside.substr(0, space))) {
      user_end = pos;
      break;
    }
  }
  std::string user_part = current.substr(0, user_end);
  while (!user_part.empty() && user_part.back() == ' ') user_part.pop_back();
  return absl::StrCat(user_part, user_part.empty() ? "" : " ", For(idempotency_key), " ",
                      OneLine(message, kCommentMaxChars));
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

std::string DelimitedFormat(const std::string& token, const std::vector<std::string>& fields) {
  return absl::StrCat("<", token, "<", absl::StrJoin(fields, absl::StrCat("|", token, "|")), ">",
                      token, ">");
}

std::vector<std::vector<std::string>> DelimitedRecords(const std::string& output,
                                                       const std::string& token, size_t fields) {
  const std::string start = absl::StrCat("<", token, "<"), sep = absl::StrCat("|", token, "|"),
                    end = absl::StrCat(">", token, ">");
  std::vector<std::vector<std::string>> out;
  for (size_t s = output.find(start); s != std::string::npos; s = output.find(start, s + 1)) {
    const size_t begin = s + start.size();
    const size_t e = output.find(end, begin);
    if (e == std::string::npos) break;
    std::vector<std::string> f =
        absl::StrSplit(absl::string_view(output).substr(begin, e - begin), sep);
    if (f.size() == fields) out.push_back(std::move(f));
  }
  return out;
}

std::string SqueueJobFormat(const std::string& token) {
  return DelimitedFormat(token, {"%A", "%i", "%T", "%k"});
}

absl::StatusOr<SlurmJobView> ParseSqueueJob(const std::string& output, const std::string& token,
                                            const std::string& job_id) {
  std::optional<SlurmJobView> first;
  for (const std::vector<std::string>& fields : DelimitedRecords(output, token, 4)) {
    SlurmJobView view{.state = fields[2], .comment = fields[3] == kNoComment ? "" : fields[3]};
    if (fields[0] == job_id || fields[1] == job_id) return view;
    if (!first) first = std::move(view);
  }
  if (first) return *std::move(first);
  return absl::NotFoundError(absl::StrCat("squeue lists no job ", job_id));
}

absl::StatusOr<std::string> SlurmTarget::RunClient(const std::string& path, const std::string& what,
                                                   const std::vector<std::string>& args) {
  std::vector<std::string> argv = {path};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<std::pair<std::string, std::string>> env;
  if (!config_.slurm_conf.empty()) env.emplace_back("SLURM_CONF", config_.slurm_conf);
  absl::StatusOr<CommandResult> result = RunCommand(argv, env, config_.timeout);
  if (!result.ok()) return result.status();
  if (result->exit_code != 0) return SlurmClientError(what, result->exit_code, result->output);
  return result->output;
}

absl::StatusOr<std::string> SlurmTarget::Scontrol(const std::vector<std::string>& args) {
  std::vector<std::string> with_end_of_options = {"--"};
  with_end_of_options.insert(with_end_of_options.end(), args.begin(), args.end());
  return RunClient(config_.scontrol_path, absl::StrCat("scontrol ", args.empty() ? "" : args[0]),
                   with_end_of_options);
}

absl::StatusOr<SlurmJobView> SlurmTarget::SqueueJob(const std::string& job_id) {
  absl::StatusOr<std::string> token = RandomHex(kTokenBytes);
  if (!token.ok()) return token.status();
  // Every value is attached to its option: nothing here can be read as another option.
  absl::StatusOr<std::string> out =
      RunClient(config_.squeue_path, "squeue",
                {"--noheader", "--states=all", absl::StrCat("--jobs=", job_id),
                 absl::StrCat("--format=", SqueueJobFormat(*token))});
  if (!out.ok()) return out.status();
  return ParseSqueueJob(*out, *token, job_id);
}

absl::Status SlurmTarget::Send(const SendRequest& request) {
  const Notification& n = *request.notification;
  if (!IsSlurmJobId(n.job_id)) {
    // The id as received, on one line: it is telemetry text.
    return absl::InvalidArgumentError(
        absl::StrCat("job_id=\"", OneLine(n.job_id, 200), "\" is not a Slurm job id"));
  }
  if (!config_.cluster.empty() && n.cluster != config_.cluster) {
    return absl::InvalidArgumentError(absl::StrCat("job ", n.cluster, "/", n.job_id,
                                                   " is not on cluster ", config_.cluster,
                                                   " that target ", name(), " serves"));
  }
  if (config_.comment && config_.marker_secret.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "slurm target ", name(), " has no marker_secret: the job's owner could forge its marker"));
  }
  const SlurmCommentMarker marker(config_.marker_secret, n.cluster, n.job_id);
  return config_.mode == SlurmTargetConfig::Mode::kRest ? SendWithRest(request, marker)
                                                        : SendWithScontrol(request, marker);
}

absl::Status SlurmTarget::SendWithScontrol(const SendRequest& request,
                                           const SlurmCommentMarker& marker) {
  const Notification& n = *request.notification;
  absl::StatusOr<SlurmJobView> job = SqueueJob(n.job_id);
  if (!job.ok()) return job.status();
  if (config_.comment && marker.IsIn(job->comment, request.idempotency_key)) {
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
                      absl::StrCat("Comment=", marker.Comment(job->comment, request.idempotency_key,
                                                              message))});
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

absl::StatusOr<SlurmJobView> SlurmTarget::RestGetJob(const std::string& job_id) {
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
  return SlurmJobView{.state = j.value("job_state", ""), .comment = j.value("comment", "")};
}

absl::Status SlurmTarget::SendWithRest(const SendRequest& request,
                                       const SlurmCommentMarker& marker) {
  const Notification& n = *request.notification;
  absl::StatusOr<SlurmJobView> job = RestGetJob(n.job_id);
  if (!job.ok()) return job.status();
  if (marker.IsIn(job->comment, request.idempotency_key)) return absl::OkStatus();
  const std::string comment =
      marker.Comment(job->comment, request.idempotency_key, HumanMessage(n, kNotifyMaxChars));
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
