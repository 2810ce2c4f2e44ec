// goodput.v1.OfuService: the gRPC face of goodput-ofu. Queries read the windows the
// consumer (ofu_consumer.h) commits to PostgreSQL; GetLatestOfu reads the Redis cache first;
// StreamJobOfu replays from PostgreSQL and then follows the consumer's commits. Samples reach
// ofu only through PostgreSQL (the source of truth): ingest pushes nothing to it.
#pragma once

#include <memory>

#include "goodput/v1/ofu.grpc.pb.h"
#include "services/core/gpu_catalog.h"
#include "services/ofu/fault_event_store.h"
#include "services/ofu/ofu_consumer.h"
#include "services/ofu/ofu_live.h"
#include "services/ofu/ofu_store.h"

namespace goodput::ofu {

namespace v1 = ::goodput::v1;

struct OfuServiceOptions {
  int32_t window_s = 60;
  double low_efficiency_ofu_threshold = kFleetHoursLowEfficiencyOfu;
  double straggler_threshold = 0.2;
  // Wall clock (unix ms) for "now" in summaries; injectable for tests.
  std::function<int64_t()> clock = {};
  // GPU fault events (ListFaultEvents, the job summary's fault_events); null: not served.
  FaultEventStore* faults = nullptr;
};

class OfuServiceImpl final : public v1::OfuService::CallbackService {
 public:
  // Every pointer must outlive the service; `consumer` and `cache` may be null.
  OfuServiceImpl(OfuStore* store, OfuConsumer* consumer, LatestCache* cache, StreamHub* hub,
                 const core::GpuCatalog* catalog, OfuServiceOptions options);

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
  grpc::ServerUnaryReactor* ListFaultEvents(grpc::CallbackServerContext* context,
                                            const v1::ListFaultEventsRequest* request,
                                            v1::ListFaultEventsResponse* response) override;

  // The logic behind the RPCs, callable without gRPC (tests).
  absl::Status DoGetJobOfu(const v1::GetJobOfuRequest& request, v1::GetJobOfuResponse* response);
  absl::Status DoGetJobSummary(const v1::GetJobSummaryRequest& request,
                               v1::GetJobSummaryResponse* response);
  absl::Status DoGetLatestOfu(const v1::GetLatestOfuRequest& request,
                              v1::GetLatestOfuResponse* response);
  absl::Status DoGetFleetSummary(const v1::GetFleetSummaryRequest& request,
                                 v1::GetFleetSummaryResponse* response);
  absl::Status DoListGpuSpecs(const v1::ListGpuSpecsRequest& request,
                              v1::ListGpuSpecsResponse* response);
  // `context` (null in tests) carries the caller's token: a token limited to clusters lists
  // those only, one limited to a user lists that user's jobs' faults only.
  absl::Status DoListFaultEvents(const v1::ListFaultEventsRequest& request,
                                 v1::ListFaultEventsResponse* response,
                                 const grpc::ServerContextBase* context = nullptr);
  absl::Status DoEstimateGemmOverhead(const v1::EstimateGemmOverheadRequest& request,
                                      v1::EstimateGemmOverheadResponse* response);

 private:
  int64_t NowMs() const;

  OfuStore* store_;
  OfuConsumer* consumer_;
  LatestCache* cache_;
  StreamHub* hub_;
  const core::GpuCatalog* catalog_;
  OfuServiceOptions options_;
};

}  // namespace goodput::ofu
