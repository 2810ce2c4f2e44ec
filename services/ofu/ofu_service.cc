#include "services/ofu/ofu_service.h"

#include "services/platform/unimplemented.h"

namespace goodput::ofu {
namespace {
constexpr char kWork[] =
    "OFU service: per-GPU and per-job efficiency over time, live and historical";
}  // namespace

grpc::ServerUnaryReactor* OfuServiceImpl::GetJobOfu(grpc::CallbackServerContext* context,
                                                    const v1::GetJobOfuRequest* /*request*/,
                                                    v1::GetJobOfuResponse* /*response*/) {
  return platform::FinishUnimplemented(context, "/goodput.v1.OfuService/GetJobOfu", kWork);
}

grpc::ServerWriteReactor<v1::StreamJobOfuResponse>* OfuServiceImpl::StreamJobOfu(
    grpc::CallbackServerContext* /*context*/, const v1::StreamJobOfuRequest* /*request*/) {
  return platform::UnimplementedWriter<v1::StreamJobOfuResponse>(
      "/goodput.v1.OfuService/StreamJobOfu", kWork);
}

grpc::ServerUnaryReactor* OfuServiceImpl::GetLatestOfu(grpc::CallbackServerContext* context,
                                                       const v1::GetLatestOfuRequest* /*request*/,
                                                       v1::GetLatestOfuResponse* /*response*/) {
  return platform::FinishUnimplemented(context, "/goodput.v1.OfuService/GetLatestOfu", kWork);
}

grpc::ServerUnaryReactor* OfuServiceImpl::GetJobSummary(grpc::CallbackServerContext* context,
                                                        const v1::GetJobSummaryRequest* /*request*/,
                                                        v1::GetJobSummaryResponse* /*response*/) {
  return platform::FinishUnimplemented(context, "/goodput.v1.OfuService/GetJobSummary", kWork);
}

grpc::ServerUnaryReactor* OfuServiceImpl::GetFleetSummary(
    grpc::CallbackServerContext* context, const v1::GetFleetSummaryRequest* /*request*/,
    v1::GetFleetSummaryResponse* /*response*/) {
  return platform::FinishUnimplemented(context, "/goodput.v1.OfuService/GetFleetSummary", kWork);
}

grpc::ServerUnaryReactor* OfuServiceImpl::ListGpuSpecs(grpc::CallbackServerContext* context,
                                                       const v1::ListGpuSpecsRequest* /*request*/,
                                                       v1::ListGpuSpecsResponse* /*response*/) {
  return platform::FinishUnimplemented(context, "/goodput.v1.OfuService/ListGpuSpecs", kWork);
}

grpc::ServerUnaryReactor* OfuServiceImpl::EstimateGemmOverhead(
    grpc::CallbackServerContext* context, const v1::EstimateGemmOverheadRequest* /*request*/,
    v1::EstimateGemmOverheadResponse* /*response*/) {
  return platform::FinishUnimplemented(context, "/goodput.v1.OfuService/EstimateGemmOverhead",
                                       kWork);
}

grpc::ServerUnaryReactor* OfuServiceImpl::IngestAttributedBatch(
    grpc::CallbackServerContext* context, const v1::IngestAttributedBatchRequest* /*request*/,
    v1::IngestAttributedBatchResponse* /*response*/) {
  return platform::FinishUnimplemented(context, "/goodput.v1.OfuService/IngestAttributedBatch",
                                       kWork);
}

}  // namespace goodput::ofu
