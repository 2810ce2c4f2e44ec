// goodput.v1.MfuService: the gRPC face of goodput-mfu.
//
// ReportMfu and StreamMfuReports check every report (a refusal names field and value), store
// the good ones durably in PostgreSQL before acknowledging (idempotent on report_id) and
// compute app MFU against the job's GPU model when the job is known; ListMfuReports reads
// them back, attaching reports whose job registered late. PushOfuWindows stores ofu's
// windows exactly once per delivery sequence. Both mark the job for reconciliation;
// GetReconciliation answers from the stored reconciliation (recomputed first if the job is
// pending), GetFleetReport computes the fleet statistics over the stored points.
#pragma once

#include <cstdint>
#include <vector>

#include "goodput/v1/mfu.grpc.pb.h"
#include "services/core/statistics.h"
#include "services/mfu/mfu_store.h"
#include "services/mfu/reconciler.h"
#include "services/mfu/reconciliation_store.h"
#include "services/platform/logging.h"

namespace goodput::mfu {

namespace v1 = ::goodput::v1;

// Most reports accepted in one StreamMfuReports message.
inline constexpr int kMaxReportsPerBatch = 10000;
// Most refusals listed in a StreamMfuReports response.
inline constexpr int kMaxListedRefusals = 1000;

struct MfuServiceOptions {
  // Lower bounds of the fleet report's GPU-count groups when a request names none.
  std::vector<int64_t> gpu_count_groups = core::DefaultGpuCountGroups();
};

class MfuServiceImpl final : public v1::MfuService::CallbackService {
 public:
  // The stores and the reconciler must outlive the service.
  MfuServiceImpl(MfuStore* store, ReconciliationStore* reconciliations, Reconciler* reconciler,
                 MfuServiceOptions options, platform::Logger logger)
      : store_(store),
        reconciliations_(reconciliations),
        reconciler_(reconciler),
        options_(std::move(options)),
        logger_(std::move(logger)) {}

  grpc::ServerUnaryReactor* ReportMfu(grpc::CallbackServerContext* context,
                                      const v1::ReportMfuRequest* request,
                                      v1::ReportMfuResponse* response) override;
  grpc::ServerReadReactor<v1::StreamMfuReportsRequest>* StreamMfuReports(
      grpc::CallbackServerContext* context, v1::StreamMfuReportsResponse* response) override;
  grpc::ServerUnaryReactor* ListMfuReports(grpc::CallbackServerContext* context,
                                           const v1::ListMfuReportsRequest* request,
                                           v1::ListMfuReportsResponse* response) override;
  grpc::ServerUnaryReactor* GetReconciliation(grpc::CallbackServerContext* context,
                                              const v1::GetReconciliationRequest* request,
                                              v1::GetReconciliationResponse* response) override;
  grpc::ServerUnaryReactor* GetFleetReport(grpc::CallbackServerContext* context,
                                           const v1::GetFleetReportRequest* request,
                                           v1::GetFleetReportResponse* response) override;
  grpc::ServerUnaryReactor* PushOfuWindows(grpc::CallbackServerContext* context,
                                           const v1::PushOfuWindowsRequest* request,
                                           v1::PushOfuWindowsResponse* response) override;

 private:
  MfuStore* store_;
  ReconciliationStore* reconciliations_;
  Reconciler* reconciler_;
  MfuServiceOptions options_;
  platform::Logger logger_;
};

}  // namespace goodput::mfu
