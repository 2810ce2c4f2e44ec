#include "services/mfu/mfu_store.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "services/api/api_convert.h"

namespace goodput::mfu {
namespace {

// The job's reconciliation is out of date (see reconciliation_store.h).
constexpr char kMarkPending[] =
    "INSERT INTO mfu_reconcile_pending (cluster, job_id) VALUES ($1, $2) "
    "ON CONFLICT (cluster, job_id) DO UPDATE SET "
    "generation = mfu_reconcile_pending.generation + 1, updated_at = now()";

constexpr char kMicrosToTime[] = "(timestamptz 'epoch' + $%d::bigint * interval '1 microsecond')";

// The registered job behind a key, if any.
struct JobInfo {
  bool registered = false;
  std::string gpu_model;
  int64_t allocated_gpu_count = 0;
};

JobInfo LookupJob(pqxx::work& txn, const std::string& cluster, const std::string& job_id) {
  pqxx::result r = txn.exec_params(
      "SELECT j.gpu_model, (SELECT count(*) FROM job_gpus g WHERE g.job = j.id) "
      "FROM jobs j WHERE j.cluster = $1 AND j.job_id = $2",
      cluster, job_id);
  JobInfo info;
  if (r.empty()) return info;
  info.registered = true;
  info.gpu_model = r[0][0].as<std::string>();
  info.allocated_gpu_count = r[0][1].as<int64_t>();
  return info;
}

std::optional<double> OptionalDouble(const pqxx::field& f) {
  if (f.is_null()) return std::nullopt;
  return f.as<double>();
}

std::string EncodePageToken(int64_t interval_start_us, const std::string& report_id) {
  return absl::WebSafeBase64Escape(absl::StrCat(interval_start_us, ":", report_id));
}

absl::Status DecodePageToken(const std::string& token, int64_t* interval_start_us,
                             std::string* report_id) {
  std::string raw;
  std::pair<std::string, std::string> parts;
  if (absl::WebSafeBase64Unescape(token, &raw)) {
    parts = std::pair<std::string, std::string>(absl::StrSplit(raw, absl::MaxSplits(':', 1)));
  }
  if (parts.second.empty() || !absl::SimpleAtoi(parts.first, interval_start_us)) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_token=\"", token.substr(0, 100), "\" is not a token of this listing"));
  }
  *report_id = parts.second;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<StoreOutcome>> MfuStore::Store(
    const std::vector<v1::MfuReport>& reports) {
  const std::string insert = absl::StrCat(
      "INSERT INTO mfu_reports (report_id, cluster, job_id, interval_start, interval_end, "
      "report, precision_assumed, app_mfu, model_tflops_per_gpu, peak_tflops, gpu_model) "
      "VALUES ($1, $2, $3, ",
      absl::StrFormat(kMicrosToTime, 4), ", ", absl::StrFormat(kMicrosToTime, 5),
      ", decode($6, 'base64'), $7, $8, $9, $10, $11) "
      "ON CONFLICT (cluster, report_id) DO NOTHING RETURNING report_id");
  return pool_->RunTransactionFor<std::vector<StoreOutcome>>(
      [&](pqxx::work& txn) -> absl::StatusOr<std::vector<StoreOutcome>> {
        std::map<std::pair<std::string, std::string>, JobInfo> jobs;
        std::set<std::pair<std::string, std::string>> changed;
        std::vector<StoreOutcome> outcomes;
        outcomes.reserve(reports.size());
        for (const v1::MfuReport& report : reports) {
          auto key = std::make_pair(report.job().cluster(), report.job().job_id());
          auto it = jobs.find(key);
          if (it == jobs.end()) {
            it = jobs.emplace(key, LookupJob(txn, key.first, key.second)).first;
          }
          const JobInfo& job = it->second;
          StoreOutcome outcome;
          outcome.job_registered = job.registered;
          outcome.precision_assumed = PrecisionAssumed(report);
          absl::StatusOr<AppMfu> app =
              ComputeAppMfu(report, job.gpu_model, job.allocated_gpu_count, *catalog_);
          if (app.ok()) outcome.app_mfu = *app;
          std::optional<double> app_mfu, tflops, peak;
          std::optional<std::string> model;
          if (outcome.app_mfu) {
            app_mfu = outcome.app_mfu->app_mfu;
            tflops = outcome.app_mfu->model_tflops_per_gpu;
            peak = outcome.app_mfu->peak_tflops;
            model = job.gpu_model;
          }
          pqxx::result r =
              txn.exec_params(insert, report.report_id(), key.first, key.second,
                              api::TimestampToUnixMicros(report.interval().start_time()),
                              api::TimestampToUnixMicros(report.interval().end_time()),
                              absl::Base64Escape(report.SerializeAsString()),
                              outcome.precision_assumed, app_mfu, tflops, peak, model);
          outcome.duplicate = r.empty();
          if (!outcome.duplicate) changed.insert(key);
          outcomes.push_back(std::move(outcome));
        }
        // In key order, so that concurrent batches naming the same jobs cannot deadlock.
        for (const auto& [cluster, job_id] : changed) {
          txn.exec_params(kMarkPending, cluster, job_id);
        }
        return outcomes;
      });
}

