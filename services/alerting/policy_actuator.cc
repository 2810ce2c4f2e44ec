#include "services/alerting/policy_actuator.h"

#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "services/alerting/policy_rules.h"
#include "services/alerting/targets/http_client.h"
#include "services/alerting/targets/render.h"
#include "services/alerting/targets/signing.h"
#include "services/alerting/targets/slurm_target.h"
#include "services/platform/command.h"

namespace goodput::alerting {
namespace {

constexpr size_t kTokenBytes = 16;
constexpr size_t kReasonMaxChars = 200;

absl::Status ClientError(const std::string& what, int exit_code, const std::string& output) {
  const std::string message = absl::StrCat(what, " exited ", exit_code, ": ", OneLine(output, 300));
  if (absl::StrContains(output, "Invalid job id") ||
      absl::StrContains(output, "Invalid node name")) {
    return absl::NotFoundError(message);
  }
  if (absl::StrContains(output, "Access/permission denied") ||
      absl::StrContains(output, "Invalid user")) {
    return absl::PermissionDeniedError(message);
  }
  if (absl::StrContains(output, "already completing or completed") ||
      absl::StrContains(output, "Job is no longer") ||
      absl::StrContains(output, "Requested operation is presently disabled") ||
      absl::StrContains(output, "Only batch jobs are accepted")) {
    return absl::FailedPreconditionError(message);
  }
  return absl::UnavailableError(message);
}

absl::Status CheckJobId(const std::string& job_id) {
  if (IsSlurmJobId(job_id)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("job_id=\"", OneLine(job_id, 200), "\" is not a Slurm job id"));
}

absl::Status CheckNode(const std::string& node) {
  if (IsSlurmNodeName(node)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("node \"", OneLine(node, 200), "\" is not a Slurm node name"));
}

std::string Quoted(const std::string& arg) {
  if (arg.find_first_of(" \"'\\$`") == std::string::npos) return arg;
  std::string q = "\"";
  for (char c : arg) {
    if (c == '"' || c == '\\' || c == '$' || c == '`') q += '\\';
    q += c;
  }
  return q + "\"";
}

std::string CommandText(const std::vector<std::string>& argv) {
  std::vector<std::string> q;
  for (const std::string& a : argv) q.push_back(Quoted(a));
  return absl::StrJoin(q, " ");
}

std::string DrainReason(const std::string& reason) {
  std::string r = OneLine(reason, kReasonMaxChars);
  if (!absl::StartsWith(r, kDrainReasonPrefix)) r = absl::StrCat(kDrainReasonPrefix, " ", r);
  return r;
}

}  // namespace

bool NodeUnavailable(const std::string& state) {
  const std::string s = std::string(absl::StripSuffix(state, "*"));
  return absl::StartsWith(s, "drain") || s == "drng" || absl::StartsWith(s, "down") ||
         absl::StartsWith(s, "fail");
}

bool NodeDrained(const std::string& state) {
  const std::string s = std::string(absl::StripSuffix(state, "*"));
  return absl::StartsWith(s, "drain") || s == "drng";
}

absl::StatusOr<const SlurmAccess*> PolicyActuator::AccessFor(const std::string& cluster) const {
  auto it = slurm_.find(cluster);
  if (it == slurm_.end()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cluster ", OneLine(cluster, 100),
        " has no Slurm access in alerting.policies.clusters: nothing can be done there"));
  }
  return &it->second;
}

absl::StatusOr<std::string> PolicyActuator::Run(const SlurmAccess& access, const std::string& path,
                                                const std::string& what,
                                                const std::vector<std::string>& args) {
  std::vector<std::string> argv = {path};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<std::pair<std::string, std::string>> env;
  if (!access.slurm_conf.empty()) env.emplace_back("SLURM_CONF", access.slurm_conf);
  absl::StatusOr<platform::CommandResult> result = platform::RunCommand(argv, env, access.timeout);
  if (!result.ok()) {
    return absl::Status(result.status().code(),
                        absl::StrCat(what, ": ", result.status().message()));
  }
  if (result->exit_code != 0) return ClientError(what, result->exit_code, result->output);
  return result->output;
}

std::string PolicyActuator::CancelCommand(const std::string& cluster,
                                          const std::string& job_id) const {
  auto it = slurm_.find(cluster);
  return CommandText({it == slurm_.end() ? "scancel" : it->second.scancel_path, "--", job_id});
}

std::string PolicyActuator::RequeueCommand(const std::string& cluster,
                                           const std::string& job_id) const {
  auto it = slurm_.find(cluster);
  return CommandText(
      {it == slurm_.end() ? "scontrol" : it->second.scontrol_path, "--", "requeue", job_id});
}

std::string PolicyActuator::DrainCommand(const std::string& cluster, const std::string& node,
                                         const std::string& reason) const {
  auto it = slurm_.find(cluster);
  return CommandText({it == slurm_.end() ? "scontrol" : it->second.scontrol_path, "--", "update",
                      absl::StrCat("NodeName=", node), "State=DRAIN",
                      absl::StrCat("Reason=", DrainReason(reason))});
}

