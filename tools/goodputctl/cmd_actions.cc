// Policy action commands (AlertService): actions list|show|undo — the policy stage's audit log
// (services/alerting/policy_stage.h).
#include <cstdlib>
#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "goodput/v1/alert.grpc.pb.h"
#include "tools/goodputctl/commands.h"
#include "tools/goodputctl/format.h"

namespace goodput::ctl {
namespace {

std::unique_ptr<v1::AlertService::Stub> Stub(const Args& args) {
  return v1::AlertService::NewStub(ChannelTo(args, Service::kAlerting));
}

std::string When(const google::protobuf::Timestamp& t) {
  if (t.seconds() == 0 && t.nanos() == 0) return "";
  return FormatUtc(absl::FromUnixSeconds(t.seconds()));
}

std::string Target(const v1::PolicyAction& a) {
  std::string text = absl::StrCat(a.action(), " ", a.job().cluster(), "/", a.job().job_id());
  if (!a.node().empty()) text = absl::StrCat(a.action(), " node ", a.node());
  return text;
}

std::string Status(const v1::PolicyAction& a) {
  return a.dry_run() && a.status() != "dry_run" ? absl::StrCat(a.status(), " (dry run)")
                                                : a.status();
}

int ListActions(const Args& args) {
  v1::ListPolicyActionsRequest request;
  if (auto job = args.Flag("job")) {
    absl::StatusOr<std::pair<std::string, std::string>> ref = ParseJobRef(*job);
    if (!ref.ok()) return UsageError(absl::StrCat("--job: ", ref.status().message()));
    request.mutable_job()->set_cluster(ref->first);
    request.mutable_job()->set_job_id(ref->second);
  }
  request.set_cluster(args.Flag("cluster").value_or(""));
  request.set_status(args.Flag("status").value_or(""));
  int limit = 100;
  if (auto l = args.Flag("limit"); l && (!absl::SimpleAtoi(*l, &limit) || limit <= 0)) {
    return UsageError(absl::StrCat("--limit: \"", *l, "\" is not a positive number"));
  }
  request.set_page_size(limit);
  v1::ListPolicyActionsResponse response;
  grpc::Status status = Stub(args)->ListPolicyActions(CallContext(args).get(), request, &response);
  if (!status.ok()) {
    return RpcFailure("actions list", args, Service::kAlerting, "ListPolicyActions", status);
  }
  if (args.json) {
    PrintJson(response);
    return kExitOk;
  }
  Table t({{"ID", Align::kRight}, {"STATUS"}, {"RULE"}, {"ACTION"}, {"WARNED"}, {"OUTCOME"}});
  for (const v1::PolicyAction& a : response.actions()) {
    t.AddRow({a.action_id(), Status(a), a.rule(), Target(a), When(a.warned_time()),
              a.status() == "waiting" ? absl::StrCat("acts after ", When(a.act_after()),
                                                     a.note().empty() ? "" : "; " + a.note())
                                      : a.outcome()});
  }
  std::cout << t.Render();
  if (response.actions().empty()) std::cout << "(no policy actions)\n";
  return kExitOk;
}

void PrintAction(const v1::PolicyAction& a) {
  std::cout << "action       " << a.action_id() << "   " << Status(a) << "\n"
            << "rule         " << Printable(a.rule()) << "\n"
            << "finding      alert " << a.alert_id() << ": " << Printable(a.finding_summary())
            << "\n"
            << "job          " << Printable(a.job().cluster()) << "/" << Printable(a.job().job_id())
            << "\n"
            << "action       " << Printable(Target(a)) << "\n"
            << "command      " << Printable(a.command()) << "\n"
            << "warned       " << When(a.warned_time()) << "   acts after " << When(a.act_after())
            << "\n";
  if (!a.note().empty()) std::cout << "waiting      " << Printable(a.note()) << "\n";
  if (a.has_acted_time()) {
    std::cout << "acted        " << When(a.acted_time()) << " by " << Printable(a.acted_by())
              << " (" << a.attempts() << " attempt" << (a.attempts() == 1 ? "" : "s") << ")\n";
  }
  if (!a.outcome().empty()) std::cout << "outcome      " << Printable(a.outcome()) << "\n";
  if (a.has_undone_time()) {
    std::cout << "undone       " << When(a.undone_time()) << " by " << Printable(a.undone_by())
              << ": " << Printable(a.undo_outcome()) << "\n";
  }
  std::cout << "evidence     " << Printable(a.evidence_json()) << "\n";
}

int ShowAction(const Args& args) {
  const std::string id = args.Word(2);
  if (id.empty())
    return UsageError("actions show needs an action id (see goodputctl actions list)");
  v1::GetPolicyActionRequest request;
  request.set_action_id(id);
  v1::GetPolicyActionResponse response;
  grpc::Status status = Stub(args)->GetPolicyAction(CallContext(args).get(), request, &response);
  if (!status.ok()) {
    return RpcFailure("actions show", args, Service::kAlerting, "GetPolicyAction", status);
  }
  if (args.json) {
    PrintJson(response.action());
  } else {
    PrintAction(response.action());
  }
  return kExitOk;
}

int UndoAction(const Args& args) {
  const std::string id = args.Word(2);
  if (id.empty())
    return UsageError("actions undo needs an action id (see goodputctl actions list)");
  v1::UndoPolicyActionRequest request;
  request.set_action_id(id);
  if (auto by = args.Flag("by")) {
    request.set_by(*by);
  } else {
    for (const char* var : {"GOODPUT_USER", "USER", "LOGNAME"}) {
      if (const char* v = std::getenv(var); v != nullptr && *v != '\0') {
        request.set_by(v);
        break;
      }
    }
  }
  if (request.by().empty()) return UsageError("actions undo needs --by NAME (no $USER set)");
  request.set_comment(args.Flag("comment").value_or(""));
  v1::UndoPolicyActionResponse response;
  grpc::Status status = Stub(args)->UndoPolicyAction(CallContext(args).get(), request, &response);
  if (!status.ok()) {
    return RpcFailure("actions undo", args, Service::kAlerting, "UndoPolicyAction", status);
  }
  if (args.json) {
    PrintJson(response.action());
  } else {
    std::cout << "undone " << id << " (" << Printable(Target(response.action()))
              << "): " << Printable(response.action().undo_outcome()) << "\n";
  }
  return kExitOk;
}

}  // namespace

std::vector<Command> ActionCommands() {
  return {
      {.words = {"actions", "list"},
       .summary = "what the policy stage did or would do (dry run), newest first",
       .details = "  --job CLUSTER/JOB_ID  --cluster C\n"
                  "  --status S       waiting|acting|done|failed|dry_run|exempt|cleared|undone\n"
                  "  --limit N        at most N actions [100]\n",
       .flags = {"job", "cluster", "status", "limit"},
       .run = ListActions},
      {.words = {"actions", "show"},
       .arguments = "ACTION_ID",
       .summary = "one policy action: rule, finding, evidence, command, outcome, undo",
       .run = ShowAction},
      {.words = {"actions", "undo"},
       .arguments = "ACTION_ID",
       .summary = "undo a policy action: resume a drained node, or stop one still waiting",
       .details = "  --by NAME        who undoes it [$USER]\n"
                  "  --comment TEXT   why\n",
       .flags = {"by", "comment"},
       .run = UndoAction},
  };
}

}  // namespace goodput::ctl
