// Alert commands (AlertService): alerts list|show|ack, alerts silence create|list|delete.
#include <cstdlib>
#include <iostream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "goodput/v1/alert.grpc.pb.h"
#include "tools/goodputctl/commands.h"
#include "tools/goodputctl/format.h"

namespace goodput::ctl {
namespace {

std::unique_ptr<v1::AlertService::Stub> AlertStub(const Args& args) {
  return v1::AlertService::NewStub(ChannelTo(args, Service::kAlerting));
}

template <class Enum>
absl::StatusOr<Enum> ParseEnum(absl::string_view flag, absl::string_view value,
                               absl::string_view prefix, bool (*parse)(const std::string&, Enum*),
                               absl::string_view choices) {
  Enum e{};
  std::string name = absl::StrCat(prefix, absl::AsciiStrToUpper(value));
  for (char& c : name) {
    if (c == '-') c = '_';
  }
  if (!parse(name, &e) || static_cast<int>(e) == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, ": \"", value, "\" is not one of ", choices));
  }
  return e;
}

bool ParseState(const std::string& n, v1::AlertState* e) { return v1::AlertState_Parse(n, e); }
bool ParseKind(const std::string& n, v1::AlertKind* e) { return v1::AlertKind_Parse(n, e); }
bool ParseSeverity(const std::string& n, v1::Severity* e) { return v1::Severity_Parse(n, e); }

constexpr char kStates[] = "firing, resolved, acknowledged, silenced";
constexpr char kKinds[] =
    "regression_in_job, regression_vs_workload, divergence, idle_gpus, straggler, "
    "telemetry_stopped, data_quality, gpu_fault, silent_gpu, hung, job_idle, platform_lagging";
constexpr char kSeverities[] = "info, warning, critical";

std::string JobText(const v1::JobKey& job) {
  if (job.job_id().empty()) return "(platform)";  // goodput's own alert, of no job
  return absl::StrCat(job.cluster(), "/", job.job_id());
}

// "cluster=eos", "kind!=straggler", "job_id=~42.*", "team!~ml-.*".
absl::StatusOr<v1::LabelMatcher> ParseMatcher(absl::string_view text) {
  struct Op {
    const char* token;
    v1::MatchOperator op;
  };
  // Longer operators first, so "=~" is not read as "=".
  static constexpr Op kOps[] = {{"!~", v1::MATCH_OPERATOR_NOT_REGEX},
                                {"=~", v1::MATCH_OPERATOR_REGEX},
                                {"!=", v1::MATCH_OPERATOR_NOT_EQUAL},
                                {"=", v1::MATCH_OPERATOR_EQUAL}};
  for (const Op& op : kOps) {
    size_t at = text.find(op.token);
    if (at == absl::string_view::npos) continue;
    if (at == 0) break;
    v1::LabelMatcher m;
    m.set_name(std::string(text.substr(0, at)));
    m.set_value(std::string(text.substr(at + std::string(op.token).size())));
    m.set_comparison(op.op);
    return m;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--match: \"", text, "\" is not LABEL=VALUE, LABEL!=VALUE, LABEL=~REGEX or LABEL!~REGEX"));
}

std::string MatcherText(const v1::LabelMatcher& m) {
  const char* op = "=";
  switch (m.comparison()) {
    case v1::MATCH_OPERATOR_NOT_EQUAL:
      op = "!=";
      break;
    case v1::MATCH_OPERATOR_REGEX:
      op = "=~";
      break;
    case v1::MATCH_OPERATOR_NOT_REGEX:
      op = "!~";
      break;
    default:
      break;
  }
  return absl::StrCat(m.name(), op, m.value());
}

