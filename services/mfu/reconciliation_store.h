// PostgreSQL side of reconciliation (migrations 0021, 0022): OFU windows received from ofu,
// the per-window points and per-job verdicts computed from them and the reports, the fleet
// report's inputs, and the log of divergence events forwarded to alerting.
//
// Writes that change a job's inputs (a report, a window) mark the job pending in the same
// transaction; ReconcileJob recomputes a pending job from everything stored and, in the same
// transaction, appends divergence events under the producer's next commit sequence when the
// job's verdict changed or a new precision switch appeared. So a late report or window
// revises the stored reconciliation, and events survive any crash between deciding and
// sending them.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "services/core/gpu_catalog.h"
#include "absl/status/statusor.h"
#include "goodput/v1/alert.pb.h"
#include "goodput/v1/mfu.pb.h"
#include "services/mfu/fleet.h"
#include "services/mfu/reconcile.h"
#include "services/platform/pg_pool.h"

namespace goodput::mfu {

namespace v1 = ::goodput::v1;

// The fleet report's inputs for a request (filters applied).
struct FleetData {
  std::vector<FleetJob> jobs;  // jobs with both figures, ordered by GPU count then key
  double gpu_hours_total = 0;
  double gpu_hours_with_ofu = 0;
  double gpu_hours_with_app_mfu = 0;
};

class ReconciliationStore {
 public:
  // `pool` must outlive the store. `producer_id` names this replica in the events it sends.
  // `catalog` (the service's, with its overrides) must outlive the store.
  ReconciliationStore(platform::PgPool* pool, std::string producer_id, ReconcileOptions options,
                      const core::GpuCatalog* catalog = &core::GpuCatalog::BuiltIn())
      : pool_(pool), producer_id_(std::move(producer_id)), options_(options), catalog_(catalog) {}

  const std::string& producer_id() const { return producer_id_; }

  // Applies one ofu push (PushOfuWindowsRequest): in sequence order per producer, a retry at
  // or below the watermark acknowledged as a duplicate, a push whose previous_sequence is
  // above the watermark refused as a gap (ofu then re-sends from the watermark). Windows and
  // watermark commit together. INVALID_ARGUMENT naming the field for a malformed push.
  absl::StatusOr<v1::DeliveryAck> ApplyOfuWindows(const v1::PushOfuWindowsRequest& request);

  // Jobs whose inputs changed since they were last reconciled, oldest change first.
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> PendingJobs(int limit);
  // Whether the job is pending.
  absl::StatusOr<bool> IsPending(const std::string& cluster, const std::string& job_id);

  // Recomputes the job's points and verdict from the stored windows and reports; returns the
  // number of divergence events appended (0 when nothing changed for alerting).
  absl::StatusOr<int> ReconcileJob(const std::string& cluster, const std::string& job_id);

  // The stored reconciliation (see GetReconciliationRequest). NOT_FOUND when the job is
  // neither registered nor has reports or windows; INVALID_ARGUMENT for a missing job key or
  // a negative resolution.
  absl::StatusOr<v1::GetReconciliationResponse> Get(const v1::GetReconciliationRequest& request);

  // The per-job figures and GPU-hour coverage for a fleet report request. INVALID_ARGUMENT
  // for a range without both ends or with end <= start.
  absl::StatusOr<FleetData> Fleet(const v1::GetFleetReportRequest& request);

  // The forwarding log of divergence events (see services/platform/ordered_forwarder.h).
  absl::StatusOr<int64_t> AckedSequence(const std::string& target);
  absl::Status SetAckedSequence(const std::string& target, int64_t sequence);
  absl::StatusOr<std::vector<int64_t>> PendingEventSequences(int64_t after, int limit);
  // The events of one commit, in order.
  absl::StatusOr<std::vector<v1::DivergenceEvent>> Events(int64_t sequence);

 private:
  platform::PgPool* pool_;
  std::string producer_id_;
  ReconcileOptions options_;
  const core::GpuCatalog* catalog_;
};

// API forms of the domain enums.
v1::Verdict ToProtoVerdict(detect::Verdict verdict);
v1::DivergenceCause ToProtoCause(detect::Cause cause);
detect::Verdict FromProtoVerdict(v1::Verdict verdict);
// The API form of a divergence result.
v1::Divergence ToProtoDivergence(const detect::DivergenceResult& result);

}  // namespace goodput::mfu
