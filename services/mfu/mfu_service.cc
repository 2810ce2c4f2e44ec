#include "services/mfu/mfu_service.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "services/platform/scope.h"
#include "services/platform/status_convert.h"

namespace goodput::mfu {
namespace {

// Fills the computed figures of a ReportMfu response.
void FillResponse(const v1::MfuReport& report, const StoreOutcome& outcome,
                  v1::ReportMfuResponse* response) {
  response->set_report_id(report.report_id());
  response->set_duplicate(outcome.duplicate);
  response->set_job_registered(outcome.job_registered);
  response->set_precision_assumed(outcome.precision_assumed);
  if (outcome.app_mfu) {
    response->set_app_mfu(outcome.app_mfu->app_mfu);
    if (outcome.app_mfu->peak_tflops) response->set_peak_tflops(*outcome.app_mfu->peak_tflops);
  }
}

// Reads every batch of a StreamMfuReports call, refusing bad reports one by one and storing
// the rest batch by batch; answers once the stream has ended and everything is committed.
class ReportReader : public grpc::ServerReadReactor<v1::StreamMfuReportsRequest> {
 public:
  ReportReader(MfuStore* store, Reconciler* reconciler, platform::Logger logger,
               v1::StreamMfuReportsResponse* response, platform::CallScope scope)
      : store_(store),
        reconciler_(reconciler),
        logger_(std::move(logger)),
        response_(response),
        scope_(std::move(scope)) {
    StartRead(&batch_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      if (response_->stored_count() > 0) reconciler_->Wake();
      Finish(grpc::Status::OK);
      return;
    }
    grpc::Status status = Consume();
    if (!status.ok()) {
      Finish(status);
      return;
    }
    batch_.Clear();
    StartRead(&batch_);
  }

  void OnDone() override { delete this; }

 private:
  grpc::Status Consume() {
    if (batch_.reports_size() > kMaxReportsPerBatch) {
      return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                          absl::StrCat("batch \"", batch_.batch_id().substr(0, 200), "\" holds ",
                                       batch_.reports_size(), " reports; the limit is ",
                                       kMaxReportsPerBatch, " per message"));
    }
    // A scoped token reports on the jobs of its scope only; one report outside it ends the
    // stream (nothing of this batch is stored).
    if (scope_.restricted()) {
      for (const v1::MfuReport& report : batch_.reports()) {
        if (absl::Status s = scope_.CheckJob(report.job().cluster(), report.job().job_id(),
                                             /*unregistered_ok=*/false);
            !s.ok()) {
          return platform::ToGrpcStatus(s);
        }
      }
    }
    std::vector<v1::MfuReport> good;
    good.reserve(batch_.reports_size());
    for (int i = 0; i < batch_.reports_size(); ++i) {
      std::optional<v1::Refusal> refusal = CheckReport(batch_.reports(i));
      if (!refusal) {
        good.push_back(std::move(*batch_.mutable_reports(i)));
        continue;
      }
      response_->set_refused_count(response_->refused_count() + 1);
      if (response_->refusals_size() >= kMaxListedRefusals) {
        response_->set_refusals_omitted_count(response_->refusals_omitted_count() + 1);
        continue;
      }
      refusal->set_batch_id(batch_.batch_id());
      refusal->set_index(i);
      refusal->set_message(absl::StrCat("report ", i, " of batch \"", batch_.batch_id(),
                                        "\": ", refusal->message()));
      *response_->add_refusals() = *std::move(refusal);
    }
    if (good.empty()) return grpc::Status::OK;
    absl::StatusOr<std::vector<StoreOutcome>> outcomes = store_->Store(good);
    if (!outcomes.ok()) {
      logger_.Warn("storing MFU reports failed",
                   {{"batch_id", batch_.batch_id()}, {"error", outcomes.status().ToString()}});
      return platform::ToGrpcStatus(outcomes.status());
    }
    for (const StoreOutcome& outcome : *outcomes) {
      if (outcome.duplicate) {
        response_->set_duplicate_count(response_->duplicate_count() + 1);
        continue;
      }
      response_->set_stored_count(response_->stored_count() + 1);
      if (!outcome.job_registered) {
        response_->set_unattached_count(response_->unattached_count() + 1);
      }
    }
    return grpc::Status::OK;
  }

  MfuStore* store_;
  Reconciler* reconciler_;
  platform::Logger logger_;
  v1::StreamMfuReportsResponse* response_;
  platform::CallScope scope_;
  v1::StreamMfuReportsRequest batch_;
};

}  // namespace

