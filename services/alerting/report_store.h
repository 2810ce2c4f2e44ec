// PostgreSQL storage of job-end reports (migrations 0056 and 20261128184500): the requests
// that say a job's report is due (job_report_requests), the job's registry fields for the
// report, and the reports themselves (job_reports). SQL lives in report_store.cc as named constants.
//
// A request is added in the transaction of the event that changes the report (job_reporter.h
// RequestReport: an ended job's evaluation reached its end, or its alerts changed), so a
// crash between the event and the report loses nothing; the reporter claims due requests
// (FOR UPDATE SKIP LOCKED, so replicas never assemble the same job at once), and deletes a
// request once its report is stored, unless a newer event renewed it meanwhile.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "goodput/v1/report.pb.h"
#include "services/platform/pg_pool.h"

namespace goodput::alerting {

// A due request: an ended job whose report is to be assembled (again).
struct ReportCandidate {
  int64_t job = 0;
  std::string cluster, job_id;
  int64_t generation = 0;  // of the request: a newer event renews it
  int attempts = 0;        // assemblies of this request that failed
  // Set when the job has a report.
  std::optional<int32_t> revision;
  std::string content_hash;
  std::string admin_comment_key;  // outbox key of the report's AdminComment ('' when none)
};

// What the report needs from the registry besides the OFU summary.
// What a job's serving engines counted over the job (serving_samples), increases of their
// counters summed over series (a counter that went down restarted from 0).
struct ServingTotals {
  std::string engines;  // comma-separated
  std::string models;
  double prompt_tokens = 0;
  double generation_tokens = 0;
  double requests = 0;
  double flops_per_gpu = 0;  // mean over the series that export it
  bool has_flops = false;
  double served_s = 0;
};

struct ReportJobInfo {
  int64_t id = 0;
  v1::Job job;  // allocations left out
  std::optional<ServingTotals> serving;  // none when the job sent no serving metrics
};

// Where a page of ListJobReports ends: the last summary's wasted GPU-hours and job row.
struct ReportCursor {
  double wasted_gpu_hours = 0;
  int64_t job_row = 0;
};

// A ListJobReports query: jobs that ended in [from_ms, to_ms), filters ('' for all), a page.
struct ReportListQuery {
  int64_t from_ms = 0;
  int64_t to_ms = 0;
  std::string cluster = {};
  std::string user = {};
  std::string team = {};
  int limit = 100;
  std::optional<ReportCursor> after = {};
};

struct ReportPage {
  std::vector<v1::ReportSummary> summaries = {};
  std::optional<ReportCursor> next = {};  // set when more follow
  int64_t pending_reports = 0;            // ended jobs of the query without a report yet
};

struct StoredReport {
  v1::JobReport report;  // admin_comment_status as the outbox has it now
  std::string content_hash;
};

// A job of the registry as GetJobReport needs it.
struct ReportJobRow {
  int64_t id = 0;
  bool ended = false;
};

// The AdminComment of a new revision, enqueued in the transaction that stores it.
struct AdminCommentWrite {
  std::string target = {};
  std::string payload = {};          // AdminCommentPayloadToJson
  std::string idempotency_key = {};  // AdminCommentIdempotencyKey
};

class ReportStore {
 public:
  explicit ReportStore(platform::PgPool* pool) : pool_(pool) {}

  // Adds (or renews) the request of the job inside the caller's transaction when the job has
  // ended and its report may still change: it has none, it is not final, or its first
  // revision is younger than `revise_for`. Returns whether a request was added or renewed.
  static bool Request(pqxx::work& tx, const std::string& cluster, const std::string& job_id,
                      absl::Duration revise_for);
  // Ended jobs that have neither a report nor a request and to which no window came for
  // `quiet_for` (ended without telemetry, or telemetry that stopped before the job's end):
  // adds their requests, at most `limit`. Returns how many.
  static int RequestMissing(pqxx::work& tx, int limit, absl::Duration quiet_for);

  // Due requests (oldest due first, at most `limit`), leased until `lease` from now.
  absl::StatusOr<std::vector<ReportCandidate>> ClaimDue(absl::Duration lease, int limit);
  // When the next request is due; nullopt when there is none.
  absl::StatusOr<std::optional<absl::Time>> NextDue();
  // The request of `job` is answered: deleted unless an event renewed it since its claim.
  absl::Status Done(int64_t job, int64_t generation);
  // The request could not be answered: due again after `delay`.
  absl::Status Retry(int64_t job, const std::string& error, absl::Duration delay);

  // NOT_FOUND naming the job.
  absl::StatusOr<ReportJobInfo> JobInfo(const std::string& cluster, const std::string& job_id);
  absl::StatusOr<ReportJobRow> FindJob(const std::string& cluster, const std::string& job_id);
  // Writes a (new or revised) report, and its AdminComment into the outbox when given (an
  // earlier revision's comment still pending for the same target is superseded: dropped).
  absl::Status Save(int64_t job, const v1::JobReport& report, const std::string& content_hash,
                    const std::optional<AdminCommentWrite>& admin_comment);
  // Marks the report checked without a change.
  absl::Status Touch(int64_t job);
  // The stored report; NOT_FOUND when the job has none.
  absl::StatusOr<StoredReport> Load(int64_t job);
  // Joules per PFLOP of tensor work of the most recent earlier jobs (started before
  // `before_ms`, other than row `job`) of workload `fingerprint` on `gpu_model` whose reports
  // have one: up to `limit`, most recent first (the energy baseline of a workload).
  absl::StatusOr<std::vector<double>> WorkloadJoulesPerPflop(int64_t job,
                                                             const std::string& fingerprint,
                                                             const std::string& gpu_model,
                                                             int64_t before_ms, int limit);
  // Summaries of reports of jobs that ended in [from, to), most wasted first, one page.
  absl::StatusOr<ReportPage> List(const ReportListQuery& query);

 private:
  platform::PgPool* pool_;
};

// The report's AdminComment status from its outbox row: "written" once delivered, the error
// while it is retried or once it failed, "queued" before the first attempt.
std::string AdminCommentStatus(const std::string& outbox_status, int attempts,
                               const std::string& last_error);

}  // namespace goodput::alerting
