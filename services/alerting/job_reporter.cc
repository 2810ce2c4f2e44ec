#include "services/alerting/job_reporter.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "services/alerting/gpu_fault_findings.h"
#include "services/alerting/gpu_fault_store.h"
#include "services/alerting/outbox.h"
#include "services/alerting/targets/slurm_target.h"
#include "services/api/api_convert.h"
#include "services/api/job_report.h"
#include "services/detect/robust_stats.h"
#include "services/platform/grpc_client.h"
#include "services/platform/status_convert.h"

namespace goodput::alerting {
namespace {

bool IsRegression(v1::AlertKind kind) {
  return kind == v1::ALERT_KIND_REGRESSION_IN_JOB || kind == v1::ALERT_KIND_REGRESSION_VS_WORKLOAD;
}

std::string Fnv1a64Hex(const std::string& bytes) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return absl::StrFormat("%016x-%d", h, bytes.size());
}

std::string Deterministic(const google::protobuf::Message& m) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    m.SerializeToCodedStream(&coded);
  }
  return out;
}

// Fault events a report lists (its summary counts them all).
constexpr int kMaxReportFaults = 1000;
// Earlier jobs of a workload its energy baseline is the median of (the most recent).
constexpr int kWorkloadEnergyJobs = 10;

// The GPU-fault advice, first when the job met a fault that alerts by itself (an XID, ECC or
// row-remap fault; gpu_fault_findings.h): the failure's likely cause, or the worst fault, with
// the catalog's recommended action.
std::optional<std::string> FaultAdvice(const v1::JobReport& report,
                                       const std::optional<FaultObs>& failure_fault) {
  std::vector<FaultObs> alerting;
  for (const v1::FaultEvent& e : report.faults()) {
    FaultObs f = FaultObsFromProto(e);
    if (FaultAlertSeverity(f)) alerting.push_back(std::move(f));
  }
  if (alerting.empty()) return std::nullopt;
  std::vector<Finding> per_gpu = GpuFaultFindings(alerting);
  const FaultObs& worst = per_gpu.front().faults.front();
  std::string text =
      report.failure_cause().empty()
          ? absl::StrCat("The job met ", FaultWhat(worst), " on GPU ", FaultGpuName(worst))
          : absl::StrCat("The job's failure is likely due to ", report.failure_cause());
  absl::StrAppend(&text,
                  per_gpu.size() > 1 ? absl::StrCat(" (faults on ", per_gpu.size(), " GPUs)") : "",
                  ". ");
  const FaultObs& cause = failure_fault ? *failure_fault : worst;
  const std::string blame = FaultBlame(cause);
  if (blame == "application") {
    absl::StrAppend(&text,
                    "It is the application's fault: fix the code (an illegal memory access or "
                    "engine exception) before running it again.");
  } else {
    absl::StrAppend(&text,
                    "It is a hardware or driver fault, not the job's: report the node to the "
                    "operators and run again on other nodes.");
  }
  return text;
}

}  // namespace

JobReporter::JobReporter(ReportStore* store, const core::GpuCatalog* catalog,
                         std::shared_ptr<v1::OfuService::StubInterface> ofu,
                         std::shared_ptr<v1::MfuService::StubInterface> mfu, AlertLister alerts,
                         ReporterOptions options, std::function<void()> on_enqueued,
                         platform::Logger logger)
    : store_(store),
      catalog_(catalog),
      ofu_(std::move(ofu)),
      mfu_(std::move(mfu)),
      alerts_(std::move(alerts)),
      options_(std::move(options)),
      on_enqueued_(std::move(on_enqueued)),
      logger_(std::move(logger)) {}

JobReporter::~JobReporter() { Stop(); }

bool JobReporter::Request(pqxx::work& tx, const std::string& cluster,
                          const std::string& job_id) const {
  return ReportStore::Request(tx, cluster, job_id, options_.revise_for);
}

void JobReporter::Start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] { Run(); });
}

