// Report commands (ReportService, served by goodput-alerting): report CLUSTER/JOB, report
// --from-admin-comment STRING.
#include <iostream>
#include <iterator>
#include <map>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "goodput/v1/report.grpc.pb.h"
#include "google/protobuf/util/json_util.h"
#include "nlohmann/json.hpp"
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
  for (int i = 0; i < r.transient_slowdowns_size(); ++i) {
    const v1::TransientSlowdown& t = r.transient_slowdowns(i);
    line(i == 0 ? "transient slowdowns" : "",
         absl::StrCat(FormatUtc(FromProto(t.onset_time())), " UTC for ",
                      absl::StrFormat("%.1f", t.duration_s() / 60.0), " min: OFU ",
                      Percent(t.before_ofu()), " -> ", Percent(t.during_ofu()), " (",
                      Number(t.factor(), 2), "x slower), ",
                      absl::StrFormat("%.2f", t.lost_gpu_hours()),
                      " GPU-hours lost; recovered before it was confirmed, not paged"));
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

// The group a report falls in for `ledger --group-by`.
absl::StatusOr<std::string> LedgerGroup(const v1::ReportSummary& s, absl::string_view by) {
  if (by == "none") return std::string("all");
  if (by == "user") return s.user().empty() ? std::string("-") : s.user();
  if (by == "team") return s.team().empty() ? std::string("-") : s.team();
  if (by == "cluster") return s.job().cluster();
  if (by == "gpu-model" || by == "gpu_model") {
    return s.gpu_model().empty() ? std::string("-") : s.gpu_model();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--group-by: \"", by, "\" is not user, team, cluster, gpu-model or none"));
}

// "USD 1234.50", "EUR 10.00 + USD 3.00" (sites with different currencies), "-" for none.
std::string CostText(const std::map<std::string, double>& cost) {
  std::vector<std::string> parts;
  for (const auto& [currency, v] : cost) parts.push_back(absl::StrFormat("%s %.2f", currency, v));
  return parts.empty() ? "-" : absl::StrJoin(parts, " + ");
}

