#include "services/mfu/mfu_service.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "services/platform/status_convert.h"
#include "services/platform/unimplemented.h"

namespace goodput::mfu {
namespace {
constexpr char kWork[] =
    "MFU service and SDK: what frameworks say, checked against what the hardware did";

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
  ReportReader(MfuStore* store, platform::Logger logger, v1::StreamMfuReportsResponse* response)
      : store_(store), logger_(std::move(logger)), response_(response) {
    StartRead(&batch_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
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
  platform::Logger logger_;
  v1::StreamMfuReportsResponse* response_;
  v1::StreamMfuReportsRequest batch_;
};

}  // namespace

grpc::ServerUnaryReactor* MfuServiceImpl::ReportMfu(grpc::CallbackServerContext* context,
                                                    const v1::ReportMfuRequest* request,
                                                    v1::ReportMfuResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
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
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerReadReactor<v1::StreamMfuReportsRequest>* MfuServiceImpl::StreamMfuReports(
    grpc::CallbackServerContext* /*context*/, v1::StreamMfuReportsResponse* response) {
  return new ReportReader(store_, logger_, response);
}

grpc::ServerUnaryReactor* MfuServiceImpl::ListMfuReports(grpc::CallbackServerContext* context,
                                                         const v1::ListMfuReportsRequest* request,
                                                         v1::ListMfuReportsResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::StatusOr<v1::ListMfuReportsResponse> page = store_->List(*request);
  if (page.ok()) *response = *std::move(page);
  reactor->Finish(platform::ToGrpcStatus(page.status()));
  return reactor;
}

grpc::ServerUnaryReactor* MfuServiceImpl::GetReconciliation(
    grpc::CallbackServerContext* context, const v1::GetReconciliationRequest* /*request*/,
    v1::GetReconciliationResponse* /*response*/) {
  return platform::FinishUnimplemented(context, "/goodput.v1.MfuService/GetReconciliation", kWork);
}

grpc::ServerUnaryReactor* MfuServiceImpl::GetFleetReport(
    grpc::CallbackServerContext* context, const v1::GetFleetReportRequest* /*request*/,
    v1::GetFleetReportResponse* /*response*/) {
  return platform::FinishUnimplemented(context, "/goodput.v1.MfuService/GetFleetReport", kWork);
}

grpc::ServerUnaryReactor* MfuServiceImpl::PushOfuWindows(
    grpc::CallbackServerContext* context, const v1::PushOfuWindowsRequest* /*request*/,
    v1::PushOfuWindowsResponse* /*response*/) {
  return platform::FinishUnimplemented(context, "/goodput.v1.MfuService/PushOfuWindows", kWork);
}

}  // namespace goodput::mfu