std::string PolicyActuator::ResumeCommand(const std::string& cluster,
                                          const std::string& node) const {
  auto it = slurm_.find(cluster);
  return CommandText({it == slurm_.end() ? "scontrol" : it->second.scontrol_path, "--", "update",
                      absl::StrCat("NodeName=", node), "State=RESUME"});
}

std::string PolicyActuator::CancelWorkflowCommand(const std::string& cluster,
                                                  const std::string& workflow) const {
  auto it = osmo_.find(cluster);
  return absl::StrCat("POST ", it == osmo_.end() ? "<osmo>" : it->second.url, "/api/workflow/",
                      UrlEscape(workflow), "/cancel");
}

absl::StatusOr<PolicyJobView> PolicyActuator::Job(const std::string& cluster,
                                                  const std::string& job_id) {
  if (absl::Status s = CheckJobId(job_id); !s.ok()) return s;
  absl::StatusOr<const SlurmAccess*> access = AccessFor(cluster);
  if (!access.ok()) return access.status();
  absl::StatusOr<std::string> token = RandomHex(kTokenBytes);
  if (!token.ok()) return token.status();
  absl::StatusOr<std::string> out =
      Run(**access, (*access)->squeue_path, "squeue",
          {"--noheader", "--states=all", absl::StrCat("--jobs=", job_id),
           absl::StrCat("--format=", DelimitedFormat(*token, {"%A", "%i", "%T", "%S"}))});
  if (!out.ok()) return out.status();
  std::optional<PolicyJobView> first;
  for (const std::vector<std::string>& f : DelimitedRecords(*out, *token, 4)) {
    PolicyJobView v{.state = f[2], .start_time = f[3]};
    if (f[0] == job_id || f[1] == job_id) return v;
    if (!first) first = v;
  }
  if (first) return *first;
  return absl::NotFoundError(absl::StrCat("squeue lists no job ", job_id));
}

absl::StatusOr<PolicyNodeView> PolicyActuator::Node(const std::string& cluster,
                                                    const std::string& node) {
  if (absl::Status s = CheckNode(node); !s.ok()) return s;
  absl::StatusOr<const SlurmAccess*> access = AccessFor(cluster);
  if (!access.ok()) return access.status();
  absl::StatusOr<std::string> token = RandomHex(kTokenBytes);
  if (!token.ok()) return token.status();
  absl::StatusOr<std::string> out =
      Run(**access, (*access)->sinfo_path, "sinfo",
          {"--noheader", "--Node", absl::StrCat("--nodes=", node),
           absl::StrCat("--format=", DelimitedFormat(*token, {"%N", "%t", "%E"}))});
  if (!out.ok()) return out.status();
  for (const std::vector<std::string>& f : DelimitedRecords(*out, *token, 3)) {
    if (f[0] == node) return PolicyNodeView{.state = f[1], .reason = f[2]};
  }
  return absl::NotFoundError(absl::StrCat("sinfo lists no node ", node));
}

absl::StatusOr<std::pair<int, int>> PolicyActuator::NodeCounts(const std::string& cluster) {
  absl::StatusOr<const SlurmAccess*> access = AccessFor(cluster);
  if (!access.ok()) return access.status();
  absl::StatusOr<std::string> token = RandomHex(kTokenBytes);
  if (!token.ok()) return token.status();
  absl::StatusOr<std::string> out = Run(
      **access, (*access)->sinfo_path, "sinfo",
      {"--noheader", "--Node", absl::StrCat("--format=", DelimitedFormat(*token, {"%N", "%t"}))});
  if (!out.ok()) return out.status();
  std::map<std::string, bool> nodes;  // a node in several partitions is listed once per partition
  for (const std::vector<std::string>& f : DelimitedRecords(*out, *token, 2)) {
    nodes[f[0]] = NodeUnavailable(f[1]);
  }
  int unavailable = 0;
  for (const auto& [name, down] : nodes) unavailable += down ? 1 : 0;
  return std::make_pair(unavailable, static_cast<int>(nodes.size()));
}

absl::StatusOr<std::string> PolicyActuator::Cancel(const std::string& cluster,
                                                   const std::string& job_id) {
  absl::StatusOr<PolicyJobView> job = Job(cluster, job_id);
  if (absl::IsNotFound(job.status())) return std::string("job no longer known to Slurm");
  if (!job.ok()) return job.status();
  if (job->state != "RUNNING" && job->state != "PENDING" && job->state != "SUSPENDED" &&
      job->state != "REQUEUED") {
    return absl::StrCat("job already ", job->state);
  }
  absl::StatusOr<const SlurmAccess*> access = AccessFor(cluster);
  if (!access.ok()) return access.status();
  absl::StatusOr<std::string> out =
      Run(**access, (*access)->scancel_path, "scancel", {"--", job_id});
  if (!out.ok()) {
    if (absl::IsFailedPrecondition(out.status())) return std::string("job already ending");
    return out.status();
  }
  return absl::StrCat("cancelled (was ", job->state, ")");
}