int ListAlerts(const Args& args) {
  v1::ListAlertsRequest request;
  for (const std::string& s : args.Flags("state")) {
    auto state = ParseEnum<v1::AlertState>("state", s, "ALERT_STATE_", ParseState, kStates);
    if (!state.ok()) return UsageError(state.status().message());
    request.add_states(*state);
  }
  for (const std::string& k : args.Flags("kind")) {
    auto kind = ParseEnum<v1::AlertKind>("kind", k, "ALERT_KIND_", ParseKind, kKinds);
    if (!kind.ok()) return UsageError(kind.status().message());
    request.add_kinds(*kind);
  }
  if (auto s = args.Flag("severity")) {
    auto sev = ParseEnum<v1::Severity>("severity", *s, "SEVERITY_", ParseSeverity, kSeverities);
    if (!sev.ok()) return UsageError(sev.status().message());
    request.set_min_severity(*sev);
  }
  if (auto job = args.Flag("job")) {
    absl::StatusOr<std::pair<std::string, std::string>> ref = ParseJobRef(*job);
    if (!ref.ok()) return UsageError(absl::StrCat("--job: ", ref.status().message()));
    request.mutable_job()->set_cluster(ref->first);
    request.mutable_job()->set_job_id(ref->second);
  }
  request.set_cluster(args.Flag("cluster").value_or(""));
  for (const std::string& m : args.Flags("match")) {
    absl::StatusOr<v1::LabelMatcher> matcher = ParseMatcher(m);
    if (!matcher.ok()) return UsageError(matcher.status().message());
    *request.add_matchers() = *matcher;
  }
  int limit = 100;
  if (auto text = args.Flag("limit"); text && (!absl::SimpleAtoi(*text, &limit) || limit <= 0)) {
    return UsageError(absl::StrCat("--limit: \"", *text, "\" is not a positive number"));
  }
  auto stub = AlertStub(args);
  v1::ListAlertsResponse all;
  Progress progress(!args.json);
  while (all.alerts_size() < limit) {
    request.set_page_size(std::min(limit - all.alerts_size(), 1000));
    v1::ListAlertsResponse page;
    grpc::Status status = stub->ListAlerts(CallContext(args).get(), request, &page);
    if (!status.ok()) {
      return RpcFailure("alerts list", args, Service::kAlerting, "ListAlerts", status);
    }
    all.mutable_alerts()->MergeFrom(page.alerts());
    if (page.next_page_token().empty()) break;
    request.set_page_token(page.next_page_token());
    progress.Show(absl::StrCat("fetched ", all.alerts_size(), " alerts ..."));
  }
  progress.Done();
  if (args.json) {
    PrintJson(all);
    return kExitOk;
  }
  Table table({{"ID"}, {"STATE"}, {"SEVERITY"}, {"KIND"}, {"JOB"}, {"SINCE (UTC)"}, {"SUMMARY"}});
  for (const v1::Alert& a : all.alerts()) {
    table.AddRow({a.alert_id(), EnumShort(v1::AlertState_Name(a.state()), "ALERT_STATE_"),
                  EnumShort(v1::Severity_Name(a.severity()), "SEVERITY_"),
                  EnumShort(v1::AlertKind_Name(a.kind()), "ALERT_KIND_"), JobText(a.job()),
                  FormatUtc(FromProto(a.start_time())), a.summary()});
  }
  std::cout << table.Render() << all.alerts_size() << " alerts\n";
  return kExitOk;
}

