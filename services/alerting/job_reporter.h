// The job-end reporter of goodput-alerting: a job-end product at the end of the pipeline.
// For each ended job it assembles a goodput.v1.JobReport from what its producers publish —
// ofu's job summary and the job's GPU fault events (OfuService.GetJobSummary and
// ListFaultEvents over gRPC, as a consumer asks its producer),
// mfu's reconciliation verdict (MfuService.GetReconciliation) — and alerting's own alerts of
// the job (read in process), adds advice (services/api/job_report.h), stores it
// (report_store.h) and, for Slurm jobs of a cluster with a `slurm_admin_comment` target,
// enqueues its compact summary into the outbox for that target
// (targets/admin_comment_target.h), in the transaction that stores the revision. Retries,
// backoff and idempotency of the Slurm write are the outbox's; Slurm is written by delivery
// only.
//
// When. Not by scanning: the alert engine tells the reporter (JobEndHook, alert_engine.h),
// inside the evaluating transaction, when an ended job's evaluation reached its end (every
// window the job sent evaluated and the last one reaching the job's end time, including the
// final revisions ofu sends when its windows become final) and when a job's alerts changed
// (findings confirmed after the end, a resolution, an acknowledgement); Request adds the
// job's report request there, and the commit wakes the reporter. The engine's sweep adds the
// requests of ended jobs no evaluation brings (RequestMissing: ended without a window, or
// whose windows stopped before its end and no window came since the previous sweep). A
// report may change while its windows are
// not all final, and for `revise_for` after its first revision; later events leave it as it
// is. A new revision is stored, and its AdminComment enqueued, only when the content changed.
// A request whose assembly failed (ofu or mfu unreachable) is due again after a backoff.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "goodput/v1/alert.pb.h"
#include "goodput/v1/mfu.grpc.pb.h"
#include "goodput/v1/ofu.grpc.pb.h"
#include "goodput/v1/report.pb.h"
#include "services/core/carbon_cost.h"
#include "services/core/ledger.h"
#include "services/alerting/report_store.h"
#include "services/api/job_report.h"
#include "services/core/gpu_catalog.h"
#include "services/platform/config.h"
#include "services/platform/logging.h"

namespace goodput::alerting {

// A `slurm_admin_comment` target the reporter writes to: the jobs of `cluster`.
struct AdminCommentRoute {
  std::string target = {};
  std::string cluster = {};
  bool base32 = false;  // sacctmgr lower-cases what it sets: base32 spelling
};

// `alerting.reports.*` (README.md, "Job-end reports").
struct ReporterOptions {
  bool enabled = true;
  std::string ofu_address = {};  // required when enabled
  std::string mfu_address = {};  // empty: reports say mfu is not configured
  std::string token = {};        // bearer token for ofu and mfu (role service)
  absl::Duration rpc_timeout = absl::Seconds(10);
  absl::Duration revise_for = absl::Hours(24);
  // Without an event, the request table is looked at this often (requests that another
  // replica's sweep added, retries that came due).
  absl::Duration idle_check = absl::Seconds(60);
  absl::Duration retry_backoff = absl::Seconds(5);  // doubled per failed attempt
  absl::Duration max_retry_backoff = absl::Minutes(10);
  absl::Duration claim_lease = absl::Seconds(120);
  int batch = 50;
  // Names of `slurm_admin_comment` targets (alerting.targets); main.cc resolves them into
  // `admin_comment_routes`.
  std::vector<std::string> admin_comment_targets = {};
  std::vector<AdminCommentRoute> admin_comment_routes = {};
  // alerting.fault_correlation_window_s: a failed job's likely cause is a GPU fault this long
  // before its end (gpu_fault_findings.h).
  int64_t fault_correlation_window_s = 1800;
  // alerting.reports.sites: carbon and cost rates per cluster ("*": the others).
  std::vector<core::SiteRates> sites = {};
};

// Reads alerting.reports.*; INVALID_ARGUMENT naming the key and value for anything wrong.
absl::StatusOr<ReporterOptions> LoadReporterOptions(const platform::ConfigTree& tree);

// The job's alerts, as AlertService.ListAlerts answers (alerting's own, read in process).
using AlertLister =
    std::function<absl::StatusOr<v1::ListAlertsResponse>(const v1::ListAlertsRequest&)>;

// The job's policy actions, as AlertService.ListPolicyActions answers (read in process).
using PolicyActionLister = std::function<absl::StatusOr<v1::ListPolicyActionsResponse>(
    const v1::ListPolicyActionsRequest&)>;

class JobReporter {
 public:
  // `store` and `catalog` must outlive the reporter; `mfu` may be null (the report then says
  // the part is missing). `on_enqueued` is called after a commit that enqueued an
  // AdminComment (wake delivery).
  JobReporter(ReportStore* store, const core::GpuCatalog* catalog,
              std::shared_ptr<v1::OfuService::StubInterface> ofu,
              std::shared_ptr<v1::MfuService::StubInterface> mfu, AlertLister alerts,
              ReporterOptions options, std::function<void()> on_enqueued, platform::Logger logger);
  ~JobReporter();

  // The JobEndHook of the alert engine: Request in the evaluating transaction, Wake after.
  bool Request(pqxx::work& tx, const std::string& cluster, const std::string& job_id) const;

  void Start();
  void Stop();
  // Requests were added: look now.
  void Wake();

  // Reports then list the job's policy actions (JobReport.policy_actions). Set before Start.
  void SetPolicyActions(PolicyActionLister lister) { policy_actions_ = std::move(lister); }
  // Reports then carry the job's goodput ledger (ReportSummary.ledger), from the alert
  // engine's replay of its windows (AlertEngine::Ledger). Set before Start.
  using LedgerReader = std::function<absl::StatusOr<std::optional<core::JobLedger>>(
      const std::string& cluster, const std::string& job_id, int gpus_allocated)>;
  void SetLedger(LedgerReader reader) { ledger_ = std::move(reader); }

  // Answers the due requests once; the number of reports written (new or revised).
  absl::StatusOr<int> RunOnce();

  // Assembles the report of a job as revision `revision`, without storing it.
  absl::StatusOr<v1::JobReport> Assemble(const std::string& cluster, const std::string& job_id,
                                         int32_t revision);

  // The report's content hash: everything but its revision, times and AdminComment fields.
  static std::string ContentHash(const v1::JobReport& report);

 private:
  // The target that writes the AdminComment of jobs of `cluster`; nullptr when none.
  const AdminCommentRoute* RouteFor(const std::string& cluster) const;
  void Run();

  ReportStore* store_;
  const core::GpuCatalog* catalog_;
  std::shared_ptr<v1::OfuService::StubInterface> ofu_;
  std::shared_ptr<v1::MfuService::StubInterface> mfu_;
  AlertLister alerts_;
  PolicyActionLister policy_actions_ = nullptr;
  LedgerReader ledger_ = nullptr;
  ReporterOptions options_;
  std::function<void()> on_enqueued_;
  platform::Logger logger_;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  int64_t wakes_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_ = {};
};

}  // namespace goodput::alerting
