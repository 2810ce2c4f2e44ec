// Report commands (ReportService, served by goodput-alerting): report CLUSTER/JOB, report
// --from-admin-comment STRING.
#include <iostream>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "goodput/v1/report.grpc.pb.h"
#include "services/api/api_convert.h"
#include "services/api/job_report.h"
#include "tools/goodputctl/commands.h"
#include "tools/goodputctl/format.h"

namespace goodput::ctl {
namespace {

std::string GpuText(const v1::GpuRef& gpu) {
  std::string text = gpu.host();
  if (gpu.has_gpu_index()) {
    absl::StrAppend(&text, ":", gpu.gpu_index());
  } else if (!gpu.uuid().empty()) {
    absl::StrAppend(&text, ":", gpu.uuid());
  }
  if (gpu.has_mig()) absl::StrAppend(&text, "/mig", gpu.mig().gpu_instance_id());
  return Printable(text);
}

// Decodes an AdminComment (the argument, or stdin for "-": e.g. piped from
// `sacct -n -X -j JOB -o AdminComment%4000`).
int FromAdminComment(const Args& args, std::string comment) {
  if (comment == "-") {
    comment.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  }
  absl::StatusOr<v1::ReportSummary> summary = api::DecodeAdminComment(comment);
  if (!summary.ok()) return Failure(absl::StrCat("report: ", summary.status().message()));
  if (args.json) {
    PrintJson(*summary);
    return kExitOk;
  }
  std::cout << api::RenderSummaryText(*summary);
  return kExitOk;
}

void PrintDetails(const v1::JobReport& r) {
  const v1::JobOfuSummary& o = r.ofu();
  std::cout << "Details\n";
  auto line = [](absl::string_view label, const std::string& value) {
    std::cout << "  " << label << std::string(label.size() < 18 ? 18 - label.size() : 1, ' ') << " "
              << value << "\n";
  };
  if (!r.job().name().empty()) line("name", Printable(r.job().name()));
  if (!r.job().workload_fingerprint().empty()) {
    line("workload", Printable(r.job().workload_fingerprint()));
  }
  if (r.job().workload_kind() != v1::WORKLOAD_KIND_UNSPECIFIED) {
    const std::string source = api::WorkloadKindSourceName(r.job().workload_kind_source());
    line("kind", absl::StrCat(api::WorkloadKindName(r.job().workload_kind()),
                              source.empty() ? "" : absl::StrCat(" (", source, ")")));
  }
  if (r.has_serving()) {
    const v1::ServingReport& sv = r.serving();
    line("serving",
         absl::StrCat(Printable(sv.engines()),
                      sv.models().empty() ? "" : absl::StrCat(" ", Printable(sv.models()))));
    line("tokens", absl::StrFormat("%.0f prompt + %.0f generated, %.0f requests, %.1f tokens/s",
                                   sv.prompt_tokens(), sv.generation_tokens(), sv.requests(),
                                   sv.tokens_per_s()));
    if (sv.has_joules_per_token()) {
      line("energy per token", absl::StrFormat("%.3g J (%.3g tokens per kWh)",
                                               sv.joules_per_token(), sv.tokens_per_kwh()));
    }
    if (sv.has_engine_tflops_per_gpu()) {
      line("engine FLOPs",
           absl::StrCat(
               absl::StrFormat("%.1f TFLOP/s per GPU", sv.engine_tflops_per_gpu()),
               sv.has_engine_flops_to_ofu_ratio()
                   ? absl::StrFormat(", %.2fx what OFU measured", sv.engine_flops_to_ofu_ratio())
                   : ""));
    }
  }
  if (r.job().has_start_time()) {
    line("ran", absl::StrCat(FormatUtc(FromProto(r.job().start_time())), " .. ",
                             r.job().has_end_time() ? FormatUtc(FromProto(r.job().end_time()))
                                                    : std::string("-"),
                             " UTC"));
  }
  if (o.has_steady_state_start_time()) {
    line("steady state from",
         absl::StrCat(FormatUtc(FromProto(o.steady_state_start_time())), " UTC"));
  }
  if (o.stragglers_size() > 0) {
    std::vector<std::string> parts;
    for (const v1::Straggler& s : o.stragglers()) {
      parts.push_back(absl::StrCat(GpuText(s.gpu()), " (OFU ", Percent(s.ofu()), ", ",
                                   Number(s.score(), 2), "x median)"));
    }
    line("straggler GPUs", absl::StrJoin(parts, ", "));
  }
  if (o.idle_gpus_size() > 0) {
    std::vector<std::string> parts;
    for (const v1::GpuRef& g : o.idle_gpus()) parts.push_back(GpuText(g));
    line("idle GPUs", absl::StrJoin(parts, ", "));
  }
  if (r.has_reconciliation()) {
    line("MFU reconciliation", Printable(r.reconciliation().reason()));
  } else {
    line("MFU reconciliation", Printable(r.reconciliation_note()));
  }
  if (!r.alerts_note().empty()) line("alerts", Printable(r.alerts_note()));
  for (const v1::ReportAlert& a : r.alerts()) {
    line(a.alert_id() == r.alerts(0).alert_id() ? "alerts" : "",
         absl::StrCat("[", EnumShort(v1::Severity_Name(a.severity()), "SEVERITY_"), "] ",
                      EnumShort(v1::AlertKind_Name(a.kind()), "ALERT_KIND_"), ": ",
                      Printable(a.summary()),
                      a.after_job_end() ? " (found after the job ended)" : ""));
  }
  if (!r.failure_cause().empty()) line("failure cause", Printable(r.failure_cause()));
  for (const v1::ReportAlert& a : r.alerts()) {
    if (!a.likely_cause().empty()) {
      line("likely cause",
           absl::StrCat("of alert ", a.alert_id(), ": ", Printable(a.likely_cause())));
    }
  }
  for (int i = 0; i < r.faults_size(); ++i) {
    line(i == 0 ? "GPU faults" : "", FaultEventLine(r.faults(i)));
  }
  if (r.summary().fault_count() > r.faults_size()) {
    line("", absl::StrCat("... ", r.summary().fault_count() - r.faults_size(), " more"));
  }
  for (int i = 0; i < r.policy_actions_size(); ++i) {
    const v1::PolicyAction& p = r.policy_actions(i);
    line(i == 0 ? "policy actions" : "",
         absl::StrCat(p.dry_run() ? "[dry run] " : "", Printable(p.rule()), ": ", p.action(),
                      p.node().empty() ? "" : absl::StrCat(" node ", Printable(p.node())), ", ",
                      p.status(), p.outcome().empty() ? "" : ": ", Printable(p.outcome()),
                      " (goodputctl actions show ", p.action_id(), ")"));
  }
  for (int i = 0; i < r.caveats_size(); ++i) {
    line(i == 0 ? "caveats" : "", Printable(r.caveats(i)));
  }
  line("report", absl::StrCat(r.final() ? "final" : "provisional (windows still open)",
                              ", assembled ", FormatUtc(FromProto(r.generate_time())), " UTC"));
  line("AdminComment", absl::StrCat(Printable(r.admin_comment_status()), " (",
                                    r.admin_comment().size(), " characters)"));
}

int Report(const Args& args) {
  if (std::optional<std::string> comment = args.Flag("from-admin-comment")) {
    if (args.positional.size() > 1) {
      return UsageError("report: give either CLUSTER/JOB or --from-admin-comment, not both");
    }
    return FromAdminComment(args, *comment);
  }
  absl::StatusOr<v1::JobKey> key = JobArg(args, 1);
  if (!key.ok()) return UsageError(key.status().message());
  v1::GetJobReportRequest request;
  *request.mutable_job() = *key;
  v1::GetJobReportResponse response;
  grpc::Status status = v1::ReportService::NewStub(ChannelTo(args, Service::kAlerting))
                            ->GetJobReport(CallContext(args).get(), request, &response);
  if (!status.ok()) return RpcFailure("report", args, Service::kAlerting, "GetJobReport", status);
  if (args.json) {
    PrintJson(response.report());
    return kExitOk;
  }
  std::cout << api::RenderSummaryText(response.report().summary());
  PrintDetails(response.report());
  return kExitOk;
}

}  // namespace

std::vector<Command> ReportCommands() {
  return {
      {.words = {"report"},
       .arguments = "CLUSTER/JOB_ID",
       .summary = "a job's end report: OFU, GPU-hours, waste, verdicts, regressions, advice",
       .details =
           "  --from-admin-comment STRING     decode the summary goodput wrote into a Slurm job's\n"
           "                                  AdminComment (\"goodput1:...\" or "
           "\"goodput1-b32:...\";\n"
           "                                  \"-\" reads stdin, e.g.\n"
           "                                  sacct -n -X -j JOB -o AdminComment%4000 | "
           "goodputctl\n"
           "                                  report --from-admin-comment -); no service needed\n"
           "  --json                          the report (or the decoded summary) as JSON\n",
       .flags = {"cluster", "job-id", "from-admin-comment"},
       .run = Report},
  };
}

}  // namespace goodput::ctl