void JobReporter::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void JobReporter::Wake() {
  absl::MutexLock lock(&mu_);
  ++wakes_;
}

void JobReporter::Run() {
  while (true) {
    int64_t seen = 0;
    {
      absl::MutexLock lock(&mu_);
      if (stop_) return;
      seen = wakes_;
    }
    absl::StatusOr<int> written = RunOnce();
    if (!written.ok()) {
      logger_.Warn("job reports: answering the requests failed; trying again later",
                   {{"error", written.status().ToString()}});
    }
    // Until woken, or until the next request is due (a retry), at most idle_check.
    absl::Duration wait = options_.idle_check;
    if (absl::StatusOr<std::optional<absl::Time>> next = store_->NextDue();
        next.ok() && next->has_value()) {
      wait = std::clamp(**next - absl::Now(), absl::ZeroDuration(), options_.idle_check);
    }
    absl::MutexLock lock(&mu_);
    auto woken = [this, seen]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stop_ || wakes_ != seen; };
    if (wait > absl::ZeroDuration()) mu_.AwaitWithTimeout(absl::Condition(&woken), wait);
    if (stop_) return;
  }
}

const AdminCommentRoute* JobReporter::RouteFor(const std::string& cluster) const {
  for (const AdminCommentRoute& r : options_.admin_comment_routes) {
    if (r.cluster == cluster) return &r;
  }
  return nullptr;
}

std::string JobReporter::ContentHash(const v1::JobReport& report) {
  v1::JobReport copy = report;
  copy.mutable_summary()->set_revision(0);
  copy.clear_generate_time();
  copy.clear_admin_comment();
  copy.clear_admin_comment_status();
  return Fnv1a64Hex(Deterministic(copy));
}

