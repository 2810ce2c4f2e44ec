// goodput.v1.OfuService: the gRPC face of goodput-ofu. Every RPC answers UNIMPLEMENTED
// naming the work that builds it until that work lands; the binary already serves health,
// reflection, metrics and auth so that deployments and clients can be wired up now.
#pragma once

#include "goodput/v1/ofu.grpc.pb.h"

namespace goodput::ofu {

namespace v1 = ::goodput::v1;

class OfuServiceImpl final : public v1::OfuService::CallbackService {
 public:
  grpc::ServerUnaryReactor* GetJobOfu(grpc::CallbackServerContext* context,
                                      const v1::GetJobOfuRequest* request,
                                      v1::GetJobOfuResponse* response) override;
  grpc::ServerWriteReactor<v1::StreamJobOfuResponse>* StreamJobOfu(
      grpc::CallbackServerContext* context, const v1::StreamJobOfuRequest* request) override;
  grpc::ServerUnaryReactor* GetLatestOfu(grpc::CallbackServerContext* context,
                                         const v1::GetLatestOfuRequest* request,
                                         v1::GetLatestOfuResponse* response) override;
  grpc::ServerUnaryReactor* GetJobSummary(grpc::CallbackServerContext* context,
                                          const v1::GetJobSummaryRequest* request,
                                          v1::GetJobSummaryResponse* response) override;
  grpc::ServerUnaryReactor* GetFleetSummary(grpc::CallbackServerContext* context,
                                            const v1::GetFleetSummaryRequest* request,
                                            v1::GetFleetSummaryResponse* response) override;
  grpc::ServerUnaryReactor* ListGpuSpecs(grpc::CallbackServerContext* context,
                                         const v1::ListGpuSpecsRequest* request,
                                         v1::ListGpuSpecsResponse* response) override;
  grpc::ServerUnaryReactor* EstimateGemmOverhead(
      grpc::CallbackServerContext* context, const v1::EstimateGemmOverheadRequest* request,
      v1::EstimateGemmOverheadResponse* response) override;
  grpc::ServerUnaryReactor* IngestAttributedBatch(
      grpc::CallbackServerContext* context, const v1::IngestAttributedBatchRequest* request,
      v1::IngestAttributedBatchResponse* response) override;
};

}  // namespace goodput::ofu