absl::StatusOr<v1::ListMfuReportsResponse> MfuStore::List(
    const v1::ListMfuReportsRequest& request) {
  const bool has_job = request.has_job() && !request.job().cluster().empty() &&
                       !request.job().job_id().empty();
  if (!has_job && !request.unattached_only()) {
    return absl::InvalidArgumentError(
        "job (cluster and job_id) is required unless unattached_only is set");
  }
  int64_t limit = request.page_size() <= 0 ? 100 : std::min(request.page_size(), 1000);
  std::optional<int64_t> after_us;
  std::optional<std::string> after_id;
  if (!request.page_token().empty()) {
    int64_t us = 0;
    std::string id;
    if (absl::Status s = DecodePageToken(request.page_token(), &us, &id); !s.ok()) return s;
    after_us = us;
    after_id = id;
  }
  std::optional<int64_t> range_start_us, range_end_us;
  if (request.has_time_range()) {
    const auto& tr = request.time_range();
    if (tr.has_start_time()) range_start_us = api::TimestampToUnixMicros(tr.start_time());
    if (tr.has_end_time()) range_end_us = api::TimestampToUnixMicros(tr.end_time());
  }
  const std::string query = absl::StrCat(
      "SELECT r.report_id, encode(r.report, 'base64'), "
      "       (extract(epoch FROM r.received_at) * 1000000)::bigint, r.precision_assumed, "
      "       r.app_mfu, r.model_tflops_per_gpu, r.peak_tflops, r.gpu_model, "
      "       j.id IS NOT NULL, coalesce(j.gpu_model, ''), "
      "       (SELECT count(*) FROM job_gpus g WHERE g.job = j.id), "
      "       (extract(epoch FROM r.interval_start) * 1000000)::bigint "
      "FROM mfu_reports r LEFT JOIN jobs j ON j.cluster = r.cluster AND j.job_id = r.job_id "
      "WHERE ($1 = '' OR r.cluster = $1) AND ($2 = '' OR r.job_id = $2) "
      "  AND (NOT $3 OR j.id IS NULL) "
      "  AND ($4::bigint IS NULL OR r.interval_end > ",
      absl::StrFormat(kMicrosToTime, 4), ") AND ($5::bigint IS NULL OR r.interval_start < ",
      absl::StrFormat(kMicrosToTime, 5), ") AND ($6::bigint IS NULL OR (r.interval_start, "
      "r.report_id) > (", absl::StrFormat(kMicrosToTime, 6), ", $7)) "
      "ORDER BY r.interval_start, r.report_id LIMIT $8");
  const std::string update =
      "UPDATE mfu_reports SET app_mfu = $2, model_tflops_per_gpu = $3, peak_tflops = $4, "
      "gpu_model = $5 WHERE report_id = $1 AND cluster = $6";
  return pool_->RunTransactionFor<v1::ListMfuReportsResponse>(
      [&](pqxx::work& txn) -> absl::StatusOr<v1::ListMfuReportsResponse> {
        v1::ListMfuReportsResponse response;
        pqxx::result rows = txn.exec_params(
            query, has_job ? request.job().cluster() : std::string(),
            has_job ? request.job().job_id() : std::string(), request.unattached_only(),
            range_start_us, range_end_us, after_us, after_id.value_or(std::string()),
            limit + 1);
        int64_t count = 0;
        for (const auto& row : rows) {
          if (count == limit) {
            const v1::StoredMfuReport& last = response.reports(response.reports_size() - 1);
            response.set_next_page_token(
                EncodePageToken(api::TimestampToUnixMicros(last.report().interval().start_time()),
                                last.report().report_id()));
            break;
          }
          ++count;
          v1::StoredMfuReport* stored = response.add_reports();
          std::string bytes;
          if (!absl::Base64Unescape(row[1].as<std::string>(), &bytes) ||
              !stored->mutable_report()->ParseFromString(bytes)) {
            return absl::DataLossError(absl::StrCat("stored report ",
                                                    row[0].as<std::string>(),
                                                    " cannot be parsed"));
          }
          *stored->mutable_receive_time() = api::UnixMicrosToTimestamp(row[2].as<int64_t>());
          // Keep the page token exact to the stored microsecond.
          *stored->mutable_report()->mutable_interval()->mutable_start_time() =
              api::UnixMicrosToTimestamp(row[11].as<int64_t>());
          stored->set_precision_assumed(row[3].as<bool>());
          const bool registered = row[8].as<bool>();
          stored->set_job_registered(registered);
          std::optional<double> app_mfu = OptionalDouble(row[4]);
          std::optional<double> tflops = OptionalDouble(row[5]);
          std::optional<double> peak = OptionalDouble(row[6]);
          const std::string computed_for = row[7].is_null() ? "" : row[7].as<std::string>();
          const std::string job_model = row[9].as<std::string>();
          // Attach lazily: the job registered (or got its GPU model) after the report came.
          if (registered && !job_model.empty() && (!app_mfu || computed_for != job_model)) {
            absl::StatusOr<AppMfu> app =
                ComputeAppMfu(stored->report(), job_model, row[10].as<int64_t>(), *catalog_);
            if (app.ok()) {
              app_mfu = app->app_mfu;
              tflops = app->model_tflops_per_gpu;
              peak = app->peak_tflops;
              txn.exec_params(update, stored->report().report_id(), app_mfu, tflops, peak,
                              job_model, stored->report().job().cluster());
            }
          }
          if (app_mfu) stored->set_app_mfu(*app_mfu);
          if (tflops) stored->set_model_tflops_per_gpu(*tflops);
          if (peak) stored->set_peak_tflops(*peak);
        }
        return response;
      });
}

}  // namespace goodput::mfu