void PrintAlert(const v1::Alert& a) {
  std::cout << "alert        " << a.alert_id() << "\n"
            << "summary      " << a.summary() << "\n"
            << "state        " << EnumShort(v1::AlertState_Name(a.state()), "ALERT_STATE_")
            << "   severity " << EnumShort(v1::Severity_Name(a.severity()), "SEVERITY_")
            << "   kind " << EnumShort(v1::AlertKind_Name(a.kind()), "ALERT_KIND_") << "\n"
            << "job          " << JobText(a.job()) << "\n"
            << "started      " << FormatUtc(FromProto(a.start_time()))
            << (a.has_end_time() ? "   resolved " + FormatUtc(FromProto(a.end_time())) : "")
            << "\n";
  if (!a.description().empty()) std::cout << "\n" << a.description() << "\n\n";
  const v1::AlertEvidence& e = a.evidence();
  if (!e.detector().empty()) {
    std::cout << "detector     " << e.detector() << " (confidence " << Percent(e.confidence(), 0)
              << ")\n";
  }
  if (e.has_before_ofu() || e.has_after_ofu()) {
    std::cout << "OFU          " << (e.has_before_ofu() ? Percent(e.before_ofu()) : "-") << " -> "
              << (e.has_after_ofu() ? Percent(e.after_ofu()) : "-")
              << (e.has_factor() ? absl::StrFormat("  (%.2fx)", e.factor()) : "") << "\n";
  }
  if (e.has_baseline_ofu()) {
    std::vector<std::string> jobs;
    for (const v1::JobKey& j : e.baseline_jobs()) jobs.push_back(JobText(j));
    std::cout << "baseline     " << Percent(e.baseline_ofu()) << " from "
              << absl::StrJoin(jobs, ", ") << "\n";
  }
  if (e.has_divergence() && e.divergence().verdict() != v1::VERDICT_UNSPECIFIED) {
    std::cout << "divergence   MFU/OFU " << absl::StrFormat("%.2f", e.divergence().ratio()) << ": "
              << e.divergence().reason() << "\n";
  }
  if (e.windows_size() > 0) {
    std::vector<double> series;
    double hi = 0;
    for (const v1::OfuWindow& w : e.windows()) {
      series.push_back(w.ofu());
      hi = std::max(hi, w.ofu());
    }
    std::cout << "windows      " << Sparkline(series, 0, hi > 0 ? hi : 1, 60) << "  (0 .. "
              << Percent(hi) << ")\n";
  }
  if (!e.likely_cause().empty())
    std::cout << "likely cause " << Printable(e.likely_cause()) << "\n";
  for (int i = 0; i < e.faults_size(); ++i) {
    std::cout << (i == 0 ? "GPU faults   " : "             ") << FaultEventLine(e.faults(i))
              << "\n";
  }
  if (a.has_acknowledgement()) {
    std::cout << "acknowledged by " << a.acknowledgement().by() << " at "
              << FormatUtc(FromProto(a.acknowledgement().time()))
              << (a.acknowledgement().comment().empty() ? "" : ": " + a.acknowledgement().comment())
              << "\n";
  }
  if (a.silence_ids_size() > 0) {
    std::cout << "silenced by  " << absl::StrJoin(a.silence_ids(), ", ") << "\n";
  }
  if (!a.dashboard_url().empty()) std::cout << "dashboard    " << a.dashboard_url() << "\n";
  if (a.deliveries_size() > 0) {
    Table table({{"TARGET"},
                 {"KIND"},
                 {"FOR"},
                 {"DELIVERY"},
                 {"ATTEMPTS", Align::kRight},
                 {"WHEN (UTC)"},
                 {"LAST ERROR"}});
    for (const v1::Delivery& d : a.deliveries()) {
      bool delivered = d.state() == v1::DELIVERY_STATE_DELIVERED;
      table.AddRow({d.target(),
                    d.target_kind() == v1::TARGET_KIND_UNSPECIFIED
                        ? "-"
                        : EnumShort(v1::TargetKind_Name(d.target_kind()), "TARGET_KIND_"),
                    EnumShort(v1::AlertState_Name(d.alert_state()), "ALERT_STATE_"),
                    EnumShort(v1::DeliveryState_Name(d.state()), "DELIVERY_STATE_"),
                    absl::StrCat(d.attempts()),
                    FormatUtc(FromProto(delivered ? d.delivered_time() : d.create_time())),
                    d.last_error().empty() ? "-" : d.last_error()});
    }
    std::cout << "\n" << table.Render();
  }
}

int ShowAlert(const Args& args) {
  std::string id = args.Word(2);
  if (id.empty()) return UsageError("alerts show needs an alert id (see goodputctl alerts list)");
  v1::GetAlertRequest request;
  request.set_alert_id(id);
  v1::GetAlertResponse response;
  grpc::Status status = AlertStub(args)->GetAlert(CallContext(args).get(), request, &response);
  if (!status.ok()) return RpcFailure("alerts show", args, Service::kAlerting, "GetAlert", status);
  if (args.json) {
    PrintJson(response.alert());
  } else {
    PrintAlert(response.alert());
  }
  return kExitOk;
}

