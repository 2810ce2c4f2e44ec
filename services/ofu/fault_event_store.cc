#include "services/ofu/fault_event_store.h"

#include "absl/strings/str_cat.h"

namespace goodput::ofu {
namespace {

constexpr char kColumns[] =
    "SELECT e.id, e.cluster, e.host, e.gpu_index, e.gpu_uuid, e.mig_instance_id, "
    "jj.cluster, jj.job_id, (extract(epoch FROM e.event_time) * 1000)::bigint, e.signal, e.xid, "
    "e.value, e.previous_value, e.count, e.counter_reset, e.source ";

// The job's events: attributed to it, or on a GPU it held at the time (the allocation's UUID,
// or its host and index when either side has no UUID; a MIG allocation takes the events of
// its instance and of the whole GPU).
constexpr char kJobEventIds[] =
    "SELECT id FROM gpu_fault_events WHERE job = $1 "
    "UNION SELECT e2.id FROM job_gpus g JOIN gpu_fault_events e2 "
    "ON e2.cluster = g.cluster AND e2.host = g.host AND e2.event_time <@ g.valid "
    "AND ((g.gpu_uuid IS NOT NULL AND e2.gpu_uuid = g.gpu_uuid) OR "
    "(g.gpu_index IS NOT NULL AND e2.gpu_index = g.gpu_index AND "
    "(e2.gpu_uuid IS NULL OR g.gpu_uuid IS NULL))) "
    "AND (g.mig_instance IS NULL OR e2.mig_instance_id IS NULL OR "
    "e2.mig_instance_id = g.mig_instance) "
    "WHERE g.job = $1";

constexpr char kRange[] =
    " AND e.event_time >= timestamptz 'epoch' + $2 * interval '1 millisecond'"
    " AND e.event_time < timestamptz 'epoch' + $3 * interval '1 millisecond'";

// (time, id) after the cursor; $4 = time ms (or NULL), $5 = id.
constexpr char kAfter[] =
    " AND ($4::bigint IS NULL OR (e.event_time, e.id) > "
    "(timestamptz 'epoch' + $4 * interval '1 millisecond', $5::bigint))";

StoredFaultEvent Parse(const pqxx::row& r) {
  StoredFaultEvent e;
  e.id = r[0].as<int64_t>();
  e.cluster = r[1].as<std::string>();
  e.host = r[2].as<std::string>();
  if (!r[3].is_null()) e.gpu_index = r[3].as<int>();
  if (!r[4].is_null()) e.gpu_uuid = r[4].as<std::string>();
  if (!r[5].is_null()) e.mig_instance = r[5].as<int>();
  if (!r[6].is_null()) e.job_cluster = r[6].as<std::string>();
  if (!r[7].is_null()) e.job_id = r[7].as<std::string>();
  e.time_ms = r[8].as<int64_t>();
  e.signal = r[9].as<std::string>();
  if (!r[10].is_null()) e.xid = r[10].as<int64_t>();
  e.value = r[11].as<double>();
  if (!r[12].is_null()) e.previous_value = r[12].as<double>();
  e.count = r[13].as<double>();
  e.counter_reset = r[14].as<bool>();
  e.source = r[15].as<std::string>();
  return e;
}

FaultEventPage ToPage(const pqxx::result& rows, int limit) {
  FaultEventPage page;
  for (const auto& r : rows) {
    if (static_cast<int>(page.events.size()) == limit) {
      page.more = true;
      break;
    }
    page.events.push_back(Parse(r));
  }
  return page;
}

std::optional<int64_t> AfterTime(const FaultEventQuery& q) {
  if (!q.after) return std::nullopt;
  return q.after->first;
}
int64_t AfterId(const FaultEventQuery& q) { return q.after ? q.after->second : 0; }

}  // namespace

absl::StatusOr<FaultEventPage> FaultEventStore::ForJob(int64_t job_row_id,
                                                       const FaultEventQuery& query) {
  // Events on an allocated GPU that were attributed to no job, or to this one, are shown
  // under this job; those attributed to another job keep theirs.
  static const std::string kSql =
      absl::StrCat(kColumns,
                   "FROM gpu_fault_events e LEFT JOIN jobs jj ON jj.id = coalesce(e.job, $1) "
                   "WHERE e.id IN (",
                   kJobEventIds, ")", kRange, " ORDER BY e.event_time, e.id");
  return pool_->RunTransactionFor<FaultEventPage>(
      [&](pqxx::work& txn) -> absl::StatusOr<FaultEventPage> {
        pqxx::result all = txn.exec_params(kSql, job_row_id, query.from_ms, query.to_ms);
        FaultEventPage page;
        page.total = static_cast<int64_t>(all.size());
        for (const auto& r : all) {
          StoredFaultEvent e = Parse(r);
          if (query.after && std::make_pair(e.time_ms, e.id) <= *query.after) continue;
          if (static_cast<int>(page.events.size()) == query.limit) {
            page.more = true;
            break;
          }
          page.events.push_back(std::move(e));
        }
        return page;
      });
}

absl::StatusOr<FaultEventPage> FaultEventStore::ForCluster(const std::string& cluster,
                                                           const std::string& host,
                                                           const FaultEventQuery& query) {
  static const std::string kSql =
      absl::StrCat(kColumns,
                   "FROM gpu_fault_events e LEFT JOIN jobs jj ON jj.id = e.job "
                   "WHERE e.cluster = $1 AND ($6::text = '' OR e.host = $6)",
                   kRange, kAfter, " ORDER BY e.event_time, e.id LIMIT $7");
  return pool_->RunTransactionFor<FaultEventPage>(
      [&](pqxx::work& txn) -> absl::StatusOr<FaultEventPage> {
        pqxx::result rows =
            txn.exec_params(kSql, cluster, query.from_ms, query.to_ms, AfterTime(query),
                            AfterId(query), host, query.limit + 1);
        return ToPage(rows, query.limit);
      });
}

}  // namespace goodput::ofu
