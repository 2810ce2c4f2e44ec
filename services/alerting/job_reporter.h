// The job-end reporter of goodput-ofu. ofu follows every job's windows to its end, so it is
// the service that learns a job has ended and can reach the others: for each ended job of
// its shard it assembles a goodput.v1.JobReport from what already exists — its own job
// summary (OfuServiceImpl::DoGetJobSummary), mfu's reconciliation verdict
// (MfuService.GetReconciliation) and alerting's alerts of the job (AlertService.ListAlerts) —
// adds advice (services/api/job_report.h), stores it (report_store.h) and, for Slurm jobs when
// configured, writes its compact summary into the job's AdminComment (argv, no shell) with
// `sacctmgr -i update job where jobid=<id> set AdminComment=<summary>` (slurmdbd; finished
// jobs too, as jobstats does; sacctmgr lower-cases the value, so the summary is spelled in
// base32 there) or `scontrol -- update JobId=<id> AdminComment=<summary>` (slurmctld; Slurm
// refuses it once the job has finished, COMPLETING included).
//
// Revisions: a stored report is re-assembled every `recheck` while its windows are not all
// final, and for `revise_for` after the job's end (alerts found after the end, such as a
// regression against a later baseline, arrive then); a new revision is written, and the
// AdminComment rewritten, only when the content changed.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "goodput/v1/alert.grpc.pb.h"
#include "goodput/v1/mfu.grpc.pb.h"
#include "goodput/v1/report.pb.h"
#include "services/api/job_report.h"
#include "services/core/gpu_catalog.h"
#include "services/ofu/ofu_service.h"
#include "services/ofu/report_store.h"
#include "services/platform/logging.h"
#include "services/platform/poll_loop.h"

namespace goodput::ofu {

struct ReporterOptions {
  absl::Duration poll_interval = absl::Seconds(10);
  absl::Duration recheck = absl::Seconds(60);
  absl::Duration revise_for = absl::Hours(24);
  int batch = 50;
  // Calls to mfu and alerting.
  absl::Duration rpc_timeout = absl::Seconds(10);
  std::string token = {};
  // AdminComment of Slurm jobs: off, through slurmctld (scontrol: only while Slurm has not
  // finished the job), or through slurmdbd (sacctmgr, as jobstats does: finished jobs too).
  enum class AdminCommentMode { kOff, kScontrol, kSacctmgr };
  AdminCommentMode admin_comment = AdminCommentMode::kOff;
  std::string scontrol_path = "scontrol";
  std::string sacctmgr_path = "sacctmgr";
  std::string slurm_conf = {};  // SLURM_CONF for scontrol/sacctmgr; empty: Slurm's default
  absl::Duration command_timeout = absl::Seconds(15);
};

class JobReporter {
 public:
  // `ofu`, `store` and `catalog` must outlive the reporter; `mfu` and `alerting` may be null
  // (the report then says the part is missing).
  JobReporter(ReportStore* store, OfuServiceImpl* ofu, const core::GpuCatalog* catalog,
              std::shared_ptr<v1::MfuService::StubInterface> mfu,
              std::shared_ptr<v1::AlertService::StubInterface> alerting, ReporterOptions options,
              platform::Logger logger);
  ~JobReporter();

  void Start();
  void Stop();
  void Wake();

  // One pass over the candidates; the number of reports written (new or revised).
  absl::StatusOr<int> RunOnce();

  // Assembles the report of a job as revision `revision`, without storing or writing it.
  absl::StatusOr<v1::JobReport> Assemble(const std::string& cluster, const std::string& job_id,
                                         int32_t revision);

  // The report's content hash: everything but its revision, times and AdminComment fields.
  static std::string ContentHash(const v1::JobReport& report);

 private:
  // The AdminComment spelling the configured writer keeps intact.
  api::AdminCommentEncoding CommentEncoding() const;
  // Writes `comment` into the Slurm job's AdminComment; OK or the reason it failed
  // (FAILED_PRECONDITION when Slurm refuses it for good: the job has finished).
  absl::Status WriteAdminComment(const std::string& job_id, const std::string& comment);

  ReportStore* store_;
  OfuServiceImpl* ofu_;
  const core::GpuCatalog* catalog_;
  std::shared_ptr<v1::MfuService::StubInterface> mfu_;
  std::shared_ptr<v1::AlertService::StubInterface> alerting_;
  ReporterOptions options_;
  platform::Logger logger_;
  std::unique_ptr<platform::PollLoop> loop_;
};

}  // namespace goodput::ofu