std::string WhoAmI(const Args& args) {
  if (auto by = args.Flag("by")) return *by;
  for (const char* var : {"GOODPUT_USER", "USER", "LOGNAME"}) {
    if (const char* v = std::getenv(var); v != nullptr && *v != '\0') return v;
  }
  return "";
}

int AckAlert(const Args& args) {
  std::string id = args.Word(2);
  if (id.empty()) return UsageError("alerts ack needs an alert id (see goodputctl alerts list)");
  v1::AckAlertRequest request;
  request.set_alert_id(id);
  request.set_by(WhoAmI(args));
  if (request.by().empty()) return UsageError("alerts ack needs --by NAME (no $USER set)");
  request.set_comment(args.Flag("comment").value_or(""));
  v1::AckAlertResponse response;
  grpc::Status status = AlertStub(args)->AckAlert(CallContext(args).get(), request, &response);
  if (!status.ok()) return RpcFailure("alerts ack", args, Service::kAlerting, "AckAlert", status);
  if (args.json) {
    PrintJson(response.alert());
  } else {
    std::cout << "acknowledged " << id << " (" << response.alert().summary() << ") as "
              << request.by() << "\n";
  }
  return kExitOk;
}

int CreateSilence(const Args& args) {
  v1::CreateSilenceRequest request;
  v1::Silence* silence = request.mutable_silence();
  for (const std::string& m : args.Flags("match")) {
    absl::StatusOr<v1::LabelMatcher> matcher = ParseMatcher(m);
    if (!matcher.ok()) return UsageError(matcher.status().message());
    *silence->add_matchers() = *matcher;
  }
  if (auto job = args.Flag("job")) {
    absl::StatusOr<std::pair<std::string, std::string>> ref = ParseJobRef(*job);
    if (!ref.ok()) return UsageError(absl::StrCat("--job: ", ref.status().message()));
    for (auto [name, value] : {std::pair{"cluster", ref->first}, {"job_id", ref->second}}) {
      v1::LabelMatcher* m = silence->add_matchers();
      m->set_name(name);
      m->set_value(value);
      m->set_comparison(v1::MATCH_OPERATOR_EQUAL);
    }
  }
  if (silence->matchers_size() == 0) {
    return UsageError("alerts silence create needs --match LABEL=VALUE (repeatable) or --job");
  }
  const absl::Time now = absl::Now();
  absl::Time end;
  if (auto until = args.Flag("until")) {
    absl::StatusOr<absl::Time> t = ParseTimeFlag("until", *until, now);
    if (!t.ok()) return UsageError(t.status().message());
    end = *t;
  } else {
    absl::StatusOr<absl::Duration> d =
        ParseDurationFlag("duration", args.Flag("duration").value_or("2h"));
    if (!d.ok()) return UsageError(d.status().message());
    end = now + *d;
  }
  if (end <= now) return UsageError("--until: the silence would end before it starts");
  *silence->mutable_active()->mutable_end_time() = ToProto(end);
  silence->set_created_by(WhoAmI(args));
  silence->set_comment(args.Flag("comment").value_or(""));
  v1::CreateSilenceResponse response;
  grpc::Status status = AlertStub(args)->CreateSilence(CallContext(args).get(), request, &response);
  if (!status.ok()) {
    return RpcFailure("alerts silence create", args, Service::kAlerting, "CreateSilence", status);
  }
  if (args.json) {
    PrintJson(response.silence());
  } else {
    std::vector<std::string> matchers;
    for (const v1::LabelMatcher& m : response.silence().matchers())
      matchers.push_back(MatcherText(m));
    std::cout << "silence " << response.silence().silence_id() << " until "
              << FormatUtc(FromProto(response.silence().active().end_time()))
              << " UTC: " << absl::StrJoin(matchers, " ") << "\n";
  }
  return kExitOk;
}