absl::StatusOr<v1::JobReport> JobReporter::Assemble(const std::string& cluster,
                                                    const std::string& job_id, int32_t revision) {
  absl::StatusOr<ReportJobInfo> info = store_->JobInfo(cluster, job_id);
  if (!info.ok()) return info.status();
  v1::JobReport report;
  *report.mutable_job() = info->job;

  v1::GetJobSummaryRequest summary_request;
  summary_request.mutable_job()->set_cluster(cluster);
  summary_request.mutable_job()->set_job_id(job_id);
  v1::GetJobSummaryResponse summary_response;
  {
    grpc::ClientContext ctx;
    platform::PrepareClientContext(&ctx, options_.rpc_timeout, options_.token);
    const grpc::Status status = ofu_->GetJobSummary(&ctx, summary_request, &summary_response);
    if (!status.ok()) {
      // Whatever ofu answers (down, or the job not known to it yet), the request is retried.
      return absl::UnavailableError(absl::StrCat("ofu GetJobSummary at ", options_.ofu_address,
                                                 ": ", status.error_message()));
    }
  }
  const v1::JobOfuSummary& ofu = summary_response.summary();
  *report.mutable_ofu() = ofu;
  report.set_final(ofu.finalized());

  const v1::JobKey& key = summary_request.job();
  if (mfu_ == nullptr) {
    report.set_reconciliation_note("mfu is not configured (alerting.reports.mfu_address)");
  } else {
    grpc::ClientContext ctx;
    platform::PrepareClientContext(&ctx, options_.rpc_timeout, options_.token);
    v1::GetReconciliationRequest request;
    *request.mutable_job() = key;
    v1::GetReconciliationResponse response;
    const grpc::Status status = mfu_->GetReconciliation(&ctx, request, &response);
    if (status.error_code() == grpc::StatusCode::NOT_FOUND ||
        (status.ok() && response.verdict().verdict() == v1::VERDICT_UNSPECIFIED)) {
      report.set_reconciliation_note("no framework MFU reports");
    } else if (!status.ok()) {
      // A part that cannot be read now is retried at the next pass: no report is stored
      // without it, so it cannot be taken for "no reports".
      return absl::UnavailableError(
          absl::StrCat("mfu GetReconciliation: ", status.error_message()));
    } else {
      *report.mutable_reconciliation() = response.verdict();
    }
  }

  int regressions = 0;
  {
    std::string page_token;
    std::vector<v1::ReportAlert> alerts;
    const int64_t end_ms =
        info->job.has_end_time() ? api::TimestampToUnixMs(info->job.end_time()) : INT64_MAX;
    do {
      v1::ListAlertsRequest request;
      *request.mutable_job() = key;
      request.set_page_size(1000);
      request.set_page_token(page_token);
      absl::StatusOr<v1::ListAlertsResponse> response = alerts_(request);
      if (!response.ok()) {
        return absl::UnavailableError(
            absl::StrCat("alerts of the job: ", response.status().message()));
      }
      for (const v1::Alert& a : response->alerts()) {
        v1::ReportAlert r;
        r.set_alert_id(a.alert_id());
        r.set_kind(a.kind());
        r.set_severity(a.severity());
        r.set_state(a.state());
        r.set_summary(a.summary());
        *r.mutable_start_time() = a.start_time();
        // Alerting marks what it confirmed from data evaluated after the end (its start time
        // is then the data time it was confirmed at, within the job).
        r.set_after_job_end(a.found_after_job_end() ||
                            api::TimestampToUnixMs(a.start_time()) > end_ms);
        r.set_likely_cause(a.evidence().likely_cause());
        if (IsRegression(a.kind())) ++regressions;
        alerts.push_back(std::move(r));
      }
      page_token = response->next_page_token();
    } while (!page_token.empty());
    std::sort(alerts.begin(), alerts.end(), [](const v1::ReportAlert& a, const v1::ReportAlert& b) {
      const int64_t ta = api::TimestampToUnixMs(a.start_time());
      const int64_t tb = api::TimestampToUnixMs(b.start_time());
      return ta != tb ? ta < tb : a.alert_id() < b.alert_id();
    });
    for (v1::ReportAlert& a : alerts) *report.add_alerts() = std::move(a);
  }
  if (policy_actions_) {
    v1::ListPolicyActionsRequest request;
    *request.mutable_job() = key;
    request.set_page_size(1000);
    absl::StatusOr<v1::ListPolicyActionsResponse> actions = policy_actions_(request);
    if (!actions.ok()) {
      return absl::UnavailableError(
          absl::StrCat("policy actions of the job: ", actions.status().message()));
    }
    // Listed newest first; the report reads oldest first.
    for (auto it = actions->actions().rbegin(); it != actions->actions().rend(); ++it) {
      *report.add_policy_actions() = *it;
    }
  }

  // Every GPU fault the job met, from ofu (paged), and the likely cause of a failure.
  std::optional<FaultObs> failure_fault;
  {
    std::string page_token;
    do {
      v1::ListFaultEventsRequest request;
      *request.mutable_job() = key;
      request.set_page_size(kMaxReportFaults);
      request.set_page_token(page_token);
      v1::ListFaultEventsResponse response;
      grpc::ClientContext ctx;
      platform::PrepareClientContext(&ctx, options_.rpc_timeout, options_.token);
      const grpc::Status status = ofu_->ListFaultEvents(&ctx, request, &response);
      if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
        // An ofu older than fault events (a rolling upgrade): the report goes without them.
        logger_.Warn("job report without GPU faults: ofu does not serve ListFaultEvents",
                     {{"cluster", cluster}, {"job_id", job_id}});
        break;
      }
      if (!status.ok()) {
        return absl::UnavailableError(absl::StrCat("ofu ListFaultEvents at ", options_.ofu_address,
                                                   ": ", status.error_message()));
      }
      for (const v1::FaultEvent& e : response.events()) {
        if (report.faults_size() < kMaxReportFaults) *report.add_faults() = e;
      }
      page_token = response.next_page_token();
    } while (!page_token.empty() && report.faults_size() < kMaxReportFaults);
    const v1::JobState state = info->job.state();
    if ((state == v1::JOB_STATE_FAILED || state == v1::JOB_STATE_TIMED_OUT) &&
        info->job.has_end_time() && report.faults_size() > 0) {
      const int64_t end_ms = api::TimestampToUnixMs(info->job.end_time());
      const int64_t end_s = end_ms / 1000;
      std::vector<FaultObs> faults;
      for (const v1::FaultEvent& e : report.faults()) faults.push_back(FaultObsFromProto(e));
      if (report.faults_size() >= kMaxReportFaults) {
        // The list stops at its first 1000: ask for the ones before the end.
        v1::ListFaultEventsRequest request;
        *request.mutable_job() = key;
        *request.mutable_range()->mutable_start_time() =
            api::UnixMsToTimestamp(end_ms - options_.fault_correlation_window_s * 1000);
        *request.mutable_range()->mutable_end_time() = api::UnixMsToTimestamp(end_ms + 1000);
        request.set_page_size(kMaxReportFaults);
        v1::ListFaultEventsResponse response;
        grpc::ClientContext ctx;
        platform::PrepareClientContext(&ctx, options_.rpc_timeout, options_.token);
        const grpc::Status status = ofu_->ListFaultEvents(&ctx, request, &response);
        if (!status.ok()) {
          return absl::UnavailableError(absl::StrCat(
              "ofu ListFaultEvents at ", options_.ofu_address, ": ", status.error_message()));
        }
        faults.clear();
        for (const v1::FaultEvent& e : response.events()) faults.push_back(FaultObsFromProto(e));
      }
      std::vector<FaultObs> before =
          FaultsBeforeEnd(faults, end_s, options_.fault_correlation_window_s);
      if (!before.empty()) {
        failure_fault = before.front();
        report.set_failure_cause(LikelyCause(before.front(), end_s, end_s, "the job ended"));
      }
    }
  }

  if (info->serving) {
    const ServingTotals& t = *info->serving;
    v1::ServingReport& r = *report.mutable_serving();
    r.set_engines(t.engines);
    r.set_models(t.models);
    r.set_prompt_tokens(t.prompt_tokens);
    r.set_generation_tokens(t.generation_tokens);
    r.set_requests(t.requests);
    r.set_served_s(t.served_s);
    const double tokens = t.prompt_tokens + t.generation_tokens;
    if (t.served_s > 0) r.set_tokens_per_s(tokens / t.served_s);
    if (ofu.has_energy_j() && ofu.energy_j() > 0 && tokens > 0) {
      r.set_joules_per_token(ofu.energy_j() / tokens);
      r.set_tokens_per_kwh(tokens / (ofu.energy_j() / 3.6e6));
    }
    if (t.has_flops && t.served_s > 0) {
      const double engine_tflops = t.flops_per_gpu / t.served_s / 1e12;
      r.set_engine_tflops_per_gpu(engine_tflops);
      const std::string model = ofu.gpu_model().empty() ? info->job.gpu_model() : ofu.gpu_model();
      absl::StatusOr<const core::GpuSpec*> spec = catalog_->Find(model);
      if (spec.ok() && ofu.ofu_unavailable_reason().empty() && ofu.ofu() > 0) {
        absl::StatusOr<double> peak = (*spec)->PeakTflops(core::Precision::kBf16);
        if (peak.ok() && *peak > 0) {
          r.set_engine_flops_to_ofu_ratio(engine_tflops / (ofu.ofu() * *peak));
        }
      }
    }
  }

  v1::ReportSummary& s = *report.mutable_summary();
  s.set_version(1);
  *s.mutable_job() = key;
  s.set_user(info->job.user());
  s.set_team(info->job.team());
  s.set_gpu_model(ofu.gpu_model().empty() ? info->job.gpu_model() : ofu.gpu_model());
  s.set_gpus_allocated(ofu.gpus_allocated() > 0 ? ofu.gpus_allocated() : info->job.gpu_count());
  s.set_revision(revision);
  s.set_state(info->job.state());
  if (ofu.ofu_unavailable_reason().empty() && ofu.sample_count() > 0) {
    s.set_ofu(ofu.ofu());
    s.set_ofu_ci95_low(ofu.ofu_ci95_low());
    s.set_ofu_ci95_high(ofu.ofu_ci95_high());
    if (ofu.has_steady_state_ofu()) s.set_steady_state_ofu(ofu.steady_state_ofu());
  }
  s.set_gpu_coverage(ofu.gpu_coverage());
  s.set_gpu_hours(ofu.gpu_hours());
  s.set_effective_gpu_hours(ofu.effective_gpu_hours());
  s.set_idle_gpu_hours(ofu.idle_gpu_hours());
  s.set_wasted_gpu_hours(std::max(0.0, ofu.gpu_hours() - ofu.effective_gpu_hours()));
  s.set_idle_gpu_count(ofu.idle_gpus_size());
  s.set_straggler_count(ofu.stragglers_size());
  if (ofu.has_hbm_peak_fraction()) s.set_hbm_peak_fraction(ofu.hbm_peak_fraction());
  if (absl::StatusOr<const core::GpuSpec*> spec = catalog_->Find(s.gpu_model());
      spec.ok() && (*spec)->hbm_capacity_gib > 0) {
    s.set_hbm_capacity_gib((*spec)->hbm_capacity_gib);
    report.set_hbm_capacity_gib((*spec)->hbm_capacity_gib);
  }
  if (ofu.has_energy_j()) {
    s.set_energy_kwh(ofu.energy_j() / 3.6e6);
    s.set_energy_estimated(std::find(ofu.flags().begin(), ofu.flags().end(),
                                     v1::DATA_QUALITY_FLAG_ENERGY_ESTIMATED) != ofu.flags().end());
  }
  s.set_roofline_class(ofu.roofline_class());
  // Only the flags that change what the job's figures mean, with how much of it they touch.
  const std::vector<api::JobCaveat> caveats = api::JobCaveats(ofu);
  for (const api::JobCaveat& c : caveats) s.add_flags(c.flag);
  if (report.has_reconciliation()) {
    s.set_mfu_verdict(report.reconciliation().verdict());
    if (report.reconciliation().windows_used() > 0) {
      s.set_mfu_ofu_ratio(report.reconciliation().ratio());
    }
  }
  if (ledger_) {
    absl::StatusOr<std::optional<core::JobLedger>> ledger =
        ledger_(cluster, job_id, s.gpus_allocated());
    if (!ledger.ok()) {
      return absl::UnavailableError(absl::StrCat("job ledger: ", ledger.status().message()));
    }
    if (ledger->has_value()) {
      *s.mutable_ledger() = api::LedgerToProto(**ledger);
      for (const core::LedgerTransient& t : (*ledger)->transients) {
        *report.add_transient_slowdowns() = api::TransientToProto(t);
      }
    }
  }
  // Joules per PFLOP of tensor work, as the hardware did it and as the framework counts it.
  if (ofu.has_energy_j() && ofu.energy_j() > 0 && ofu.effective_gpu_hours() > 0 &&
      ofu.ofu_unavailable_reason().empty()) {
    if (absl::StatusOr<const core::GpuSpec*> spec = catalog_->Find(s.gpu_model()); spec.ok()) {
      absl::StatusOr<double> peak = (*spec)->PeakTflops(core::Precision::kBf16);
      if (peak.ok() && *peak > 0) {
        const double pflop = ofu.effective_gpu_hours() * 3600.0 * *peak / 1000.0;
        s.set_joules_per_pflop(ofu.energy_j() / pflop);
        if (s.has_mfu_ofu_ratio() && s.mfu_ofu_ratio() > 0) {
          // A framework that counts only its busy GPUs did the same work the hardware did.
          double ratio = s.mfu_ofu_ratio();
          if (api::MfuGapIsTheIdleGpus(s)) {
            ratio *= static_cast<double>(s.gpus_allocated() - s.idle_gpu_count()) /
                     static_cast<double>(s.gpus_allocated());
          }
          s.set_framework_joules_per_pflop(s.joules_per_pflop() / ratio);
        }
      }
    }
  }
  // Carbon and cost at the rates of the job's site.
  if (const core::SiteRates* rates = core::RatesFor(options_.sites, cluster)) {
    const core::CarbonCost c = core::ComputeCarbonCost(
        *rates, s.gpu_hours(),
        s.has_energy_kwh() ? std::optional<double>(s.energy_kwh()) : std::nullopt,
        s.energy_estimated());
    if (c.facility_kwh) s.set_facility_energy_kwh(*c.facility_kwh);
    if (c.co2e_kg) s.set_co2e_kg(*c.co2e_kg);
    if (c.cost) s.set_cost(*c.cost);
    s.set_currency(c.currency);
    s.set_carbon_cost_basis(c.basis);
  }
  // The workload's energy baseline: earlier jobs of its fingerprint on the same GPU model.
  if (s.has_joules_per_pflop() && !info->job.workload_fingerprint().empty()) {
    const int64_t start_ms = info->job.has_start_time()
                                 ? api::TimestampToUnixMs(info->job.start_time())
                                 : std::numeric_limits<int64_t>::max();
    absl::StatusOr<std::vector<double>> earlier = store_->WorkloadJoulesPerPflop(
        info->id, info->job.workload_fingerprint(), s.gpu_model(), start_ms,
        kWorkloadEnergyJobs);
    if (!earlier.ok()) {
      return absl::UnavailableError(
          absl::StrCat("workload energy baseline: ", earlier.status().message()));
    }
    if (earlier->size() >= 2) {
      s.set_workload_joules_per_pflop(detect::Median(*earlier));
      s.set_workload_energy_jobs(static_cast<int32_t>(earlier->size()));
    }
  }
  s.set_regression_count(regressions);
  s.set_fault_count(
      static_cast<int32_t>(std::max<int64_t>(report.faults_size(), ofu.fault_event_count())));
  api::RoundSummary(s);
  if (std::optional<std::string> text = FaultAdvice(report, failure_fault)) {
    s.add_advice(v1::ADVICE_KIND_GPU_FAULT);
    v1::Advice* advice = report.add_advice();
    advice->set_kind(v1::ADVICE_KIND_GPU_FAULT);
    advice->set_text(*text);
  }
  for (v1::AdviceKind a : api::ChooseAdvice(s)) {
    // "Nothing to change" does not follow a GPU fault.
    if (a == v1::ADVICE_KIND_WELL_USED && s.advice_size() > 0) continue;
    s.add_advice(a);
    v1::Advice* advice = report.add_advice();
    advice->set_kind(a);
    advice->set_text(api::AdviceText(a, s));
  }
  for (const api::JobCaveat& c : caveats) report.add_caveats(c.text);
  if (!ofu.ofu_unavailable_reason().empty()) report.add_caveats(ofu.ofu_unavailable_reason());
  *report.mutable_generate_time() = api::UnixMsToTimestamp(absl::ToUnixMillis(absl::Now()));
  const AdminCommentRoute* route = RouteFor(cluster);
  absl::StatusOr<std::string> comment = api::EncodeAdminComment(
      s, route != nullptr && route->base32 ? api::AdminCommentEncoding::kBase32
                                           : api::AdminCommentEncoding::kBase64);
  if (!comment.ok()) return comment.status();
  report.set_admin_comment(*comment);
  return report;
}