// The ledgers of the jobs that ended in the range, summed by group (ListJobReports, paged).
int Ledger(const Args& args) {
  const std::string by = args.Flag("group-by").value_or("team");
  if (absl::StatusOr<std::string> g = LedgerGroup(v1::ReportSummary(), by); !g.ok()) {
    return UsageError(g.status().message());
  }
  absl::StatusOr<v1::TimeRange> range = TimeRangeFlags(args, "24h");
  if (!range.ok()) return UsageError(range.status().message());
  v1::ListJobReportsRequest request;
  *request.mutable_ended_in() = *range;
  request.set_cluster(args.Flag("cluster").value_or(""));
  request.set_user(args.Flag("user").value_or(""));
  request.set_team(args.Flag("team").value_or(""));
  request.set_page_size(1000);
  auto stub = v1::ReportService::NewStub(ChannelTo(args, Service::kAlerting));
  struct Group {
    int jobs = 0;
    int without_ledger = 0;
    core::JobLedger ledger;
    // Over every report of the group (with a ledger or not): energy, emissions and cost where
    // the report has them (cost by currency).
    double energy_kwh = 0, co2e_kg = 0;
    int with_energy = 0, with_co2e = 0;
    std::map<std::string, double> cost;
  };
  std::map<std::string, Group> groups;
  Group total;
  int pending = 0;
  do {
    v1::ListJobReportsResponse response;
    grpc::Status status = stub->ListJobReports(CallContext(args).get(), request, &response);
    if (!status.ok()) {
      return RpcFailure("ledger", args, Service::kAlerting, "ListJobReports", status);
    }
    pending = response.pending_reports();
    for (const v1::ReportSummary& s : response.reports()) {
      Group& g = groups[*LedgerGroup(s, by)];
      // A group's jobs are those whose ledger it sums; the others are counted apart.
      for (Group* t : {&g, &total}) {
        if (s.has_ledger()) {
          ++t->jobs;
          core::AddLedger(api::LedgerFromProto(s.ledger()), t->ledger);
        } else {
          ++t->without_ledger;
        }
        if (s.has_energy_kwh()) {
          t->energy_kwh += s.energy_kwh();
          ++t->with_energy;
        }
        if (s.has_co2e_kg()) {
          t->co2e_kg += s.co2e_kg();
          ++t->with_co2e;
        }
        if (s.has_cost()) t->cost[s.currency()] += s.cost();
      }
    }
    request.set_page_token(response.next_page_token());
  } while (!request.page_token().empty());
  if (args.json) {
    // {"group_by": ..., "groups": [{"name", "jobs", "jobs_without_ledger", "ledger"}], ...}
    auto group_json = [](const std::string& name, const Group& g) {
      std::string ledger;
      google::protobuf::util::JsonPrintOptions options;
      options.preserve_proto_field_names = true;
      options.always_print_primitive_fields = true;
      (void)google::protobuf::util::MessageToJsonString(api::LedgerToProto(g.ledger), &ledger,
                                                        options);
      return nlohmann::json{{"name", name},
                            {"jobs", g.jobs},
                            {"jobs_without_ledger", g.without_ledger},
                            {"ledger", nlohmann::json::parse(ledger)},
                            {"energy_kwh", g.energy_kwh},
                            {"jobs_with_energy", g.with_energy},
                            {"co2e_kg", g.co2e_kg},
                            {"jobs_with_co2e", g.with_co2e},
                            {"cost", g.cost}};
    };
    nlohmann::json out = {{"group_by", by}, {"groups", nlohmann::json::array()}};
    for (const auto& [name, g] : groups) out["groups"].push_back(group_json(name, g));
    out["total"] = group_json("TOTAL", total);
    out["pending_reports"] = pending;
    std::cout << out.dump() << "\n";
    return kExitOk;
  }
  std::string title = absl::AsciiStrToUpper(by == "none" ? std::string("fleet") : by);
  Table table({{title},
               {"JOBS", Align::kRight},
               {"GPU-H", Align::kRight},
               {"PRODUCTIVE", Align::kRight},
               {"IDLE GPUS", Align::kRight},
               {"SILENT", Align::kRight},
               {"HUNG", Align::kRight},
               {"JOB IDLE", Align::kRight},
               {"WARM-UP", Align::kRight},
               {"REGRESSION", Align::kRight},
               {"TRANSIENT", Align::kRight},
               {"BELOW BASELINE", Align::kRight},
               {"NO TELEMETRY", Align::kRight},
               {"KWH", Align::kRight},
               {"KG CO2E", Align::kRight},
               {"COST", Align::kRight}});
  auto row = [&](const std::string& name, const Group& g) {
    const core::JobLedger& l = g.ledger;
    auto h = [](double v) { return absl::StrFormat("%.2f", v); };
    table.AddRow({Printable(name), absl::StrCat(g.jobs), h(l.allocated_gpu_hours),
                  absl::StrCat(h(l.productive), " (",
                               Percent(l.allocated_gpu_hours > 0
                                           ? std::optional<double>(l.productive /
                                                                   l.allocated_gpu_hours)
                                           : std::nullopt),
                               ")"),
                  h(l.idle_gpus), h(l.silent_gpus), h(l.hung), h(l.job_idle), h(l.warmup),
                  h(l.regression), h(l.transient), h(l.below_workload_baseline),
                  h(l.no_telemetry), g.with_energy > 0 ? absl::StrFormat("%.1f", g.energy_kwh) : "-",
                  g.with_co2e > 0 ? absl::StrFormat("%.1f", g.co2e_kg) : "-", CostText(g.cost)});
  };
  for (const auto& [name, g] : groups) {
    if (g.jobs > 0) row(name, g);
  }
  if (groups.size() > 1) row("TOTAL", total);
  std::cout << "GPU-hours of the jobs that ended from " << FormatUtc(FromProto(range->start_time()))
            << " to " << FormatUtc(FromProto(range->end_time())) << " UTC, by cause\n"
            << table.Render();
  if (total.without_ledger > 0) {
    std::cout << total.without_ledger << " of " << total.jobs + total.without_ledger
              << " reports carry no ledger (made before ledgers were, or no window of the job "
                 "reached alerting)\n";
  }
  if (pending > 0) std::cout << pending << " ended jobs' reports are still being assembled\n";
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
      {.words = {"ledger"},
       .summary = "where the GPU-hours of ended jobs went, by cause, with their energy, "
                  "emissions and cost, summed by group",
       .details =
           "  --since D | --from T [--to T]   jobs that ended in this range (default 24h)\n"
           "  --group-by user|team|cluster|gpu-model|none   (default team)\n"
           "  --cluster C --user U --team T   only these jobs\n"
           "  --json                          {group_by, groups: [{name, jobs, jobs_without_ledger,\n"
           "                                  ledger, energy_kwh, jobs_with_energy, co2e_kg,\n"
           "                                  jobs_with_co2e, cost: {currency: amount}}], total,\n"
           "                                  pending_reports}\n"
           "  kWh, kg CO2e and cost are the reports' (alerting.reports.sites): over every report\n"
           "  of the group that has them, \"-\" when none has\n",
       .flags = {"since", "from", "to", "group-by", "cluster", "user", "team"},
       .run = Ledger},
  };
}

}  // namespace goodput::ctl
