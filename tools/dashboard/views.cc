#include "tools/dashboard/views.h"

#include <map>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "services/api/api_convert.h"

namespace goodput::dashboard {
namespace {

template <typename T>
Json Optional(bool present, T value) {
  return present ? Json(value) : Json(nullptr);
}

Json Available() { return Json{{"available", true}}; }

}  // namespace

std::string EnumShortName(absl::string_view full_name, absl::string_view prefix) {
  absl::string_view name = full_name;
  absl::ConsumePrefix(&name, prefix);
  return absl::AsciiStrToLower(name);
}

std::string GpuLabel(const v1::GpuRef& gpu) {
  std::string label = gpu.host();
  if (gpu.has_gpu_index()) {
    absl::StrAppend(&label, ":", gpu.gpu_index());
  } else if (!gpu.uuid().empty()) {
    absl::StrAppend(&label, ":", gpu.uuid());
  }
  if (gpu.has_mig()) absl::StrAppend(&label, "/mig", gpu.mig().gpu_instance_id());
  return label;
}

Json TimeMs(const google::protobuf::Timestamp& t) {
  if (t.seconds() == 0 && t.nanos() == 0) return nullptr;
  return api::TimestampToUnixMs(t);
}

Json UnavailableSection(const grpc::Status& status) {
  return Json{{"available", false},
              {"not_built", status.error_code() == grpc::StatusCode::UNIMPLEMENTED},
              {"message", status.error_message()}};
}

Json FleetGroupJson(const v1::FleetGroup& group) {
  std::vector<double> deciles(group.gpu_hours_by_ofu_decile().begin(),
                              group.gpu_hours_by_ofu_decile().end());
  deciles.resize(10, 0.0);
  return Json{{"cluster", group.cluster()},
              {"gpu_model", group.gpu_model()},
              {"user", group.user()},
              {"team", group.team()},
              {"job_count", group.job_count()},
              {"gpu_hours", group.gpu_hours()},
              {"effective_gpu_hours", group.effective_gpu_hours()},
              {"wasted_gpu_hours", std::max(0.0, group.gpu_hours() - group.effective_gpu_hours())},
              {"ofu_mean", group.ofu_mean()},
              {"idle_gpu_hours", group.idle_gpu_hours()},
              {"low_efficiency_gpu_hours", group.low_efficiency_gpu_hours()},
              {"gpu_hours_by_ofu_decile", deciles}};
}

Json JobRowJson(const v1::Job& job) {
  return Json{{"cluster", job.key().cluster()},
              {"job_id", job.key().job_id()},
              {"name", job.name()},
              {"user", job.user()},
              {"team", job.team()},
              {"scheduler", api::SchedulerKindName(job.scheduler())},
              {"state", api::JobStateName(job.state())},
              {"gpu_model", job.gpu_model()},
              {"gpu_count", job.gpu_count()},
              {"workload_fingerprint", job.workload_fingerprint()},
              {"workload_kind", api::WorkloadKindName(job.workload_kind())},
              {"workload_kind_source", api::WorkloadKindSourceName(job.workload_kind_source())},
              {"start_ms", TimeMs(job.start_time())},
              {"end_ms", TimeMs(job.end_time())},
              {"ofu", nullptr},
              {"steady_state_ofu", nullptr},
              {"latest_ofu", nullptr},
              {"gpu_hours", nullptr},
              {"wasted_gpu_hours", nullptr},
              {"open_alerts", nullptr}};
}

Json OfuPointJson(const v1::OfuWindow& w) {
  return Json{{"start_ms", TimeMs(w.start_time())},
              {"end_ms", TimeMs(w.end_time())},
              {"ofu", w.ofu()},
              {"ofu_ci95_low", w.ofu_ci95_low()},
              {"ofu_ci95_high", w.ofu_ci95_high()},
              {"gpu_coverage", w.gpu_coverage()},
              {"gpus_reporting", w.gpus_reporting()},
              {"gpus_allocated", w.gpus_allocated()},
              {"warmup", w.warmup()}};
}

Json JobOfuJson(const v1::GetJobOfuResponse& response) {
  Json out = Available();
  out["effective_window_s"] = response.effective_window_s();
  Json windows = Json::array();
  for (const v1::OfuWindow& w : response.windows()) windows.push_back(OfuPointJson(w));
  out["windows"] = std::move(windows);
  // Per-GPU windows come ordered by time then GPU; regroup them into one series per GPU.
  std::map<std::string, Json> series;
  for (const v1::OfuWindow& w : response.gpu_windows()) {
    Json& points = series[GpuLabel(w.gpu())];
    if (points.is_null()) points = Json::array();
    points.push_back(Json{
        {"start_ms", TimeMs(w.start_time())}, {"end_ms", TimeMs(w.end_time())}, {"ofu", w.ofu()}});
  }
  Json gpus = Json::array();
  for (auto& [label, points] : series) {
    gpus.push_back(Json{{"gpu", label}, {"points", std::move(points)}});
  }
  out["gpus"] = std::move(gpus);
  return out;
}

Json JobSummaryJson(const v1::JobOfuSummary& s) {
  Json out = Available();
  out["ofu"] = s.ofu();
  out["ofu_ci95_low"] = s.ofu_ci95_low();
  out["ofu_ci95_high"] = s.ofu_ci95_high();
  out["steady_state_ofu"] = Optional(s.has_steady_state_ofu(), s.steady_state_ofu());
  out["gpu_hours"] = s.gpu_hours();
  out["effective_gpu_hours"] = s.effective_gpu_hours();
  out["idle_gpu_hours"] = s.idle_gpu_hours();
  out["gpu_coverage"] = s.gpu_coverage();
  out["sample_count"] = s.sample_count();
  out["finalized"] = s.finalized();
  out["roofline_class"] =
      s.roofline_class() == v1::ROOFLINE_CLASS_UNSPECIFIED
          ? ""
          : EnumShortName(v1::RooflineClass_Name(s.roofline_class()), "ROOFLINE_CLASS_");
  Json stragglers = Json::array();
  for (const v1::Straggler& st : s.stragglers()) {
    stragglers.push_back(
        Json{{"gpu", GpuLabel(st.gpu())}, {"ofu", st.ofu()}, {"score", st.score()}});
  }
  out["stragglers"] = std::move(stragglers);
  Json idle = Json::array();
  for (const v1::GpuRef& g : s.idle_gpus()) idle.push_back(GpuLabel(g));
  out["idle_gpus"] = std::move(idle);
  Json flags = Json::array();
  for (int f : s.flags()) {
    flags.push_back(EnumShortName(v1::DataQualityFlag_Name(f), "DATA_QUALITY_FLAG_"));
  }
  out["flags"] = std::move(flags);
  return out;
}

Json ReconciliationJson(const v1::GetReconciliationResponse& r) {
  Json out = Available();
  if (r.has_verdict()) {
    const v1::Divergence& v = r.verdict();
    Json causes = Json::array();
    for (const v1::CauseFit& c : v.causes()) {
      causes.push_back(
          Json{{"cause", EnumShortName(v1::DivergenceCause_Name(c.cause()), "DIVERGENCE_CAUSE_")},
               {"explanation", c.explanation()},
               {"fit_score", c.fit_score()}});
    }
    out["verdict"] = Json{{"verdict", EnumShortName(v1::Verdict_Name(v.verdict()), "VERDICT_")},
                          {"ratio", v.ratio()},
                          {"ratio_ci95_low", v.ratio_ci95_low()},
                          {"ratio_ci95_high", v.ratio_ci95_high()},
                          {"correction_factor", v.correction_factor()},
                          {"confidence", v.confidence()},
                          {"app_mfu_mean", v.app_mfu_mean()},
                          {"ofu_mean", v.ofu_mean()},
                          {"windows_used", v.windows_used()},
                          {"reason", v.reason()},
                          {"causes", std::move(causes)}};
  }
  Json points = Json::array();
  for (const v1::ReconciliationPoint& p : r.points()) {
    points.push_back(Json{{"start_ms", TimeMs(p.interval().start_time())},
                          {"end_ms", TimeMs(p.interval().end_time())},
                          {"app_mfu", Optional(p.has_app_mfu(), p.app_mfu())},
                          {"ofu", Optional(p.has_ofu(), p.ofu())},
                          {"difference_pp", Optional(p.has_difference_pp(), p.difference_pp())}});
  }
  out["points"] = std::move(points);
  out["framework"] = r.framework();
  out["framework_version"] = r.framework_version();
  out["flops_formula"] = r.flops_formula();
  return out;
}

Json AlertJson(const v1::Alert& a) {
  const v1::AlertEvidence& e = a.evidence();
  int delivered = 0;
  for (const v1::Delivery& d : a.deliveries()) {
    if (d.state() == v1::DELIVERY_STATE_DELIVERED) ++delivered;
  }
  return Json{{"alert_id", a.alert_id()},
              {"kind", EnumShortName(v1::AlertKind_Name(a.kind()), "ALERT_KIND_")},
              {"state", EnumShortName(v1::AlertState_Name(a.state()), "ALERT_STATE_")},
              {"severity", EnumShortName(v1::Severity_Name(a.severity()), "SEVERITY_")},
              {"cluster", a.job().cluster()},
              {"job_id", a.job().job_id()},
              {"summary", a.summary()},
              {"description", a.description()},
              {"start_ms", TimeMs(a.start_time())},
              {"end_ms", TimeMs(a.end_time())},
              {"update_ms", TimeMs(a.update_time())},
              {"detector", e.detector()},
              {"confidence", a.has_evidence() ? Json(e.confidence()) : Json(nullptr)},
              {"onset_ms", TimeMs(e.onset_time())},
              {"condition_end_ms", TimeMs(e.condition_end_time())},
              {"found_after_job_end", a.found_after_job_end()},
              {"before_ofu", Optional(e.has_before_ofu(), e.before_ofu())},
              {"after_ofu", Optional(e.has_after_ofu(), e.after_ofu())},
              {"factor", Optional(e.has_factor(), e.factor())},
              {"baseline_ofu", Optional(e.has_baseline_ofu(), e.baseline_ofu())},
              {"likely_cause", e.likely_cause()},
              {"gpu_faults", e.faults_size()},
              {"deliveries", a.deliveries_size()},
              {"delivered", delivered}};
}

std::string DumpJson(const Json& value) {
  // Names come from schedulers and users; never fail on bytes that are not UTF-8.
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string SseMessage(absl::string_view event, const Json& data) {
  // dump() escapes newlines inside strings, so the payload is a single data line.
  return absl::StrCat("event: ", event, "\ndata: ", DumpJson(data), "\n\n");
}

}  // namespace goodput::dashboard
