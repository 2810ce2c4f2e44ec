#include "services/ofu/job_reporter.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "services/api/api_convert.h"
#include "services/api/job_report.h"
#include "services/platform/command.h"
#include "services/platform/grpc_client.h"
#include "services/platform/status_convert.h"

namespace goodput::ofu {
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

}  // namespace

JobReporter::JobReporter(ReportStore* store, OfuServiceImpl* ofu, const core::GpuCatalog* catalog,
                         std::shared_ptr<v1::MfuService::StubInterface> mfu,
                         std::shared_ptr<v1::AlertService::StubInterface> alerting,
                         ReporterOptions options, platform::Logger logger)
    : store_(store),
      ofu_(ofu),
      catalog_(catalog),
      mfu_(std::move(mfu)),
      alerting_(std::move(alerting)),
      options_(std::move(options)),
      logger_(std::move(logger)) {}

JobReporter::~JobReporter() { Stop(); }

void JobReporter::Start() {
  if (loop_ != nullptr) return;
  loop_ = std::make_unique<platform::PollLoop>(
      [this] {
        absl::StatusOr<int> written = RunOnce();
        if (!written.ok()) {
          logger_.Warn("job reports: pass failed", {{"error", written.status().ToString()}});
          return false;
        }
        return true;
      },
      platform::PollLoopOptions{.poll_interval = options_.poll_interval,
                                .retry_backoff = options_.poll_interval});
  loop_->Start();
}

void JobReporter::Stop() {
  if (loop_ != nullptr) loop_->Stop();
}