absl::StatusOr<int> JobReporter::RunOnce() {
  absl::StatusOr<std::vector<ReportCandidate>> candidates =
      store_->ClaimDue(options_.claim_lease, options_.batch);
  if (!candidates.ok()) return candidates.status();
  int written = 0;
  bool enqueued = false;
  for (const ReportCandidate& c : *candidates) {
    absl::StatusOr<v1::JobReport> report =
        Assemble(c.cluster, c.job_id, c.revision.has_value() ? *c.revision : 0);
    if (!report.ok()) {
      const absl::Duration delay = std::min(
          options_.max_retry_backoff, options_.retry_backoff * (1 << std::min(c.attempts, 16)));
      logger_.Warn("job report: cannot assemble; retried later",
                   {{"cluster", c.cluster},
                    {"job_id", c.job_id},
                    {"retry_in_s", absl::ToDoubleSeconds(delay)},
                    {"error", report.status().ToString()}});
      if (absl::Status s = store_->Retry(c.job, report.status().ToString(), delay); !s.ok()) {
        return s;
      }
      continue;
    }
    const std::string hash = ContentHash(*report);
    if (c.revision.has_value() && hash == c.content_hash) {
      if (absl::Status s = store_->Touch(c.job); !s.ok()) return s;
      if (absl::Status s = store_->Done(c.job, c.generation); !s.ok()) return s;
      continue;
    }
    if (c.revision.has_value()) {
      report->mutable_summary()->set_revision(*c.revision + 1);
      // The revision is part of the summary: advice texts do not use it, the comment does.
      const AdminCommentRoute* route = RouteFor(c.cluster);
      absl::StatusOr<std::string> comment =
          api::EncodeAdminComment(report->summary(), route != nullptr && route->base32
                                                         ? api::AdminCommentEncoding::kBase32
                                                         : api::AdminCommentEncoding::kBase64);
      if (!comment.ok()) return comment.status();
      report->set_admin_comment(*comment);
    }
    std::optional<AdminCommentWrite> write;
    const AdminCommentRoute* route = RouteFor(c.cluster);
    if (report->job().scheduler() != v1::SCHEDULER_KIND_SLURM) {
      report->set_admin_comment_status("not a Slurm job");
    } else if (options_.admin_comment_routes.empty()) {
      report->set_admin_comment_status("disabled");
    } else if (route == nullptr) {
      // Job 777001 of another cluster is another job: never written to this cluster's Slurm.
      std::vector<std::string> clusters;
      for (const AdminCommentRoute& r : options_.admin_comment_routes)
        clusters.push_back(r.cluster);
      report->set_admin_comment_status(absl::StrCat(
          "not written: no slurm_admin_comment target serves cluster ", c.cluster,
          " (alerting.reports.admin_comment_targets serve ", absl::StrJoin(clusters, ", "), ")"));
    } else if (!IsSlurmJobId(c.job_id)) {
      report->set_admin_comment_status(
          absl::StrCat("not written: job_id=\"", c.job_id, "\" is not a Slurm job id"));
    } else {
      AdminCommentPayload payload{.cluster = c.cluster,
                                  .job_id = c.job_id,
                                  .revision = report->summary().revision(),
                                  .comment = report->admin_comment()};
      write =
          AdminCommentWrite{.target = route->target,
                            .payload = AdminCommentPayloadToJson(payload),
                            .idempotency_key = AdminCommentIdempotencyKey(payload, route->target)};
      report->set_admin_comment_status("queued");
    }
    if (absl::Status s = store_->Save(c.job, *report, hash, write); !s.ok()) return s;
    if (absl::Status s = store_->Done(c.job, c.generation); !s.ok()) return s;
    enqueued = enqueued || write.has_value();
    ++written;
    logger_.Info("job report written", {{"cluster", c.cluster},
                                        {"job_id", c.job_id},
                                        {"revision", report->summary().revision()},
                                        {"final", report->final()},
                                        {"admin_comment", report->admin_comment_status()}});
  }
  if (enqueued && on_enqueued_) on_enqueued_();
  return written;
}

}  // namespace goodput::alerting
