#include "services/ingest/serving_store.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "services/api/api_checks.h"

namespace goodput::ingest {
namespace {

constexpr char kJobsById[] =
    "SELECT job_id, id FROM jobs WHERE cluster = $1 AND job_id = ANY($2::text[])";

// Allocations on the batch's hosts that overlap its time span, in milliseconds.
constexpr char kAllocationsOnHosts[] =
    "SELECT host, job, (extract(epoch FROM lower(valid)) * 1000)::bigint, "
    "CASE WHEN upper_inf(valid) THEN NULL ELSE (extract(epoch FROM upper(valid)) * 1000)::bigint "
    "END FROM job_gpus WHERE cluster = $1 AND host = ANY($2::text[]) "
    "AND valid && tstzrange(to_timestamp($3::bigint / 1000.0), "
    "to_timestamp($4::bigint / 1000.0), '[]')";

constexpr char kInsertServing[] =
    "INSERT INTO serving_samples (cluster, host, pod, engine, model, series, metric, "
    "sample_time, value, job, batch_id) "
    "SELECT $1, r.host, r.pod, r.engine, r.model, r.series, r.metric, "
    "to_timestamp(r.t / 1000.0), r.v, r.job, $2 "
    "FROM unnest($3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], "
    "$9::bigint[], $10::float8[], $11::bigint[]) "
    "AS r(host, pod, engine, model, series, metric, t, v, job) "
    "ON CONFLICT DO NOTHING";

// Jobs with no kind that had run for the threshold at the time of their latest serving
// sample in this batch ($2: job ids, $3: those sample times, $4: threshold ms).
constexpr char kInferInference[] =
    "UPDATE jobs j SET workload_kind = 'inference', workload_kind_source = 'inferred', "
    "updated_at = now() FROM unnest($2::bigint[], $3::bigint[]) AS s(job, t) "
    "WHERE j.id = s.job AND j.cluster = $1 AND j.workload_kind IS NULL "
    "AND j.start_time <= to_timestamp((s.t - $4::bigint) / 1000.0)";

// PostgreSQL array literals, built element by element.
struct Arrays {
  std::string host = "{", pod = "{", engine = "{", model = "{", series = "{", metric = "{",
              time = "{", value = "{", job = "{";
  void Close() {
    for (std::string* a : {&host, &pod, &engine, &model, &series, &metric, &time, &value, &job}) {
      a->push_back('}');
    }
  }
};

void AddText(std::string* array, const std::string& value) {
  if (array->size() > 1) array->push_back(',');
  array->push_back('"');
  for (char c : value) {
    if (c == '"' || c == '\\') array->push_back('\\');
    array->push_back(c);
  }
  array->push_back('"');
}

void AddRaw(std::string* array, const std::string& value) {
  if (array->size() > 1) array->push_back(',');
  array->append(value);
}

}  // namespace

absl::StatusOr<ServingOutcome> ServingStore::Store(const ServingBatch& batch,
                                                   const std::string& batch_id) {
  ServingOutcome outcome;
  if (batch.samples.empty()) return outcome;
  // Text PostgreSQL cannot hold (NUL, broken UTF-8, over-long) is refused sample by sample.
  std::vector<const ServingSample*> kept;
  for (size_t i = 0; i < batch.samples.size(); ++i) {
    const ServingSample& s = batch.samples[i];
    std::optional<std::string> problem;
    const char* field = "";
    const std::pair<const char*, const std::string*> texts[] = {
        {"host", &s.host}, {"pod", &s.pod}, {"model_name", &s.model}, {"series labels", &s.series}};
    for (const auto& [name, value] : texts) {
      problem = api::CheckText(*value, api::kMaxLabelValueBytes, api::TextKind::kFreeText);
      if (problem) {
        field = name;
        break;
      }
    }
    if (problem) {
      Refusal r;
      r.batch_id = batch_id;
      r.index = static_cast<int64_t>(i);
      r.field = field;
      r.code = RefusalCode::kMalformed;
      r.message = absl::StrCat("serving sample ", i, " of batch ", batch_id, " (", s.engine,
                               "): ", field, " ", *problem);
      outcome.refusals.push_back(std::move(r));
      ++outcome.refused;
      continue;
    }
    kept.push_back(&s);
  }
  if (kept.empty()) return outcome;

  return pool_->RunTransactionFor<ServingOutcome>(
      [&](pqxx::work& txn) -> absl::StatusOr<ServingOutcome> {
        ServingOutcome result = outcome;
        // Jobs the labels name.
        std::set<std::string> ids;
        std::set<std::string> hosts;
        int64_t min_ms = kept.front()->time_unix_ms;
        int64_t max_ms = min_ms;
        for (const ServingSample* s : kept) {
          ids.insert(s->job_ids.begin(), s->job_ids.end());
          if (!s->host.empty()) hosts.insert(s->host);
          min_ms = std::min(min_ms, s->time_unix_ms);
          max_ms = std::max(max_ms, s->time_unix_ms);
        }
        absl::flat_hash_map<std::string, int64_t> job_by_id;
        if (!ids.empty()) {
          std::string array = "{";
          for (const std::string& id : ids) AddText(&array, id);
          array.push_back('}');
          for (const auto& row : txn.exec_params(kJobsById, batch.cluster, array)) {
            job_by_id[row[0].as<std::string>()] = row[1].as<int64_t>();
          }
        }
        struct Held {
          int64_t job;
          int64_t start_ms;
          std::optional<int64_t> end_ms;
        };
        std::map<std::string, std::vector<Held>> held_on;
        if (!hosts.empty()) {
          std::string array = "{";
          for (const std::string& h : hosts) AddText(&array, h);
          array.push_back('}');
          for (const auto& row :
               txn.exec_params(kAllocationsOnHosts, batch.cluster, array, min_ms, max_ms)) {
            held_on[row[0].as<std::string>()].push_back(
                {row[1].as<int64_t>(), row[2].as<int64_t>(),
                 row[3].is_null() ? std::nullopt : std::optional<int64_t>(row[3].as<int64_t>())});
          }
        }
        Arrays a;
        std::map<int64_t, int64_t> latest_by_job;
        for (const ServingSample* s : kept) {
          std::optional<int64_t> job;
          for (const std::string& id : s->job_ids) {
            if (auto it = job_by_id.find(id); it != job_by_id.end()) {
              job = it->second;
              break;
            }
          }
          if (!job && !s->host.empty()) {
            std::set<int64_t> holders;
            if (auto it = held_on.find(s->host); it != held_on.end()) {
              for (const Held& h : it->second) {
                if (h.start_ms <= s->time_unix_ms && (!h.end_ms || s->time_unix_ms < *h.end_ms)) {
                  holders.insert(h.job);
                }
              }
            }
            if (holders.size() == 1) job = *holders.begin();
          }
          if (job) {
            int64_t& latest = latest_by_job[*job];
            latest = std::max(latest, s->time_unix_ms);
          } else {
            ++result.unattributed;
          }
          AddText(&a.host, s->host);
          AddText(&a.pod, s->pod);
          AddText(&a.engine, s->engine);
          AddText(&a.model, s->model);
          AddText(&a.series, s->series);
          AddText(&a.metric, std::string(ServingMetricName(s->metric)));
          AddRaw(&a.time, absl::StrCat(s->time_unix_ms));
          AddRaw(&a.value, absl::StrFormat("%.17g", s->value));
          AddRaw(&a.job, job ? absl::StrCat(*job) : "NULL");
        }
        a.Close();
        const pqxx::result inserted =
            txn.exec_params(kInsertServing, batch.cluster, batch_id, a.host, a.pod, a.engine,
                            a.model, a.series, a.metric, a.time, a.value, a.job);
        result.stored = static_cast<int64_t>(inserted.affected_rows());
        result.duplicates = static_cast<int64_t>(kept.size()) - result.stored;
        if (!latest_by_job.empty()) {
          std::string jobs = "{", times = "{";
          for (const auto& [job, t] : latest_by_job) {
            AddRaw(&jobs, absl::StrCat(job));
            AddRaw(&times, absl::StrCat(t));
          }
          jobs.push_back('}');
          times.push_back('}');
          result.inferred_jobs = static_cast<int64_t>(
              txn.exec_params(kInferInference, batch.cluster, jobs, times, infer_after_ms_)
                  .affected_rows());
        }
        return result;
      });
}

absl::StatusOr<int64_t> ServingStore::ForgetBefore(int64_t cutoff_unix_ms, int64_t limit) {
  return pool_->RunTransactionFor<int64_t>([&](pqxx::work& txn) -> absl::StatusOr<int64_t> {
    return static_cast<int64_t>(
        txn.exec_params("DELETE FROM serving_samples WHERE ctid = ANY(ARRAY(SELECT ctid FROM "
                        "serving_samples WHERE sample_time < to_timestamp($1::bigint / 1000.0) "
                        "LIMIT $2))",
                        cutoff_unix_ms, limit)
            .affected_rows());
  });
}

}  // namespace goodput::ingest