void JobReporter::Wake() {
  if (loop_ != nullptr) loop_->Wake();
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
  if (absl::Status s = ofu_->DoGetJobSummary(summary_request, &summary_response); !s.ok()) {
    return s;
  }
  const v1::JobOfuSummary& ofu = summary_response.summary();
  *report.mutable_ofu() = ofu;
  report.set_final(ofu.finalized());

  const v1::JobKey& key = summary_request.job();
  if (mfu_ == nullptr) {
    report.set_reconciliation_note("mfu is not configured (ofu.forward.mfu_address)");
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
  if (alerting_ == nullptr) {
    report.set_alerts_note("alerting is not configured (ofu.forward.alerting_address)");
  } else {
    std::string page_token;
    std::vector<v1::ReportAlert> alerts;
    const int64_t end_ms =
        info->job.has_end_time() ? api::TimestampToUnixMs(info->job.end_time()) : INT64_MAX;
    do {
      grpc::ClientContext ctx;
      platform::PrepareClientContext(&ctx, options_.rpc_timeout, options_.token);
      v1::ListAlertsRequest request;
      *request.mutable_job() = key;
      request.set_page_size(1000);
      request.set_page_token(page_token);
      v1::ListAlertsResponse response;
      const grpc::Status status = alerting_->ListAlerts(&ctx, request, &response);
      if (!status.ok()) {
        return absl::UnavailableError(
            absl::StrCat("alerting ListAlerts: ", status.error_message()));
      }
      for (const v1::Alert& a : response.alerts()) {
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
        if (IsRegression(a.kind())) ++regressions;
        alerts.push_back(std::move(r));
      }
      page_token = response.next_page_token();
    } while (!page_token.empty());
    std::sort(alerts.begin(), alerts.end(), [](const v1::ReportAlert& a, const v1::ReportAlert& b) {
      const int64_t ta = api::TimestampToUnixMs(a.start_time());
      const int64_t tb = api::TimestampToUnixMs(b.start_time());
      return ta != tb ? ta < tb : a.alert_id() < b.alert_id();
    });
    for (v1::ReportAlert& a : alerts) *report.add_alerts() = std::move(a);
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
  if (ofu.has_energy_j()) s.set_energy_kwh(ofu.energy_j() / 3.6e6);
  s.set_roofline_class(ofu.roofline_class());
  for (int f : ofu.flags()) s.add_flags(static_cast<v1::DataQualityFlag>(f));
  if (report.has_reconciliation()) {
    s.set_mfu_verdict(report.reconciliation().verdict());
    if (report.reconciliation().windows_used() > 0) {
      s.set_mfu_ofu_ratio(report.reconciliation().ratio());
    }
  }
  s.set_regression_count(regressions);
  api::RoundSummary(s);
  for (v1::AdviceKind a : api::ChooseAdvice(s)) {
    s.add_advice(a);
    v1::Advice* advice = report.add_advice();
    advice->set_kind(a);
    advice->set_text(api::AdviceText(a, s));
  }
  for (int f : s.flags()) report.add_caveats(api::CaveatText(static_cast<v1::DataQualityFlag>(f)));
  if (!ofu.ofu_unavailable_reason().empty()) report.add_caveats(ofu.ofu_unavailable_reason());
  *report.mutable_generate_time() = api::UnixMsToTimestamp(absl::ToUnixMillis(absl::Now()));
  absl::StatusOr<std::string> comment = api::EncodeAdminComment(s, CommentEncoding());
  if (!comment.ok()) return comment.status();
  report.set_admin_comment(*comment);
  return report;
}

api::AdminCommentEncoding JobReporter::CommentEncoding() const {
  // sacctmgr (Slurm 22.05) lower-cases the value it sets, which base64 does not survive.
  return options_.admin_comment == ReporterOptions::AdminCommentMode::kSacctmgr
             ? api::AdminCommentEncoding::kBase32
             : api::AdminCommentEncoding::kBase64;
}

absl::Status JobReporter::WriteAdminComment(const std::string& job_id, const std::string& comment) {
  std::vector<std::pair<std::string, std::string>> env;
  if (!options_.slurm_conf.empty()) env.emplace_back("SLURM_CONF", options_.slurm_conf);
  std::vector<std::string> argv;
  if (options_.admin_comment == ReporterOptions::AdminCommentMode::kSacctmgr) {
    argv = {options_.sacctmgr_path,
            "-i",
            "update",
            "job",
            "where",
            absl::StrCat("jobid=", job_id),
            "set",
            absl::StrCat("AdminComment=", comment)};
  } else {
    argv = {options_.scontrol_path, "--", "update", absl::StrCat("JobId=", job_id),
            absl::StrCat("AdminComment=", comment)};
  }
  absl::StatusOr<platform::CommandResult> result =
      platform::RunCommand(argv, env, options_.command_timeout);
  if (!result.ok()) return absl::UnavailableError(result.status().message());
  if (result->exit_code != 0) {
    const std::string what =
        absl::StrCat(argv[0], " ", argv[2], " ... of job ", job_id, " exited ", result->exit_code,
                     ": ", absl::StripAsciiWhitespace(result->output));
    // slurmctld keeps refusing a finished job: not worth retrying (use sacctmgr for those).
    if (absl::StrContains(result->output, "already finished")) {
      return absl::FailedPreconditionError(what);
    }
    return absl::UnavailableError(what);
  }
  return absl::OkStatus();
}

absl::StatusOr<int> JobReporter::RunOnce() {
  absl::StatusOr<std::vector<ReportCandidate>> candidates =
      store_->Candidates(options_.recheck, options_.revise_for, options_.batch);
  if (!candidates.ok()) return candidates.status();
  int written = 0;
  absl::Status first_error;
  for (const ReportCandidate& c : *candidates) {
    absl::StatusOr<v1::JobReport> report =
        Assemble(c.cluster, c.job_id, c.revision.has_value() ? *c.revision : 0);
    if (!report.ok()) {
      logger_.Warn(
          "job report: cannot assemble",
          {{"cluster", c.cluster}, {"job_id", c.job_id}, {"error", report.status().ToString()}});
      if (first_error.ok()) first_error = report.status();
      continue;
    }
    const std::string hash = ContentHash(*report);
    const bool changed = !c.revision.has_value() || hash != c.content_hash;
    const bool wants_comment = options_.admin_comment != ReporterOptions::AdminCommentMode::kOff &&
                               report->job().scheduler() == v1::SCHEDULER_KIND_SLURM;
    if (!changed && (!wants_comment || c.admin_comment_written == report->admin_comment())) {
      if (absl::Status s = store_->Touch(c.job); !s.ok()) return s;
      continue;
    }
    if (changed && c.revision.has_value()) {
      report->mutable_summary()->set_revision(*c.revision + 1);
      // The revision is part of the summary: advice texts do not use it, the comment does.
      absl::StatusOr<std::string> comment =
          api::EncodeAdminComment(report->summary(), CommentEncoding());
      if (!comment.ok()) return comment.status();
      report->set_admin_comment(*comment);
    }
    std::string admin_written = c.admin_comment_written;
    if (report->job().scheduler() != v1::SCHEDULER_KIND_SLURM) {
      report->set_admin_comment_status("not a Slurm job");
    } else if (!wants_comment) {
      report->set_admin_comment_status("disabled");
    } else if (absl::Status s = WriteAdminComment(c.job_id, report->admin_comment()); s.ok()) {
      report->set_admin_comment_status("written");
      admin_written = report->admin_comment();
    } else {
      report->set_admin_comment_status(std::string(s.message()));
      // Refused for good: settled, so that it is not retried at every re-check.
      if (absl::IsFailedPrecondition(s)) admin_written = report->admin_comment();
      logger_.Warn("job report: AdminComment not written",
                   {{"cluster", c.cluster}, {"job_id", c.job_id}, {"error", s.ToString()}});
    }
    if (absl::Status s = store_->Save(c.job, *report, hash, admin_written); !s.ok()) return s;
    ++written;
    logger_.Info(
        "job report written",
        {{"cluster", c.cluster}, {"job_id", c.job_id}, {"revision", report->summary().revision()}});
  }
  if (written == 0 && !first_error.ok()) return first_error;
  return written;
}

}  // namespace goodput::ofu
