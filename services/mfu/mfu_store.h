// PostgreSQL storage of framework MFU reports (table mfu_reports, migration 0020).
//
// Reports are written in one transaction per call and acknowledged only after it commits.
// A report_id stored before is not written again and comes back as a duplicate. Reports
// name their job by key; whether that job is registered, its GPU model and its allocated GPU
// count are looked up in the jobs tables at write time and again at read time, so reports
// that arrived before their job are attached (and their app MFU computed) once it registers.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "goodput/v1/mfu.pb.h"
#include "services/mfu/report_check.h"
#include "services/platform/pg_pool.h"

namespace goodput::mfu {

// What happened to one stored report.
struct StoreOutcome {
  bool duplicate = false;       // the report_id was stored before; nothing written
  bool job_registered = false;  // the job key names a registered job
  bool precision_assumed = false;
  std::optional<AppMfu> app_mfu;  // unset while the job's GPU model is unknown
};

class MfuStore {
 public:
  // `pool` must outlive the store.
  // `catalog` (the service's, with its overrides) must outlive the store.
  explicit MfuStore(platform::PgPool* pool,
                    const core::GpuCatalog* catalog = &core::GpuCatalog::BuiltIn())
      : pool_(pool), catalog_(catalog) {}

  // Stores `reports` (each already passed CheckReport) in one transaction; one outcome per
  // report, in order. A report whose id appears earlier in the same call is a duplicate.
  // Errors are the pool's (UNAVAILABLE, RESOURCE_EXHAUSTED, UNKNOWN for an in-doubt commit):
  // the caller may retry the whole call.
  absl::StatusOr<std::vector<StoreOutcome>> Store(const std::vector<v1::MfuReport>& reports);

  // One page of stored reports (see ListMfuReportsRequest). INVALID_ARGUMENT for a request
  // without a job that does not ask for unattached reports, or a malformed page token.
  absl::StatusOr<v1::ListMfuReportsResponse> List(const v1::ListMfuReportsRequest& request);

 private:
  platform::PgPool* pool_;
  const core::GpuCatalog* catalog_;
};

}  // namespace goodput::mfu
