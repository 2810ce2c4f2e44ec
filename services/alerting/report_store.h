// PostgreSQL storage of job-end reports (migration 0056, table `job_reports`): which ended
// jobs of this shard need a report or a re-check, the job's registry fields for the report,
// and the reports themselves. SQL lives in report_store.cc as named constants.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "goodput/v1/report.pb.h"
#include "services/ofu/ofu_store.h"
#include "services/platform/pg_pool.h"

namespace goodput::ofu {

// An ended job that has no report yet, or whose report is due for a re-check.
struct ReportCandidate {
  int64_t job = 0;
  std::string cluster, job_id;
  // Set when the job has a report.
  std::optional<int32_t> revision;
  std::string content_hash;
  std::string admin_comment_written;
};

// What the report needs from the registry besides the OFU summary.
struct ReportJobInfo {
  int64_t id = 0;
  v1::Job job;  // allocations left out
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
  v1::JobReport report;
  std::string content_hash;
};

class ReportStore {
 public:
  ReportStore(platform::PgPool* pool, ShardConfig shard) : pool_(pool), shard_(shard) {}

  // Ended jobs of this shard without a report, then those whose report was last checked
  // more than `recheck` ago and that are either not final or were first written less than
  // `revise_for` ago; oldest end first, at most `limit`.
  absl::StatusOr<std::vector<ReportCandidate>> Candidates(absl::Duration recheck,
                                                          absl::Duration revise_for, int limit);
  // NOT_FOUND naming the job.
  absl::StatusOr<ReportJobInfo> JobInfo(const std::string& cluster, const std::string& job_id);
  // Writes a (new or revised) report; `admin_comment_written` is what Slurm now holds.
  absl::Status Save(int64_t job, const v1::JobReport& report, const std::string& content_hash,
                    const std::string& admin_comment_written);
  // Marks the report checked without a change.
  absl::Status Touch(int64_t job);
  // The stored report; NOT_FOUND when the job has none.
  absl::StatusOr<StoredReport> Load(int64_t job);
  // Summaries of reports of jobs that ended in [from, to), most wasted first, one page.
  absl::StatusOr<ReportPage> List(const ReportListQuery& query);

 private:
  platform::PgPool* pool_;
  ShardConfig shard_;
};

}  // namespace goodput::ofu
