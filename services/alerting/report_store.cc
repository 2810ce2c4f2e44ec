#include "services/ofu/report_store.h"

#include <algorithm>
#include <pqxx/pqxx>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "nlohmann/json.hpp"
#include "services/api/api_convert.h"

namespace goodput::ofu {
namespace {

#define GP_REPORT_MS(expr) "(extract(epoch FROM " expr ") * 1000)::bigint"

// The job's team: its `team` field (the Slurm account the prolog sends), else its `team`
// label. The fleet summary groups by the same expression.
constexpr char kTeamExpr[] = "coalesce(nullif(j.team, ''), j.labels ->> 'team', '')";

// $1 recheck (s), $2 revise_for (s), $3 limit.
constexpr char kCandidates[] =
    "SELECT j.id, j.cluster, j.job_id, r.revision, coalesce(r.content_hash, ''), "
    "coalesce(r.admin_comment_written, '') "
    "FROM jobs j LEFT JOIN job_reports r ON r.job = j.id "
    "WHERE j.end_time IS NOT NULL AND $SHARD AND (r.job IS NULL OR "
    "(r.checked_at < now() - $1::float8 * interval '1 second' AND "
    "(NOT r.final OR r.created_at > now() - $2::float8 * interval '1 second'))) "
    "ORDER BY (r.job IS NOT NULL), j.end_time, j.id LIMIT $3::int";

constexpr char kJobInfo[] =
    "SELECT j.id, j.scheduler, j.user_name, $TEAM, j.name, j.workload_fingerprint, "
    "j.gpu_model, j.state, j.labels::text, " GP_REPORT_MS("j.start_time") ", " GP_REPORT_MS(
        "j.end_time") ", "
                      "(SELECT count(*) FROM (SELECT DISTINCT g.host, g.gpu_index, g.gpu_uuid "
                      "FROM job_gpus g WHERE g.job = j.id) x), "
                      "coalesce((to_jsonb(j) ->> 'gpu_count')::int, 0) "
                      "FROM jobs j WHERE j.cluster = $1 AND j.job_id = $2";

constexpr char kSave[] =
    "INSERT INTO job_reports (job, revision, content_hash, report_pb, wasted_gpu_hours, final, "
    "admin_comment_written, generated_at, checked_at) "
    "VALUES ($1, $2, $3, decode($4, 'base64'), $5, $6, $7, now(), now()) "
    "ON CONFLICT (job) DO UPDATE SET revision = EXCLUDED.revision, "
    "content_hash = EXCLUDED.content_hash, report_pb = EXCLUDED.report_pb, "
    "wasted_gpu_hours = EXCLUDED.wasted_gpu_hours, final = EXCLUDED.final, "
    "admin_comment_written = EXCLUDED.admin_comment_written, generated_at = now(), "
    "checked_at = now()";

constexpr char kTouch[] = "UPDATE job_reports SET checked_at = now() WHERE job = $1";

constexpr char kLoad[] =
    "SELECT encode(report_pb, 'base64'), content_hash FROM job_reports WHERE job = $1";

// $1 from ms, $2 to ms, $3 cluster, $4 user, $5 team, $6 limit; $7 has cursor, $8 its
// wasted GPU-hours, $9 its job row id (keyset: the page starts after the cursor).
constexpr char kList[] =
    "SELECT encode(r.report_pb, 'base64'), r.wasted_gpu_hours, j.id "
    "FROM job_reports r JOIN jobs j ON j.id = r.job "
    "WHERE j.end_time >= timestamptz 'epoch' + $1::bigint * interval '1 millisecond' "
    "AND j.end_time < timestamptz 'epoch' + $2::bigint * interval '1 millisecond' "
    "AND ($3::text = '' OR j.cluster = $3::text) AND ($4::text = '' OR j.user_name = $4::text) "
    "AND ($5::text = '' OR $TEAM = $5::text) "
    "AND (NOT $7::bool OR r.wasted_gpu_hours < $8::float8 "
    "     OR (r.wasted_gpu_hours = $8::float8 AND j.id > $9::bigint)) "
    "ORDER BY r.wasted_gpu_hours DESC, j.id LIMIT $6::int";

// Ended jobs of the range and filters that have no report yet.
constexpr char kPending[] =
    "SELECT count(*) FROM jobs j "
    "WHERE j.end_time >= timestamptz 'epoch' + $1::bigint * interval '1 millisecond' "
    "AND j.end_time < timestamptz 'epoch' + $2::bigint * interval '1 millisecond' "
    "AND ($3::text = '' OR j.cluster = $3::text) AND ($4::text = '' OR j.user_name = $4::text) "
    "AND ($5::text = '' OR $TEAM = $5::text) "
    "AND NOT EXISTS (SELECT 1 FROM job_reports r WHERE r.job = j.id)";

absl::StatusOr<v1::JobReport> ParseReport(const std::string& b64, int64_t job) {
  std::string bytes;
  v1::JobReport report;
  if (!absl::Base64Unescape(b64, &bytes) || !report.ParseFromString(bytes)) {
    return absl::DataLossError(
        absl::StrCat("job_reports: the report of job ", job, " does not parse"));
  }
  return report;
}

}  // namespace

absl::StatusOr<std::vector<ReportCandidate>> ReportStore::Candidates(absl::Duration recheck,
                                                                     absl::Duration revise_for,
                                                                     int limit) {
  const std::string sql =
      absl::StrReplaceAll(kCandidates, {{"$SHARD", ShardFilter(shard_)}});
  return pool_->RunTransactionFor<std::vector<ReportCandidate>>(
      [&](pqxx::work& txn) -> absl::StatusOr<std::vector<ReportCandidate>> {
        pqxx::result r = txn.exec_params(sql, absl::ToDoubleSeconds(recheck),
                                         absl::ToDoubleSeconds(revise_for), limit);
        std::vector<ReportCandidate> out;
        for (const auto& row : r) {
          ReportCandidate c;
          c.job = row[0].as<int64_t>();
          c.cluster = row[1].as<std::string>();
          c.job_id = row[2].as<std::string>();
          if (!row[3].is_null()) c.revision = row[3].as<int32_t>();
          c.content_hash = row[4].as<std::string>();
          c.admin_comment_written = row[5].as<std::string>();
          out.push_back(std::move(c));
        }
        return out;
      });
}

absl::StatusOr<ReportJobInfo> ReportStore::JobInfo(const std::string& cluster,
                                                   const std::string& job_id) {
  const std::string sql = absl::StrReplaceAll(kJobInfo, {{"$TEAM", kTeamExpr}});
  return pool_->RunTransactionFor<ReportJobInfo>(
      [&](pqxx::work& txn) -> absl::StatusOr<ReportJobInfo> {
        pqxx::result r = txn.exec_params(sql, cluster, job_id);
        if (r.empty()) {
          return absl::NotFoundError(
              absl::StrCat("job cluster=\"", cluster, "\" job_id=\"", job_id, "\" is not known"));
        }
        const pqxx::row row = r[0];
        ReportJobInfo info;
        info.id = row[0].as<int64_t>();
        v1::Job& j = info.job;
        j.mutable_key()->set_cluster(cluster);
        j.mutable_key()->set_job_id(job_id);
        j.set_scheduler(api::SchedulerKindFromName(row[1].as<std::string>()));
        j.set_user(row[2].as<std::string>());
        j.set_team(row[3].as<std::string>());
        j.set_name(row[4].as<std::string>());
        j.set_workload_fingerprint(row[5].as<std::string>());
        j.set_gpu_model(row[6].as<std::string>());
        j.set_state(api::JobStateFromName(row[7].as<std::string>()));
        const nlohmann::json labels = nlohmann::json::parse(row[8].as<std::string>(), nullptr,
                                                            /*allow_exceptions=*/false);
        if (labels.is_object()) {
          for (const auto& [k, v] : labels.items()) {
            if (v.is_string()) (*j.mutable_labels())[k] = v.get<std::string>();
          }
        }
        if (!row[9].is_null())
          *j.mutable_start_time() = api::UnixMsToTimestamp(row[9].as<int64_t>());
        if (!row[10].is_null())
          *j.mutable_end_time() = api::UnixMsToTimestamp(row[10].as<int64_t>());
        j.set_gpu_count(std::max(row[11].as<int>(), row[12].as<int>()));
        return info;
      });
}

absl::Status ReportStore::Save(int64_t job, const v1::JobReport& report,
                               const std::string& content_hash,
                               const std::string& admin_comment_written) {
  const std::string pb = absl::Base64Escape(report.SerializeAsString());
  return pool_->RunTransaction([&](pqxx::work& txn) -> absl::Status {
    txn.exec_params(kSave, job, report.summary().revision(), content_hash, pb,
                    report.summary().wasted_gpu_hours(), report.final(), admin_comment_written);
    return absl::OkStatus();
  });
}

absl::Status ReportStore::Touch(int64_t job) {
  return pool_->RunTransaction([&](pqxx::work& txn) -> absl::Status {
    txn.exec_params(kTouch, job);
    return absl::OkStatus();
  });
}

absl::StatusOr<StoredReport> ReportStore::Load(int64_t job) {
  return pool_->RunTransactionFor<StoredReport>(
      [&](pqxx::work& txn) -> absl::StatusOr<StoredReport> {
        pqxx::result r = txn.exec_params(kLoad, job);
        if (r.empty()) return absl::NotFoundError("no report");
        absl::StatusOr<v1::JobReport> report = ParseReport(r[0][0].as<std::string>(), job);
        if (!report.ok()) return report.status();
        return StoredReport{.report = *std::move(report),
                            .content_hash = r[0][1].as<std::string>()};
      });
}

absl::StatusOr<ReportPage> ReportStore::List(const ReportListQuery& q) {
  const std::string list_sql = absl::StrReplaceAll(kList, {{"$TEAM", kTeamExpr}});
  const std::string pending_sql = absl::StrReplaceAll(kPending, {{"$TEAM", kTeamExpr}});
  return pool_->RunTransactionFor<ReportPage>([&](pqxx::work& txn) -> absl::StatusOr<ReportPage> {
    ReportPage page;
    pqxx::result r = txn.exec_params(list_sql, q.from_ms, q.to_ms, q.cluster, q.user, q.team,
                                     q.limit + 1, q.after.has_value(),
                                     q.after ? q.after->wasted_gpu_hours : 0.0,
                                     q.after ? q.after->job_row : int64_t{0});
    for (int i = 0; i < static_cast<int>(r.size()); ++i) {
      if (i == q.limit) {
        page.next = ReportCursor{.wasted_gpu_hours = r[i - 1][1].as<double>(),
                                 .job_row = r[i - 1][2].as<int64_t>()};
        break;
      }
      absl::StatusOr<v1::JobReport> report =
          ParseReport(r[i][0].as<std::string>(), r[i][2].as<int64_t>());
      if (!report.ok()) return report.status();
      page.summaries.push_back(report->summary());
    }
    page.pending_reports =
        txn.exec_params1(pending_sql, q.from_ms, q.to_ms, q.cluster, q.user, q.team)[0]
            .as<int64_t>();
    return page;
  });
}

}  // namespace goodput::ofu