grpc::ServerUnaryReactor* MfuServiceImpl::ReportMfu(grpc::CallbackServerContext* context,
                                                    const v1::ReportMfuRequest* request,
                                                    v1::ReportMfuResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  // A scoped token reports on the jobs of its scope only (a user- or team-limited one on its
  // own registered jobs).
  if (absl::Status s = platform::CallScope::Of(context).CheckJob(request->report().job().cluster(),
                                                                 request->report().job().job_id(),
                                                                 /*unregistered_ok=*/false);
      !s.ok()) {
    reactor->Finish(platform::ToGrpcStatus(s));
    return reactor;
  }
  if (std::optional<v1::Refusal> refusal = CheckReport(request->report())) {
    reactor->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, refusal->message()));
    return reactor;
  }
  absl::StatusOr<std::vector<StoreOutcome>> outcomes = store_->Store({request->report()});
  if (!outcomes.ok()) {
    logger_.Warn("storing an MFU report failed", {{"report_id", request->report().report_id()},
                                                  {"error", outcomes.status().ToString()}});
    reactor->Finish(platform::ToGrpcStatus(outcomes.status()));
    return reactor;
  }
  FillResponse(request->report(), outcomes->front(), response);
  if (!outcomes->front().duplicate) reconciler_->Wake();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerReadReactor<v1::StreamMfuReportsRequest>* MfuServiceImpl::StreamMfuReports(
    grpc::CallbackServerContext* context, v1::StreamMfuReportsResponse* response) {
  return new ReportReader(store_, reconciler_, logger_, response, platform::CallScope::Of(context));
}

grpc::ServerUnaryReactor* MfuServiceImpl::ListMfuReports(grpc::CallbackServerContext* context,
                                                         const v1::ListMfuReportsRequest* request,
                                                         v1::ListMfuReportsResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  // The request filters by job only: a scoped token names one of its jobs.
  if (absl::Status s = platform::CallScope::Of(context).NarrowToJob(
          "ListMfuReports", nullptr, request->job().cluster(), request->job().job_id());
      !s.ok()) {
    reactor->Finish(platform::ToGrpcStatus(s));
    return reactor;
  }
  absl::StatusOr<v1::ListMfuReportsResponse> page = store_->List(*request);
  if (page.ok()) *response = *std::move(page);
  reactor->Finish(platform::ToGrpcStatus(page.status()));
  return reactor;
}

grpc::ServerUnaryReactor* MfuServiceImpl::GetReconciliation(
    grpc::CallbackServerContext* context, const v1::GetReconciliationRequest* request,
    v1::GetReconciliationResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (absl::Status s = platform::CallScope::Of(context).CheckJob(request->job().cluster(),
                                                                 request->job().job_id());
      !s.ok()) {
    reactor->Finish(platform::ToGrpcStatus(s));
    return reactor;
  }
  // Answer with the data already acknowledged to writers, not the last background pass.
  if (!request->job().cluster().empty() && !request->job().job_id().empty()) {
    if (absl::Status s =
            reconciler_->ReconcileIfPending(request->job().cluster(), request->job().job_id());
        !s.ok()) {
      reactor->Finish(platform::ToGrpcStatus(s));
      return reactor;
    }
  }
  absl::StatusOr<v1::GetReconciliationResponse> result = reconciliations_->Get(*request);
  if (result.ok()) *response = *std::move(result);
  reactor->Finish(platform::ToGrpcStatus(result.status()));
  return reactor;
}

namespace {

void FillStats(const FleetStatsResult& in, v1::FleetStats* out) {
  out->set_min_gpu_count(static_cast<int32_t>(in.min_gpu_count));
  out->set_max_gpu_count(static_cast<int32_t>(in.max_gpu_count));
  out->set_job_count(static_cast<int32_t>(in.job_count));
  out->set_mfu_mean(in.mfu_mean);
  out->set_mfu_sd(in.mfu_sd);
  out->set_ofu_mean(in.ofu_mean);
  out->set_ofu_sd(in.ofu_sd);
  out->set_mae_pp(in.mae_pp);
  out->set_abs_error_sd_pp(in.abs_error_sd_pp);
  if (in.pearson_r) out->set_pearson_r(*in.pearson_r);
  if (in.spearman_rho) out->set_spearman_rho(*in.spearman_rho);
  out->set_share_within_10pp(in.share_within_10pp);
  out->set_share_beyond_20pp(in.share_beyond_20pp);
}

constexpr char kFleetTokenPrefix[] = "fleet:";

}  // namespace

