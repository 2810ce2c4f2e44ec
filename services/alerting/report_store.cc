#include "services/alerting/report_store.h"

#include <algorithm>
#include <exception>
#include <pqxx/pqxx>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "nlohmann/json.hpp"
#include "services/api/api_convert.h"
#include "services/platform/stored_json.h"

namespace goodput::alerting {
namespace {

#define GP_REPORT_MS(expr) "(extract(epoch FROM " expr ") * 1000)::bigint"

// The job's team: its `team` field (the Slurm account the prolog sends), else its `team`
// label. The fleet summary groups by the same expression.
constexpr char kTeamExpr[] = "coalesce(nullif(j.team, ''), j.labels ->> 'team', '')";

// $1 cluster, $2 job id, $3 revise_for (s). Only an ended job whose report may still change.
constexpr char kRequest[] =
    "INSERT INTO job_report_requests (job) "
    "SELECT j.id FROM jobs j LEFT JOIN job_reports r ON r.job = j.id "
    "WHERE j.cluster = $1 AND j.job_id = $2 AND j.end_time IS NOT NULL "
    "  AND (r.job IS NULL OR NOT r.final "
    "       OR r.created_at > now() - $3::float8 * interval '1 second') "
    "ON CONFLICT (job) DO UPDATE SET generation = job_report_requests.generation + 1, "
    "  due_at = now(), attempts = 0, last_error = '' "
    "RETURNING job";

// Ended jobs without a report or a request, and without a window for $2 s, oldest end
// first; $1 limit.
constexpr char kRequestMissing[] =
    "INSERT INTO job_report_requests (job) "
    "SELECT j.id FROM jobs j WHERE j.end_time IS NOT NULL "
    "  AND NOT EXISTS (SELECT 1 FROM job_reports r WHERE r.job = j.id) "
    "  AND NOT EXISTS (SELECT 1 FROM job_report_requests q WHERE q.job = j.id) "
    "  AND NOT EXISTS (SELECT 1 FROM alert_job_state s WHERE s.cluster = j.cluster "
    "    AND s.job_id = j.job_id AND s.updated_at > now() - $2::float8 * interval '1 second') "
    "ORDER BY j.end_time, j.id LIMIT $1::int "
    "ON CONFLICT (job) DO NOTHING";

// $1 lease (s), $2 limit.
constexpr char kClaimDue[] =
    "WITH due AS ("
    "  SELECT job FROM job_report_requests WHERE due_at <= now() "
    "  ORDER BY due_at, job LIMIT $2::int FOR UPDATE SKIP LOCKED), "
    "claimed AS ("
    "  UPDATE job_report_requests q SET due_at = now() + $1::float8 * interval '1 second' "
    "  FROM due WHERE q.job = due.job RETURNING q.job, q.generation, q.attempts) "
    "SELECT c.job, j.cluster, j.job_id, c.generation, c.attempts, r.revision, "
    "  coalesce(r.content_hash, ''), coalesce(r.admin_comment_key, '') "
    "FROM claimed c JOIN jobs j ON j.id = c.job LEFT JOIN job_reports r ON r.job = c.job "
    "ORDER BY j.end_time, c.job";

constexpr char kNextDue[] = "SELECT " GP_REPORT_MS("min(due_at)") " FROM job_report_requests";

constexpr char kDone[] = "DELETE FROM job_report_requests WHERE job = $1 AND generation = $2";

// $1 job, $2 error, $3 delay (s).
constexpr char kRetry[] =
    "UPDATE job_report_requests SET attempts = attempts + 1, last_error = $2, "
    "  due_at = now() + $3::float8 * interval '1 second' WHERE job = $1";

constexpr char kJobInfo[] =
    "SELECT j.id, j.scheduler, j.user_name, $TEAM, j.name, j.workload_fingerprint, "
    "j.gpu_model, j.state, j.labels::text, " GP_REPORT_MS("j.start_time") ", " GP_REPORT_MS(
        "j.end_time") ", "
                      "(SELECT count(*) FROM (SELECT DISTINCT g.host, g.gpu_index, g.gpu_uuid "
                      "FROM job_gpus g WHERE g.job = j.id) x), "
                      "coalesce((to_jsonb(j) ->> 'gpu_count')::int, 0), "
                      "coalesce(to_jsonb(j) ->> 'workload_kind', ''), "
                      "coalesce(to_jsonb(j) ->> 'workload_kind_source', '') "
                      "FROM jobs j WHERE j.cluster = $1 AND j.job_id = $2";

// The increases of a job's serving counters ($1 jobs.id), per metric: summed over series, and
// for the FLOPs estimate (per GPU) averaged over them; a value below the one before is a
// counter that restarted, its increase the value itself.
constexpr char kServingTotals[] =
    "WITH d AS (SELECT metric, engine, model, host, pod, series, sample_time, "
    "  value - lag(value) OVER w AS dv, value FROM serving_samples WHERE job = $1 "
    "  WINDOW w AS (PARTITION BY host, pod, engine, series, metric ORDER BY sample_time)), "
    "per_series AS (SELECT metric, host, pod, engine, series, "
    "  sum(CASE WHEN dv IS NULL THEN 0 WHEN dv < 0 THEN value ELSE dv END) AS inc "
    "  FROM d GROUP BY metric, host, pod, engine, series) "
    "SELECT (SELECT string_agg(DISTINCT engine, ',' ORDER BY engine) FROM d), "
    "  (SELECT string_agg(DISTINCT model, ',' ORDER BY model) FROM d WHERE model <> ''), "
    "  (SELECT coalesce(extract(epoch FROM max(sample_time) - min(sample_time)), 0) FROM d), "
    "  coalesce((SELECT sum(inc) FROM per_series WHERE metric = 'prompt_tokens'), 0), "
    "  coalesce((SELECT sum(inc) FROM per_series WHERE metric = 'generation_tokens'), 0), "
    "  coalesce((SELECT sum(inc) FROM per_series WHERE metric = 'requests'), 0), "
    "  (SELECT avg(inc) FROM per_series WHERE metric = 'flops_per_gpu'), "
    "  EXISTS (SELECT 1 FROM d)";

constexpr char kFindJob[] =
    "SELECT id, end_time IS NOT NULL FROM jobs WHERE cluster = $1 AND job_id = $2";

constexpr char kSave[] =
    "INSERT INTO job_reports (job, revision, content_hash, report_pb, wasted_gpu_hours, final, "
    "admin_comment_key, generated_at, checked_at) "
    "VALUES ($1, $2, $3, decode($4, 'base64'), $5, $6, nullif($7, ''), now(), now()) "
    "ON CONFLICT (job) DO UPDATE SET revision = EXCLUDED.revision, "
    "content_hash = EXCLUDED.content_hash, report_pb = EXCLUDED.report_pb, "
    "wasted_gpu_hours = EXCLUDED.wasted_gpu_hours, final = EXCLUDED.final, "
    "admin_comment_key = EXCLUDED.admin_comment_key, generated_at = now(), "
    "checked_at = now()";

// $1 target, $2 payload, $3 key.
constexpr char kEnqueueAdminComment[] =
    "INSERT INTO alert_outbox (alert_id, kind, target, state, idempotency_key, payload) "
    "VALUES (NULL, 'admin_comment', $1, 'admin_comment', $3, $2::jsonb) "
    "ON CONFLICT (idempotency_key) DO NOTHING";

// An earlier revision's comment for the same job and target that is still pending would
// overwrite the newer one if it were sent after it: $1 target, $2 cluster, $3 job id,
// $4 the new key, $5 the new revision.
constexpr char kSupersedeAdminComments[] =
    "UPDATE alert_outbox SET status = 'dropped', "
    "  last_error = 'superseded by revision ' || $5::text || ' of the report' "
    "WHERE kind = 'admin_comment' AND target = $1 AND status = 'pending' "
    "  AND payload ->> 'cluster' = $2 AND payload ->> 'job_id' = $3 AND idempotency_key <> $4";

constexpr char kTouch[] = "UPDATE job_reports SET checked_at = now() WHERE job = $1";

constexpr char kLoad[] =
    "SELECT encode(r.report_pb, 'base64'), r.content_hash, o.status, coalesce(o.attempts, 0), "
    "  coalesce(o.last_error, '') "
    "FROM job_reports r LEFT JOIN alert_outbox o ON o.idempotency_key = r.admin_comment_key "
    "WHERE r.job = $1";

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

std::string AdminCommentStatus(const std::string& outbox_status, int attempts,
                               const std::string& last_error) {
  if (outbox_status == "delivered") return "written";
  if (outbox_status == "pending") {
    if (attempts == 0) return "queued";
    return absl::StrCat("not written yet (", attempts, attempts == 1 ? " attempt" : " attempts",
                        ", retried): ", last_error);
  }
  if (outbox_status == "failed") return absl::StrCat("not written: ", last_error);
  return last_error;  // dropped: skipped or superseded, with why
}

bool ReportStore::Request(pqxx::work& tx, const std::string& cluster, const std::string& job_id,
                          absl::Duration revise_for) {
  return !tx.exec_params(kRequest, cluster, job_id, absl::ToDoubleSeconds(revise_for)).empty();
}

int ReportStore::RequestMissing(pqxx::work& tx, int limit, absl::Duration quiet_for) {
  return static_cast<int>(
      tx.exec_params(kRequestMissing, limit, absl::ToDoubleSeconds(quiet_for)).affected_rows());
}

absl::StatusOr<std::vector<ReportCandidate>> ReportStore::ClaimDue(absl::Duration lease,
                                                                   int limit) {
  return pool_->RunTransactionFor<std::vector<ReportCandidate>>(
      [&](pqxx::work& txn) -> absl::StatusOr<std::vector<ReportCandidate>> {
        pqxx::result r = txn.exec_params(kClaimDue, absl::ToDoubleSeconds(lease), limit);
        std::vector<ReportCandidate> out;
        for (const auto& row : r) {
          ReportCandidate c;
          c.job = row[0].as<int64_t>();
          c.cluster = row[1].as<std::string>();
          c.job_id = row[2].as<std::string>();
          c.generation = row[3].as<int64_t>();
          c.attempts = row[4].as<int>();
          if (!row[5].is_null()) c.revision = row[5].as<int32_t>();
          c.content_hash = row[6].as<std::string>();
          c.admin_comment_key = row[7].as<std::string>();
          out.push_back(std::move(c));
        }
        return out;
      });
}

absl::StatusOr<std::optional<absl::Time>> ReportStore::NextDue() {
  return pool_->RunTransactionFor<std::optional<absl::Time>>(
      [&](pqxx::work& txn) -> absl::StatusOr<std::optional<absl::Time>> {
        pqxx::result r = txn.exec(kNextDue);
        if (r.empty() || r[0][0].is_null()) return std::optional<absl::Time>();
        return std::optional<absl::Time>(absl::FromUnixMillis(r[0][0].as<int64_t>()));
      });
}

absl::Status ReportStore::Done(int64_t job, int64_t generation) {
  return pool_->RunTransaction([&](pqxx::work& txn) -> absl::Status {
    txn.exec_params(kDone, job, generation);
    return absl::OkStatus();
  });
}

absl::Status ReportStore::Retry(int64_t job, const std::string& error, absl::Duration delay) {
  return pool_->RunTransaction([&](pqxx::work& txn) -> absl::Status {
    txn.exec_params(kRetry, job, error, absl::ToDoubleSeconds(delay));
    return absl::OkStatus();
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
        const absl::StatusOr<nlohmann::json> labels =
            platform::ParseStoredJson(row[8].as<std::string>());
        if (labels.ok() && labels->is_object()) {
          for (const auto& [k, v] : labels->items()) {
            if (v.is_string()) (*j.mutable_labels())[k] = v.get<std::string>();
          }
        }
        if (!row[9].is_null())
          *j.mutable_start_time() = api::UnixMsToTimestamp(row[9].as<int64_t>());
        if (!row[10].is_null())
          *j.mutable_end_time() = api::UnixMsToTimestamp(row[10].as<int64_t>());
        j.set_gpu_count(std::max(row[11].as<int>(), row[12].as<int>()));
        j.set_workload_kind(api::WorkloadKindFromName(row[13].as<std::string>()));
        j.set_workload_kind_source(api::WorkloadKindSourceFromName(row[14].as<std::string>()));
        pqxx::result serving = txn.exec_params(kServingTotals, info.id);
        if (!serving.empty() && serving[0][7].as<bool>()) {
          const pqxx::row s = serving[0];
          ServingTotals t;
          t.engines = s[0].is_null() ? "" : s[0].as<std::string>();
          t.models = s[1].is_null() ? "" : s[1].as<std::string>();
          t.served_s = s[2].as<double>();
          t.prompt_tokens = s[3].as<double>();
          t.generation_tokens = s[4].as<double>();
          t.requests = s[5].as<double>();
          t.has_flops = !s[6].is_null();
          if (t.has_flops) t.flops_per_gpu = s[6].as<double>();
          info.serving = t;
        }
        return info;
      });
}

absl::StatusOr<ReportJobRow> ReportStore::FindJob(const std::string& cluster,
                                                  const std::string& job_id) {
  return pool_->RunTransactionFor<ReportJobRow>(
      [&](pqxx::work& txn) -> absl::StatusOr<ReportJobRow> {
        pqxx::result r = txn.exec_params(kFindJob, cluster, job_id);
        if (r.empty()) {
          return absl::NotFoundError(
              absl::StrCat("job cluster=\"", cluster, "\" job_id=\"", job_id, "\" is not known"));
        }
        return ReportJobRow{.id = r[0][0].as<int64_t>(), .ended = r[0][1].as<bool>()};
      });
}

absl::Status ReportStore::Save(int64_t job, const v1::JobReport& report,
                               const std::string& content_hash,
                               const std::optional<AdminCommentWrite>& admin_comment) {
  const std::string pb = absl::Base64Escape(report.SerializeAsString());
  return pool_->RunTransaction([&](pqxx::work& txn) -> absl::Status {
    std::string key;
    if (admin_comment.has_value()) {
      key = admin_comment->idempotency_key;
      txn.exec_params(kEnqueueAdminComment, admin_comment->target, admin_comment->payload, key);
      txn.exec_params(kSupersedeAdminComments, admin_comment->target, report.job().key().cluster(),
                      report.job().key().job_id(), key, report.summary().revision());
    }
    txn.exec_params(kSave, job, report.summary().revision(), content_hash, pb,
                    report.summary().wasted_gpu_hours(), report.final(), key);
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
        if (!r[0][2].is_null()) {
          report->set_admin_comment_status(AdminCommentStatus(
              r[0][2].as<std::string>(), r[0][3].as<int>(), r[0][4].as<std::string>()));
        }
        return StoredReport{.report = *std::move(report),
                            .content_hash = r[0][1].as<std::string>()};
      });
}

// The reports of a workload's earlier jobs, newest first (jobs_by_fingerprint); a bounded
// look-back, as jobs without energy telemetry or of another GPU model are skipped.
constexpr char kWorkloadReports[] =
    "SELECT encode(r.report_pb, 'base64') FROM jobs j JOIN job_reports r ON r.job = j.id "
    "WHERE j.workload_fingerprint = $1 AND j.id <> $2 "
    "  AND j.start_time < timestamptz 'epoch' + $3::bigint * interval '1 millisecond' "
    "ORDER BY j.start_time DESC LIMIT $4";

absl::StatusOr<std::vector<double>> ReportStore::WorkloadJoulesPerPflop(
    int64_t job, const std::string& fingerprint, const std::string& gpu_model, int64_t before_ms,
    int limit) {
  return pool_->RunTransactionFor<std::vector<double>>(
      [&](pqxx::work& txn) -> absl::StatusOr<std::vector<double>> {
        std::vector<double> out;
        for (const pqxx::row& r :
             txn.exec_params(kWorkloadReports, fingerprint, job, before_ms, 5 * limit)) {
          absl::StatusOr<v1::JobReport> report = ParseReport(r[0].as<std::string>(), job);
          if (!report.ok()) continue;  // an unreadable row is no baseline
          const v1::ReportSummary& s = report->summary();
          if (s.gpu_model() != gpu_model || !s.has_joules_per_pflop()) continue;
          out.push_back(s.joules_per_pflop());
          if (static_cast<int>(out.size()) >= limit) break;
        }
        return out;
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

}  // namespace goodput::alerting