int ListSilences(const Args& args) {
  v1::ListSilencesRequest request;
  request.set_include_expired(args.Has("all"));
  request.set_page_size(1000);
  auto stub = AlertStub(args);
  v1::ListSilencesResponse all;
  while (true) {
    v1::ListSilencesResponse page;
    grpc::Status status = stub->ListSilences(CallContext(args).get(), request, &page);
    if (!status.ok()) {
      return RpcFailure("alerts silence list", args, Service::kAlerting, "ListSilences", status);
    }
    all.mutable_silences()->MergeFrom(page.silences());
    if (page.next_page_token().empty()) break;
    request.set_page_token(page.next_page_token());
  }
  if (args.json) {
    PrintJson(all);
    return kExitOk;
  }
  Table table({{"ID"}, {"MATCHERS"}, {"UNTIL (UTC)"}, {"STATE"}, {"BY"}, {"COMMENT"}});
  for (const v1::Silence& s : all.silences()) {
    std::vector<std::string> matchers;
    for (const v1::LabelMatcher& m : s.matchers()) matchers.push_back(MatcherText(m));
    table.AddRow({s.silence_id(), absl::StrJoin(matchers, " "),
                  FormatUtc(FromProto(s.active().end_time())), s.expired() ? "expired" : "active",
                  s.created_by().empty() ? "-" : s.created_by(),
                  s.comment().empty() ? "-" : s.comment()});
  }
  std::cout << table.Render() << all.silences_size() << " silences\n";
  return kExitOk;
}

int DeleteSilence(const Args& args) {
  std::string id = args.Word(3);
  if (id.empty()) return UsageError("alerts silence delete needs a silence id");
  v1::DeleteSilenceRequest request;
  request.set_silence_id(id);
  v1::DeleteSilenceResponse response;
  grpc::Status status = AlertStub(args)->DeleteSilence(CallContext(args).get(), request, &response);
  if (!status.ok()) {
    return RpcFailure("alerts silence delete", args, Service::kAlerting, "DeleteSilence", status);
  }
  if (args.json) {
    PrintJson(response.silence());
  } else {
    std::cout << "silence " << id << " ended\n";
  }
  return kExitOk;
}

}  // namespace

std::vector<Command> AlertCommands() {
  return {
      {.words = {"alerts", "list"},
       .summary = "alerts, most recently changed first",
       .details = "  --state S        firing|resolved|acknowledged|silenced (repeatable)\n"
                  "  --kind K         regression_in_job|regression_vs_workload|divergence|\n"
                  "                   idle_gpus|straggler|telemetry_stopped|data_quality "
                  "(repeatable)\n"
                  "  --severity S     at least info|warning|critical\n"
                  "  --job CLUSTER/JOB_ID  --cluster C\n"
                  "  --match L=V      label matcher, also L!=V, L=~RE, L!~RE (repeatable)\n"
                  "  --limit N        at most N alerts [100]\n",
       .flags = {"state", "kind", "severity", "job", "cluster", "match", "limit"},
       .run = ListAlerts},
      {.words = {"alerts", "show"},
       .arguments = "ALERT_ID",
       .summary = "one alert with its evidence and deliveries",
       .run = ShowAlert},
      {.words = {"alerts", "ack"},
       .arguments = "ALERT_ID",
       .summary = "acknowledge a firing alert: it stays open and is not notified again",
       .details = "  --by NAME        who acknowledges [$USER]\n"
                  "  --comment TEXT   why, or what is being done\n",
       .flags = {"by", "comment"},
       .run = AckAlert},
      {.words = {"alerts", "silence", "create"},
       .summary = "stop delivering alerts that match, for a while",
       .details = "  --match L=V      label matcher, also L!=V, L=~RE, L!~RE (repeatable)\n"
                  "  --job CLUSTER/JOB_ID   shorthand for cluster= and job_id= matchers\n"
                  "  --duration D | --until T   how long [2h]\n"
                  "  --by NAME --comment TEXT\n",
       .flags = {"match", "job", "duration", "until", "by", "comment"},
       .run = CreateSilence},
      {.words = {"alerts", "silence", "list"},
       .summary = "silences, newest first",
       .details = "  --all            also expired ones\n",
       .flags = {"all"},
       .run = ListSilences},
      {.words = {"alerts", "silence", "delete"},
       .arguments = "SILENCE_ID",
       .summary = "end a silence now",
       .run = DeleteSilence},
  };
}

}  // namespace goodput::ctl