grpc::ServerUnaryReactor* MfuServiceImpl::GetFleetReport(grpc::CallbackServerContext* context,
                                                         const v1::GetFleetReportRequest* request,
                                                         v1::GetFleetReportResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  auto fail = [&](const absl::Status& s) {
    reactor->Finish(platform::ToGrpcStatus(s));
    return reactor;
  };
  int64_t offset = 0;
  if (!request->page_token().empty()) {
    std::string raw;
    const bool decoded = absl::WebSafeBase64Unescape(request->page_token(), &raw);
    absl::string_view rest = raw;
    if (!decoded || !absl::ConsumePrefix(&rest, kFleetTokenPrefix) ||
        !absl::SimpleAtoi(rest, &offset) || offset < 0) {
      return fail(absl::InvalidArgumentError(absl::StrCat("page_token=\"",
                                                          request->page_token().substr(0, 100),
                                                          "\" is not a token of this report")));
    }
  }
  std::vector<int64_t> bounds(request->gpu_count_group_lower_bounds().begin(),
                              request->gpu_count_group_lower_bounds().end());
  if (bounds.empty()) bounds = options_.gpu_count_groups;
  absl::StatusOr<FleetData> data = reconciliations_->Fleet(*request);
  if (!data.ok()) return fail(data.status());
  absl::StatusOr<FleetReport> report = BuildFleetReport(data->jobs, bounds);
  if (!report.ok()) return fail(report.status());
  FillStats(report->overall, response->mutable_overall());
  FillStats(report->excluding_miscounts, response->mutable_excluding_miscounts());
  response->set_miscount_job_count(static_cast<int32_t>(report->miscount_job_count));
  for (const FleetStatsResult& g : report->groups) FillStats(g, response->add_by_gpu_count());
  v1::FleetCoverage* coverage = response->mutable_coverage();
  coverage->set_gpu_hours_total(data->gpu_hours_total);
  coverage->set_gpu_hours_with_ofu(data->gpu_hours_with_ofu);
  coverage->set_gpu_hours_with_app_mfu(data->gpu_hours_with_app_mfu);
  if (data->gpu_hours_total > 0) {
    coverage->set_ofu_share(data->gpu_hours_with_ofu / data->gpu_hours_total);
    coverage->set_app_mfu_share(data->gpu_hours_with_app_mfu / data->gpu_hours_total);
  }
  if (request->include_jobs()) {
    const int64_t limit = request->page_size() <= 0 ? 100 : std::min(request->page_size(), 1000);
    const int64_t n = static_cast<int64_t>(data->jobs.size());
    for (int64_t i = offset; i < std::min(n, offset + limit); ++i) {
      const FleetJob& j = data->jobs[static_cast<size_t>(i)];
      v1::FleetJobPoint* p = response->add_jobs();
      p->mutable_job()->set_cluster(j.cluster);
      p->mutable_job()->set_job_id(j.job_id);
      p->set_gpu_count(static_cast<int32_t>(j.gpu_count));
      p->set_app_mfu(j.app_mfu);
      p->set_ofu(j.ofu);
      p->set_verdict(ToProtoVerdict(j.verdict));
      if (j.top_cause) p->set_top_cause(ToProtoCause(*j.top_cause));
    }
    if (offset + limit < n) {
      response->set_next_page_token(
          absl::WebSafeBase64Escape(absl::StrCat(kFleetTokenPrefix, offset + limit)));
    }
  }
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* MfuServiceImpl::PushOfuWindows(grpc::CallbackServerContext* context,
                                                         const v1::PushOfuWindowsRequest* request,
                                                         v1::PushOfuWindowsResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::StatusOr<v1::DeliveryAck> ack = reconciliations_->ApplyOfuWindows(*request);
  if (!ack.ok()) {
    logger_.Warn("applying OFU windows failed", {{"producer", request->position().producer_id()},
                                                 {"sequence", request->position().sequence()},
                                                 {"error", ack.status().ToString()}});
    reactor->Finish(platform::ToGrpcStatus(ack.status()));
    return reactor;
  }
  if (ack->gap_detected()) {
    logger_.Info("OFU window push above the watermark; asking ofu to resend",
                 {{"producer", request->position().producer_id()},
                  {"previous_sequence", request->position().previous_sequence()},
                  {"watermark", ack->watermark_sequence()}});
  }
  const bool applied = !ack->duplicate() && !ack->gap_detected();
  *response->mutable_ack() = *std::move(ack);
  if (applied) reconciler_->Wake();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace goodput::mfu