absl::StatusOr<std::string> PolicyActuator::Requeue(const std::string& cluster,
                                                    const std::string& job_id,
                                                    const std::string& start_time_before) {
  absl::StatusOr<PolicyJobView> job = Job(cluster, job_id);
  if (!job.ok()) return job.status();
  if (job->state == "PENDING" || job->state == "REQUEUED" || job->state == "REQUEUE_HOLD" ||
      job->state == "REQUEUE_FED") {
    return absl::StrCat("job already ", job->state, " (requeued)");
  }
  if (!start_time_before.empty() && job->start_time != start_time_before) {
    return absl::StrCat("job already requeued (started again at ", job->start_time, ")");
  }
  if (job->state != "RUNNING" && job->state != "SUSPENDED") {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job_id, " is ", job->state, ": only a running job can be requeued"));
  }
  absl::StatusOr<const SlurmAccess*> access = AccessFor(cluster);
  if (!access.ok()) return access.status();
  absl::StatusOr<std::string> out =
      Run(**access, (*access)->scontrol_path, "scontrol requeue", {"--", "requeue", job_id});
  if (!out.ok()) return out.status();
  return std::string("requeued");
}

absl::StatusOr<std::string> PolicyActuator::Drain(const std::string& cluster,
                                                  const std::string& node,
                                                  const std::string& reason) {
  absl::StatusOr<PolicyNodeView> view = Node(cluster, node);
  if (!view.ok()) return view.status();
  if (NodeDrained(view->state)) {
    return absl::StrCat("node already ", view->state, " (", OneLine(view->reason, 200), ")");
  }
  absl::StatusOr<const SlurmAccess*> access = AccessFor(cluster);
  if (!access.ok()) return access.status();
  absl::StatusOr<std::string> out =
      Run(**access, (*access)->scontrol_path, "scontrol update",
          {"--", "update", absl::StrCat("NodeName=", node), "State=DRAIN",
           absl::StrCat("Reason=", DrainReason(reason))});
  if (!out.ok()) return out.status();
  return absl::StrCat("drained (was ", view->state, ")");
}

absl::StatusOr<std::string> PolicyActuator::Resume(const std::string& cluster,
                                                   const std::string& node) {
  absl::StatusOr<PolicyNodeView> view = Node(cluster, node);
  if (!view.ok()) return view.status();
  if (!NodeDrained(view->state)) return absl::StrCat("node already ", view->state);
  if (!absl::StartsWith(view->reason, kDrainReasonPrefix)) {
    return absl::FailedPreconditionError(
        absl::StrCat("node ", node, " is drained for another reason now (\"",
                     OneLine(view->reason, 200), "\"): left as it is"));
  }
  absl::StatusOr<const SlurmAccess*> access = AccessFor(cluster);
  if (!access.ok()) return access.status();
  absl::StatusOr<std::string> out =
      Run(**access, (*access)->scontrol_path, "scontrol update",
          {"--", "update", absl::StrCat("NodeName=", node), "State=RESUME"});
  if (!out.ok()) return out.status();
  return absl::StrCat("resumed (was ", view->state, ")");
}

absl::StatusOr<std::string> PolicyActuator::WorkflowOf(
    const std::string& cluster, const std::map<std::string, std::string>& labels) const {
  auto it = osmo_.find(cluster);
  if (it == osmo_.end()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cluster ", OneLine(cluster, 100),
        " has no osmo_target in alerting.policies.clusters: its workflows cannot be cancelled"));
  }
  for (const std::string& key : it->second.workflow_label_keys) {
    auto l = labels.find(key);
    if (l != labels.end() && !l->second.empty() && l->second != "." && l->second != "..") {
      return l->second;
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "the job has none of the labels ", absl::StrJoin(it->second.workflow_label_keys, ", "),
      " that name its Osmo workflow"));
}

absl::StatusOr<std::string> PolicyActuator::CancelWorkflow(const std::string& cluster,
                                                           const std::string& workflow) {
  auto it = osmo_.find(cluster);
  if (it == osmo_.end()) return WorkflowOf(cluster, {}).status();
  const OsmoTargetConfig& c = it->second;
  HttpRequest http{.url = absl::StrCat(c.url, "/api/workflow/", UrlEscape(workflow), "/cancel"),
                   .headers = c.headers,
                   .timeout = c.timeout};
  http.headers.emplace_back("Content-Type", "application/json");
  absl::StatusOr<HttpResponse> response = PerformHttp(http);
  if (!response.ok()) return response.status();
  if (response->status == 409) return std::string("workflow already stopped");
  if (absl::Status s =
          HttpStatusToStatus(*response, absl::StrCat("osmo cancel of workflow ", workflow));
      !s.ok()) {
    return s;
  }
  return std::string("workflow cancelled");
}

}  // namespace goodput::alerting
