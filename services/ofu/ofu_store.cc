#include "services/ofu/ofu_store.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "nlohmann/json.hpp"
#include "services/platform/stored_json.h"

namespace goodput::ofu {
namespace {

constexpr int64_t kNoTime = std::numeric_limits<int64_t>::min();

// Milliseconds since the epoch of a timestamptz expression.
#define GOODPUT_MS(expr) "(extract(epoch FROM " expr ") * 1000)::bigint"

constexpr char kShardFilter[] =
    "((hashtextextended(j.cluster || '/' || j.job_id, 0) % $SC) + $SC) % $SC = $SI";

// The highest seq handed out so far (a fresh sequence has handed out none: last_value is
// then the first value to come).
constexpr char kSequenceValue[] =
    "SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM samples_seq";
constexpr char kSnapshot[] =
    "SELECT pg_snapshot_xmin(pg_current_snapshot())::text, "
    "pg_snapshot_xmax(pg_current_snapshot())::text";

constexpr char kSampleColumns[] =
    "s.seq, s.job, s.host, s.gpu_index, coalesce(s.gpu_uuid, ''), coalesce(s.gpu_model, ''), " GOODPUT_MS(
        "s.sample_time") ", s.tensor_active, s.sm_clock_mhz, s.dram_active, s.gr_engine_active, "
                         "s.fb_used_mib, s.power_w, s.energy_mj, s.mig_instance_id, coalesce(s.mig_profile, ''), "
    "s.labels ->> 'gpu_shared_by', s.sm_active";

constexpr char kLoadState[] =
    "SELECT xid_done::text, xid_round_end::text, seq_cursor, seq_floor, samples_consumed, "
    "commit_seq "
    "FROM ofu_consumer_state WHERE shard_index = $1 AND shard_count = $2";

constexpr char kSaveState[] =
    "INSERT INTO ofu_consumer_state (shard_index, shard_count, xid_done, xid_round_end, "
    "seq_cursor, seq_floor, samples_consumed, commit_seq, updated_at) "
    "VALUES ($1, $2, $3::xid8, $4::xid8, $5, $6, $7, $8, now()) "
    "ON CONFLICT (shard_index, shard_count) DO UPDATE SET xid_done = EXCLUDED.xid_done, "
    "xid_round_end = EXCLUDED.xid_round_end, seq_cursor = EXCLUDED.seq_cursor, "
    "seq_floor = EXCLUDED.seq_floor, samples_consumed = EXCLUDED.samples_consumed, "
    "commit_seq = EXCLUDED.commit_seq, "
    "updated_at = now()";

constexpr char kJobColumns[] =
    "j.id, j.cluster, j.job_id, j.gpu_model, coalesce(nullif(j.team, ''), j.labels ->> 'team', ''), "
    "j.scheduler, j.workload_fingerprint, "
    "j.state, greatest((SELECT count(*) FROM (SELECT DISTINCT g.host, g.gpu_index, g.gpu_uuid "
    "FROM job_gpus g WHERE g.job = j.id) x), coalesce((to_jsonb(j) ->> 'gpu_count')::int, 0)), "
    "" GOODPUT_MS("j.start_time") ", " GOODPUT_MS("j.end_time") ", " GOODPUT_MS(
        "st.final_before") ", " GOODPUT_MS("st.max_event_time") ", coalesce(st.late_sample_count, 0), j.user_name";

constexpr char kWindowColumns[] =
    "w.job, w.gpu, " GOODPUT_MS(
        "w.start_time") ", w.window_s, w.gpu_model, w.ofu, w.ofu_stddev, w.ofu_ci95_half_width, "
                        "w.sample_count, w.gpus_reporting, w.gpus_allocated, w.gpu_coverage, "
                        "w.gpu_ofu_min, w.gpu_ofu_median, w.gpu_ofu_max, w.tensor_active_mean, "
                        "w.sm_clock_mhz_mean, w.flags, w.spatial_imbalance, w.temporal_imbalance, "
                        "w.stragglers::text, array_to_json(w.idle_gpus)::text, w.roofline_class, "
                        "w.hbm_peak_fraction, w.energy_j, w.power_w_mean, w.late_sample_count, "
                        "w.revision, w.finalized, w.gpu_equivalents, w.activity::text";

double D(const pqxx::field& f) { return f.is_null() ? kNoValue : f.as<double>(); }
std::optional<double> OptD(const pqxx::field& f) {
  if (f.is_null()) return std::nullopt;
  return f.as<double>();
}
int64_t Ms(const pqxx::field& f) { return f.is_null() ? kNoTime : f.as<int64_t>(); }

std::string Num(std::optional<double> v) {
  if (!v.has_value() || !std::isfinite(*v)) return "NULL";
  return absl::StrFormat("%.17g", *v);
}
std::string Num(double v) { return Num(std::optional<double>(v)); }
std::string TimeSql(int64_t ms) {
  if (ms == kNoTime) return "NULL";
  return absl::StrCat("(timestamptz 'epoch' + ", ms, " * interval '1 millisecond')");
}

uint64_t XidValue(const std::string& s) {
  uint64_t v = 0;
  if (!absl::SimpleAtoi(s, &v)) return 0;
  return v;
}

JobRow ParseJob(const pqxx::row& r) {
  JobRow j;
  j.id = r[0].as<int64_t>();
  j.cluster = r[1].as<std::string>();
  j.job_id = r[2].as<std::string>();
  j.gpu_model = r[3].as<std::string>();
  j.team = r[4].as<std::string>();
  j.scheduler = r[5].as<std::string>();
  j.workload_fingerprint = r[6].as<std::string>();
  j.state = r[7].as<std::string>();
  j.gpus_allocated = r[8].as<int>();
  if (!r[9].is_null()) j.start_ms = r[9].as<int64_t>();
  if (!r[10].is_null()) j.end_ms = r[10].as<int64_t>();
  j.late_sample_count = r[13].as<int64_t>();
  j.user = r[14].as<std::string>();
  return j;
}

// The job-level activity figures and silent GPUs (migration 20261128210000), one jsonb:
// {"gr_mean", "sm_mean", "tensor_max", "sm_max", "gr_max": numbers when known,
//  "silent": [{"gpu", "last_ms", "host"}]}. NULL when there is nothing to say.
std::optional<nlohmann::json> ActivityJson(const WindowResult& w) {
  nlohmann::json j = nlohmann::json::object();
  const auto put = [&](const char* key, const std::optional<double>& v) {
    if (v.has_value() && std::isfinite(*v)) j[key] = *v;
  };
  put("gr_mean", w.gr_engine_active_mean);
  put("sm_mean", w.sm_active_mean);
  put("tensor_max", w.gpu_tensor_active_max);
  put("sm_max", w.gpu_sm_active_max);
  put("gr_max", w.gpu_gr_engine_active_max);
  if (!w.silent_gpus.empty()) {
    nlohmann::json silent = nlohmann::json::array();
    for (const SilentGpuResult& g : w.silent_gpus) {
      silent.push_back({{"gpu", g.gpu}, {"last_ms", g.last_sample_ms}, {"host", g.host_silent}});
    }
    j["silent"] = std::move(silent);
  }
  if (j.empty()) return std::nullopt;
  return j;
}

// Entries of another shape are left out, never thrown on.
void ParseActivity(const std::string& text, WindowResult& w) {
  absl::StatusOr<nlohmann::json> j = platform::ParseStoredJson(text);
  if (!j.ok() || !j->is_object()) return;
  const auto get = [&](const char* key) -> std::optional<double> {
    const auto it = j->find(key);
    if (it == j->end() || !it->is_number()) return std::nullopt;
    return it->get<double>();
  };
  w.gr_engine_active_mean = get("gr_mean");
  w.sm_active_mean = get("sm_mean");
  w.gpu_tensor_active_max = get("tensor_max");
  w.gpu_sm_active_max = get("sm_max");
  w.gpu_gr_engine_active_max = get("gr_max");
  const auto silent = j->find("silent");
  if (silent == j->end() || !silent->is_array()) return;
  for (const auto& g : *silent) {
    if (!g.is_object() || !g.contains("gpu") || !g["gpu"].is_string()) continue;
    SilentGpuResult out{.gpu = g["gpu"].get<std::string>()};
    if (g.contains("last_ms") && g["last_ms"].is_number_integer()) {
      out.last_sample_ms = g["last_ms"].get<int64_t>();
    }
    out.host_silent = g.contains("host") && g["host"].is_boolean() && g["host"].get<bool>();
    w.silent_gpus.push_back(std::move(out));
  }
}

StoredWindow ParseWindow(const pqxx::row& r, int o) {
  StoredWindow s;
  WindowResult& w = s.result;
  w.job = r[o + 0].as<int64_t>();
  w.gpu = r[o + 1].as<std::string>();
  w.start_ms = r[o + 2].as<int64_t>();
  s.window_s = r[o + 3].as<int32_t>();
  w.end_ms = w.start_ms + int64_t{s.window_s} * 1000;
  w.gpu_model = r[o + 4].as<std::string>();
  w.ofu = OptD(r[o + 5]);
  w.ofu_stddev = r[o + 6].as<double>();
  w.ofu_ci95_half_width = OptD(r[o + 7]);
  w.sample_count = r[o + 8].as<int64_t>();
  w.gpus_reporting = r[o + 9].as<int>();
  w.gpus_allocated = r[o + 10].as<int>();
  w.gpu_coverage = r[o + 11].as<double>();
  w.gpu_ofu_min = OptD(r[o + 12]);
  w.gpu_ofu_median = OptD(r[o + 13]);
  w.gpu_ofu_max = OptD(r[o + 14]);
  w.tensor_active_mean = OptD(r[o + 15]);
  w.sm_clock_mhz_mean = OptD(r[o + 16]);
  w.flags = static_cast<uint32_t>(r[o + 17].as<int64_t>());
  w.spatial_imbalance = OptD(r[o + 18]);
  w.temporal_imbalance = OptD(r[o + 19]);
  // Columns this service wrote; entries of another shape are left out, never thrown on.
  auto number = [](const nlohmann::json& j, const char* key) {
    const auto it = j.find(key);
    return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
  };
  absl::StatusOr<nlohmann::json> stragglers =
      platform::ParseStoredJson(r[o + 20].as<std::string>());
  if (stragglers.ok() && stragglers->is_array()) {
    for (const auto& s : *stragglers) {
      if (!s.is_object() || !s.contains("gpu") || !s["gpu"].is_string()) continue;
      w.stragglers.push_back({.gpu = s["gpu"].get<std::string>(),
                              .ofu = number(s, "ofu"),
                              .score = number(s, "score")});
    }
  }
  absl::StatusOr<nlohmann::json> idle = platform::ParseStoredJson(r[o + 21].as<std::string>());
  if (idle.ok() && idle->is_array()) {
    for (const auto& g : *idle) {
      if (g.is_string()) w.idle_gpus.push_back(g.get<std::string>());
    }
  }
  w.roofline = static_cast<Roofline>(r[o + 22].as<int>());
  w.hbm_peak_fraction = OptD(r[o + 23]);
  w.energy_j = OptD(r[o + 24]);
  w.power_w_mean = OptD(r[o + 25]);
  w.late_sample_count = r[o + 26].as<int64_t>();
  s.revision = r[o + 27].as<int32_t>();
  w.finalized = r[o + 28].as<bool>();
  // Rows written before migration 0052: every allocated GPU counted whole.
  w.gpu_equivalents = r[o + 29].is_null() ? w.gpus_allocated : r[o + 29].as<double>();
  if (!r[o + 30].is_null()) ParseActivity(r[o + 30].as<std::string>(), w);
  return s;
}

ConsumedSample ParseSample(const pqxx::row& r) {
  ConsumedSample c;
  c.seq = r[0].as<int64_t>();
  c.job = r[1].as<int64_t>();
  std::optional<int> index;
  if (!r[3].is_null()) index = r[3].as<int>();
  std::optional<int> mig;
  if (!r[14].is_null()) mig = r[14].as<int>();
  c.sample.gpu = GpuKey(r[2].as<std::string>(), index, r[4].as<std::string>(), mig);
  if (mig.has_value()) c.sample.mig_profile = r[15].as<std::string>();
  if (int shared = 0; !r[16].is_null() && absl::SimpleAtoi(r[16].c_str(), &shared) && shared > 1) {
    c.sample.shared_by = shared;
  }
  c.sample_gpu_model = r[5].as<std::string>();
  c.sample.timestamp_ms = r[6].as<int64_t>();
  c.sample.tensor_active = D(r[7]);
  c.sample.sm_clock_mhz = D(r[8]);
  c.sample.dram_active = D(r[9]);
  c.sample.gr_engine_active = D(r[10]);
  c.sample.fb_used_mib = D(r[11]);
  c.sample.power_w = D(r[12]);
  c.sample.energy_mj = D(r[13]);
  c.sample.sm_active = D(r[17]);
  return c;
}

std::string WindowValues(pqxx::work& txn, const WindowResult& w, int64_t window_s,
                         const std::string& producer, int64_t commit_seq) {
  nlohmann::json stragglers = nlohmann::json::array();
  for (const StragglerResult& s : w.stragglers) {
    stragglers.push_back({{"gpu", s.gpu}, {"ofu", s.ofu}, {"score", s.score}});
  }
  std::vector<std::string> idle;
  for (const std::string& g : w.idle_gpus) idle.push_back(txn.quote(g));
  std::optional<double> ci = w.ofu_ci95_half_width;
  const std::optional<nlohmann::json> activity = ActivityJson(w);
  return absl::StrCat(
      "(", w.job, ",", txn.quote(w.gpu), ",", TimeSql(w.start_ms), ",", window_s, ",",
      txn.quote(w.gpu_model), ",", Num(w.ofu), ",", Num(w.ofu_stddev), ",", Num(ci), ",",
      w.sample_count, ",", w.gpus_reporting, ",", w.gpus_allocated, ",", Num(w.gpu_coverage), ",",
      Num(w.gpu_ofu_min), ",", Num(w.gpu_ofu_median), ",", Num(w.gpu_ofu_max), ",",
      Num(w.tensor_active_mean), ",", Num(w.sm_clock_mhz_mean), ",", w.flags, ",",
      Num(w.spatial_imbalance), ",", Num(w.temporal_imbalance), ",", txn.quote(stragglers.dump()),
      "::jsonb,", "ARRAY[", absl::StrJoin(idle, ","), "]::text[],", w.idle_gpus.size(), ",",
      static_cast<int>(w.roofline), ",", Num(w.hbm_peak_fraction), ",", Num(w.energy_j), ",",
      Num(w.power_w_mean), ",", w.finalized ? "true" : "false", ",",
      txn.quote(w.gpu.empty() ? producer : ""), ",", w.gpu.empty() ? commit_seq : 0, ",",
      Num(std::optional<double>(w.gpu_equivalents)), ",",
      activity ? txn.quote(activity->dump()) : "NULL", "::jsonb)");
}

constexpr char kUpsertWindowsHead[] =
    "INSERT INTO ofu_windows AS w (job, gpu, start_time, window_s, gpu_model, ofu, ofu_stddev, "
    "ofu_ci95_half_width, sample_count, gpus_reporting, gpus_allocated, gpu_coverage, "
    "gpu_ofu_min, gpu_ofu_median, gpu_ofu_max, tensor_active_mean, sm_clock_mhz_mean, flags, "
    "spatial_imbalance, temporal_imbalance, stragglers, idle_gpus, idle_gpu_count, "
    "roofline_class, hbm_peak_fraction, energy_j, power_w_mean, finalized, producer, commit_seq, "
    "gpu_equivalents, activity) VALUES ";
constexpr char kUpsertWindowsTail[] =
    " ON CONFLICT (job, gpu, start_time) DO UPDATE SET window_s = EXCLUDED.window_s, "
    "gpu_model = EXCLUDED.gpu_model, ofu = EXCLUDED.ofu, ofu_stddev = EXCLUDED.ofu_stddev, "
    "ofu_ci95_half_width = EXCLUDED.ofu_ci95_half_width, sample_count = EXCLUDED.sample_count, "
    "gpus_reporting = EXCLUDED.gpus_reporting, gpus_allocated = EXCLUDED.gpus_allocated, "
    "gpu_coverage = EXCLUDED.gpu_coverage, gpu_ofu_min = EXCLUDED.gpu_ofu_min, "
    "gpu_ofu_median = EXCLUDED.gpu_ofu_median, gpu_ofu_max = EXCLUDED.gpu_ofu_max, "
    "tensor_active_mean = EXCLUDED.tensor_active_mean, "
    "sm_clock_mhz_mean = EXCLUDED.sm_clock_mhz_mean, "
    "flags = EXCLUDED.flags | (CASE WHEN (EXCLUDED.flags & 32768) <> 0 THEN 0 ELSE w.flags & 128 "
    "END), spatial_imbalance = EXCLUDED.spatial_imbalance, "
    "temporal_imbalance = EXCLUDED.temporal_imbalance, stragglers = EXCLUDED.stragglers, "
    "idle_gpus = EXCLUDED.idle_gpus, idle_gpu_count = EXCLUDED.idle_gpu_count, "
    "roofline_class = EXCLUDED.roofline_class, hbm_peak_fraction = EXCLUDED.hbm_peak_fraction, "
    "energy_j = EXCLUDED.energy_j, power_w_mean = EXCLUDED.power_w_mean, "
    "finalized = EXCLUDED.finalized, producer = EXCLUDED.producer, "
    "commit_seq = EXCLUDED.commit_seq, gpu_equivalents = EXCLUDED.gpu_equivalents, "
    "activity = EXCLUDED.activity, "
    "revision = w.revision + 1, updated_at = now() "
    "WHERE NOT w.finalized OR (EXCLUDED.flags & 32768) <> 0";

// Flag 128: kFlagLateSamplesDropped, unless the window was recomputed with them ($6; it was
// written, flagged 32768, in the same transaction).
constexpr char kAddLate[] =
    "UPDATE ofu_windows SET late_sample_count = late_sample_count + $3, "
    "flags = CASE WHEN $6 THEN flags ELSE flags | 128 END, producer = $4, commit_seq = $5 "
    "WHERE job = $1 AND gpu = '' AND start_time = timestamptz 'epoch' + $2 * interval '1 "
    "millisecond'";

// A job's samples in [$2, $3) ms, from $4 ms minus $5 ms before its last sample ahead of $4
// ms when that is earlier than $2.
constexpr char kJobSamplesTail[] =
    " FROM samples s WHERE s.job = $1 AND s.sample_time < timestamptz 'epoch' + $3::bigint * "
    "interval '1 millisecond' AND s.sample_time >= least(timestamptz 'epoch' + $2::bigint * "
    "interval '1 millisecond', (SELECT max(p.sample_time) FROM samples p WHERE p.job = $1 AND "
    "p.sample_time < timestamptz 'epoch' + $4::bigint * interval '1 millisecond') - $5::bigint * "
    "interval '1 millisecond') ORDER BY s.sample_time, s.seq";
constexpr char kAddLateToJob[] =
    "INSERT INTO ofu_job_state (job, late_sample_count) VALUES ($1, $2) ON CONFLICT (job) DO "
    "UPDATE SET late_sample_count = ofu_job_state.late_sample_count + EXCLUDED.late_sample_count, "
    "updated_at = now()";

}  // namespace

std::string ShardFilter(const ShardConfig& shard) {
  return absl::StrReplaceAll(
      kShardFilter, {{"$SC", std::to_string(shard.count)}, {"$SI", std::to_string(shard.index)}});
}

#undef GOODPUT_MS

std::string GpuKey(const std::string& host, std::optional<int> gpu_index, const std::string& uuid,
                   std::optional<int> mig_instance) {
  std::string key =
      absl::StrCat(host, "/", gpu_index.has_value() ? std::to_string(*gpu_index) : "", "/", uuid);
  if (mig_instance.has_value()) absl::StrAppend(&key, "/mig", *mig_instance);
  return key;
}

GpuKeyParts ParseGpuKey(const std::string& key) {
  std::vector<std::string> parts = absl::StrSplit(key, absl::MaxSplits('/', 3));
  GpuKeyParts out;
  if (parts.size() < 3) {
    out.uuid = key;
    return out;
  }
  if (parts.size() == 4) {
    int mig = 0;
    absl::string_view rest = parts[3];
    if (absl::ConsumePrefix(&rest, "mig") && absl::SimpleAtoi(rest, &mig)) {
      out.mig_instance = mig;
    } else {
      parts[2] = absl::StrCat(parts[2], "/", parts[3]);  // not a key this code wrote
    }
  }
  out.host = parts[0];
  int index = 0;
  if (!parts[1].empty() && absl::SimpleAtoi(parts[1], &index)) out.gpu_index = index;
  out.uuid = parts[2];
  return out;
}

absl::StatusOr<ConsumerState> OfuStore::LoadState() {
  return pool_->RunTransactionFor<ConsumerState>(
      [&](pqxx::work& txn) -> absl::StatusOr<ConsumerState> {
        ConsumerState s;
        pqxx::result r = txn.exec_params(kLoadState, shard_.index, shard_.count);
        if (!r.empty()) {
          s.xid_done = r[0][0].as<std::string>();
          s.xid_round_end = r[0][1].as<std::string>();
          s.seq_cursor = r[0][2].as<int64_t>();
          s.seq_floor = r[0][3].as<int64_t>();
          s.samples_consumed = r[0][4].as<int64_t>();
          s.commit_seq = r[0][5].as<int64_t>();
        }
        return s;
      });
}

absl::Status OfuStore::BeginRound(ConsumerState& state) {
  if (state.in_round()) return absl::OkStatus();
  // The sequence value is read in a statement before the snapshot's: see the header.
  absl::StatusOr<int64_t> seq =
      pool_->RunTransactionFor<int64_t>([&](pqxx::work& txn) -> absl::StatusOr<int64_t> {
        return txn.exec(kSequenceValue)[0][0].as<int64_t>();
      });
  if (!seq.ok()) return seq.status();
  // The snapshot, then (a later statement) the sequence value that bounds the seqs of every
  // transaction the snapshot saw end.
  struct Snapshot {
    std::string xmin, xmax;
    int64_t seq_after = 0;
  };
  absl::StatusOr<Snapshot> snap =
      pool_->RunTransactionFor<Snapshot>([&](pqxx::work& txn) -> absl::StatusOr<Snapshot> {
        pqxx::result r = txn.exec(kSnapshot);
        return Snapshot{.xmin = r[0][0].as<std::string>(),
                        .xmax = r[0][1].as<std::string>(),
                        .seq_after = txn.exec(kSequenceValue)[0][0].as<int64_t>()};
      });
  if (!snap.ok()) return snap.status();
  // Pair this snapshot's xmax with the sequence value of the previous round start, so that a
  // writer that drew its first seq just before taking its transaction id is still above it.
  if (last_seq_read_.has_value()) floor_candidates_.emplace_back(snap->xmax, *last_seq_read_);
  last_seq_read_ = *seq;
  if (XidValue(snap->xmin) <= XidValue(state.xid_done)) return absl::OkStatus();  // nothing new
  round_seq_ceiling_ = snap->seq_after;
  state.xid_round_end = snap->xmin;
  state.seq_cursor = std::max(state.seq_cursor, state.seq_floor);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ConsumedSample>> OfuStore::ReadPage(const ConsumerState& state,
                                                               int limit) {
  if (!state.in_round()) return std::vector<ConsumedSample>{};
  // Driven by the seq index, in order, so that a page costs its own rows whatever the backlog.
  // With several shards each row's job is looked up in a scalar subquery, which PostgreSQL
  // cannot turn into a join: as a join it estimated the shard filter to keep almost no job,
  // read every unconsumed sample of the shard's jobs and sorted them all for one page (seconds
  // per page once ofu fell behind, so it fell further behind).
  const std::string sql = absl::StrCat(
      "SELECT ", kSampleColumns, " FROM samples s WHERE s.seq > $1 ",
      round_seq_ceiling_.has_value() ? absl::StrCat("AND s.seq <= ", *round_seq_ceiling_, " ")
                                     : std::string(),
      "AND s.ingest_xid >= $2::xid8 AND s.ingest_xid < $3::xid8 AND s.job IS NOT NULL ",
      shard_.count == 1
          ? std::string()
          : absl::StrCat("AND (SELECT ", ShardFilter(shard_), " FROM jobs j WHERE j.id = s.job) "),
      "ORDER BY s.seq LIMIT $4");
  return pool_->RunTransactionFor<std::vector<ConsumedSample>>(
      [&](pqxx::work& txn) -> absl::StatusOr<std::vector<ConsumedSample>> {
        pqxx::result r = txn.exec_params(sql, std::max(state.seq_cursor, state.seq_floor),
                                         state.xid_done, state.xid_round_end, limit);
        std::vector<ConsumedSample> out;
        out.reserve(r.size());
        for (const pqxx::row& row : r) out.push_back(ParseSample(row));
        return out;
      });
}

void OfuStore::AdvanceState(ConsumerState& state, const std::vector<ConsumedSample>& page,
                            int limit) {
  state.samples_consumed += static_cast<int64_t>(page.size());
  if (!page.empty()) state.seq_cursor = std::max(state.seq_cursor, page.back().seq);
  if (static_cast<int>(page.size()) >= limit) return;
  state.xid_done = state.xid_round_end;
  round_seq_ceiling_.reset();
  const uint64_t done = XidValue(state.xid_done);
  while (!floor_candidates_.empty() && XidValue(floor_candidates_.front().first) <= done) {
    state.seq_floor = std::max(state.seq_floor, floor_candidates_.front().second);
    floor_candidates_.pop_front();
  }
  state.seq_cursor = state.seq_floor;
}

absl::StatusOr<absl::flat_hash_map<int64_t, JobRecord>> OfuStore::LoadJobs(
    const std::vector<int64_t>& ids) {
  const std::string sql = absl::StrCat("SELECT ", kJobColumns,
                                       " FROM jobs j LEFT JOIN ofu_job_state st ON st.job = j.id "
                                       "WHERE j.id = ANY($1::bigint[])");
  const std::string array = absl::StrCat("{", absl::StrJoin(ids, ","), "}");
  return pool_->RunTransactionFor<absl::flat_hash_map<int64_t, JobRecord>>(
      [&](pqxx::work& txn) -> absl::StatusOr<absl::flat_hash_map<int64_t, JobRecord>> {
        absl::flat_hash_map<int64_t, JobRecord> out;
        for (const pqxx::row& r : txn.exec_params(sql, array)) {
          JobRow row = ParseJob(r);
          JobRecord rec;
          rec.info.job = row.id;
          rec.info.gpu_model = row.gpu_model;
          rec.info.gpus_allocated = row.gpus_allocated;
          rec.info.final_before_ms = Ms(r[11]);
          rec.info.max_event_ms = Ms(r[12]);
          rec.cluster = row.cluster;
          rec.job_id = row.job_id;
          out[row.id] = std::move(rec);
        }
        return out;
      });
}

absl::StatusOr<std::vector<std::pair<JobRecord, std::vector<Sample>>>> OfuStore::LoadOpenJobs(
    const ConsumerState& state, int64_t lookback_ms) {
  const std::string jobs_sql = absl::StrCat(
      "SELECT j.id FROM ofu_job_state st JOIN jobs j ON j.id = st.job WHERE st.max_event_time IS "
      "NOT NULL AND (st.final_before IS NULL OR st.final_before <= st.max_event_time) AND ",
      ShardFilter(shard_));
  absl::StatusOr<std::vector<int64_t>> ids = pool_->RunTransactionFor<std::vector<int64_t>>(
      [&](pqxx::work& txn) -> absl::StatusOr<std::vector<int64_t>> {
        std::vector<int64_t> out;
        for (const pqxx::row& r : txn.exec(jobs_sql)) out.push_back(r[0].as<int64_t>());
        return out;
      });
  if (!ids.ok()) return ids.status();
  std::vector<std::pair<JobRecord, std::vector<Sample>>> out;
  if (ids->empty()) return out;
  absl::StatusOr<absl::flat_hash_map<int64_t, JobRecord>> jobs = LoadJobs(*ids);
  if (!jobs.ok()) return jobs.status();
  // Rows of `alias` below the watermark (see the header comment).
  auto consumed = [](const char* alias) {
    return absl::StrCat("(", alias, ".ingest_xid < $3::xid8 OR (", alias,
                        ".ingest_xid < $4::xid8 AND ", alias, ".seq <= $5))");
  };
  const std::string samples_sql = absl::StrCat(
      "SELECT ", kSampleColumns,
      " FROM samples s WHERE s.job = $1 AND s.sample_time >= coalesce(least(timestamptz "
      "'epoch' + ($6::bigint - $2::bigint) * interval '1 millisecond', (SELECT "
      "max(p.sample_time) FROM samples p WHERE p.job = $1 AND p.sample_time < timestamptz "
      "'epoch' + $6::bigint * interval '1 millisecond' AND ",
      consumed("p"), ") - $2::bigint * interval '1 millisecond'), '-infinity') AND ", consumed("s"),
      " ORDER BY s.seq");
  for (auto& [id, rec] : *jobs) {
    absl::StatusOr<std::vector<Sample>> samples = pool_->RunTransactionFor<std::vector<Sample>>(
        [&](pqxx::work& txn) -> absl::StatusOr<std::vector<Sample>> {
          std::optional<int64_t> final_before;
          if (rec.info.final_before_ms != kNoTime) final_before = rec.info.final_before_ms;
          std::vector<Sample> v;
          for (const pqxx::row& r :
               txn.exec_params(samples_sql, id, lookback_ms, state.xid_done, state.xid_round_end,
                               state.seq_cursor, final_before)) {
            v.push_back(ParseSample(r).sample);
          }
          return v;
        });
    if (!samples.ok()) return samples.status();
    out.emplace_back(rec, *std::move(samples));
  }
  return out;
}

absl::StatusOr<std::vector<Sample>> OfuStore::LoadJobSamples(int64_t job, int64_t span_from_ms,
                                                               const RecomputeSpan& range) {
  static const std::string sql = absl::StrCat("SELECT ", kSampleColumns, kJobSamplesTail);
  const int64_t reach_ms = span_from_ms - range.from_ms;
  return pool_->RunTransactionFor<std::vector<Sample>>(
      [&](pqxx::work& txn) -> absl::StatusOr<std::vector<Sample>> {
        std::vector<Sample> out;
        for (const pqxx::row& r :
             txn.exec_params(sql, job, range.from_ms, range.to_ms, span_from_ms, reach_ms)) {
          out.push_back(ParseSample(r).sample);
        }
        return out;
      });
}

absl::Status OfuStore::Commit(const std::vector<WindowResult>& results,
                              const std::vector<LateCount>& late,
                              const std::vector<JobProgress>& progress, const ConsumerState& state,
                              int64_t window_s) {
  return pool_->RunTransaction([&](pqxx::work& txn) -> absl::Status {
    constexpr size_t kChunk = 500;
    for (size_t i = 0; i < results.size(); i += kChunk) {
      std::string sql = kUpsertWindowsHead;
      for (size_t k = i; k < std::min(results.size(), i + kChunk); ++k) {
        if (k > i) sql += ",";
        sql += WindowValues(txn, results[k], window_s, ProducerId(), state.commit_seq);
      }
      sql += kUpsertWindowsTail;
      txn.exec(sql);
    }
    // The fleet's hourly figures of the jobs and hours these windows are in, from the windows
    // just written (migration 0061).
    std::vector<std::pair<int64_t, int64_t>> hours;
    for (const WindowResult& w : results) {
      if (w.gpu.empty()) hours.emplace_back(w.job, w.start_ms / 3'600'000);
    }
    std::sort(hours.begin(), hours.end());
    hours.erase(std::unique(hours.begin(), hours.end()), hours.end());
    // The jobs as a literal: the planner then reads their windows by key (ofu_fleet_sums).
    for (size_t i = 0; i < hours.size(); i += kChunk) {
      const size_t end = std::min(hours.size(), i + kChunk);
      std::string pairs, jobs;
      int64_t min_hour = hours[i].second, max_hour = hours[i].second;
      for (size_t k = i; k < end; ++k) {
        absl::StrAppend(&pairs, k > i ? "," : "", "(", hours[k].first, "::bigint,", hours[k].second,
                        "::bigint)");
        if (k == i || hours[k].first != hours[k - 1].first) {
          absl::StrAppend(&jobs, jobs.empty() ? "" : ",", hours[k].first);
        }
        min_hour = std::min(min_hour, hours[k].second);
        max_hour = std::max(max_hour, hours[k].second);
      }
      txn.exec(absl::StrCat("DELETE FROM ofu_fleet_hours f USING (VALUES ", pairs,
                            ") t(job, hour) WHERE f.job = t.job AND f.hour = t.hour"));
      txn.exec_params(
          absl::StrCat("INSERT INTO ofu_fleet_hours SELECT s.* FROM ofu_fleet_sums('{", jobs,
                       "}'::bigint[], to_timestamp(", min_hour * 3600, "), to_timestamp(",
                       (max_hour + 1) * 3600, "), $1::float8) s JOIN (VALUES ", pairs,
                       ") t(job, hour) ON s.job = t.job AND s.hour = t.hour"),
          kFleetHoursLowEfficiencyOfu);
    }
    for (const LateCount& l : late) {
      txn.exec_params(kAddLate, l.job, l.window_start_ms, l.count, ProducerId(), state.commit_seq,
                      l.recomputed);
      txn.exec_params(kAddLateToJob, l.job, l.count);
    }
    // Every job's progress in one statement per chunk: a commit of a busy page touches
    // hundreds of jobs, and a round trip each was most of the commit's time.
    for (size_t i = 0; i < progress.size(); i += kChunk) {
      std::string sql = "INSERT INTO ofu_job_state (job, final_before, max_event_time) VALUES ";
      for (size_t k = i; k < std::min(progress.size(), i + kChunk); ++k) {
        const JobProgress& p = progress[k];
        absl::StrAppend(&sql, k > i ? "," : "", "(", p.job, ",", TimeSql(p.final_before_ms), ",",
                        TimeSql(p.max_event_ms), ")");
      }
      sql +=
          " ON CONFLICT (job) DO UPDATE SET final_before = EXCLUDED.final_before, "
          "max_event_time = EXCLUDED.max_event_time, updated_at = now()";
      txn.exec(sql);
    }
    txn.exec_params(kSaveState, shard_.index, shard_.count, state.xid_done, state.xid_round_end,
                    state.seq_cursor, state.seq_floor, state.samples_consumed, state.commit_seq);
    return absl::OkStatus();
  });
}

absl::StatusOr<JobRow> OfuStore::FindJob(const std::string& cluster, const std::string& job_id) {
  const std::string sql = absl::StrCat("SELECT ", kJobColumns,
                                       " FROM jobs j LEFT JOIN ofu_job_state st ON st.job = j.id "
                                       "WHERE j.cluster = $1 AND j.job_id = $2");
  return pool_->RunTransactionFor<JobRow>([&](pqxx::work& txn) -> absl::StatusOr<JobRow> {
    pqxx::result r = txn.exec_params(sql, cluster, job_id);
    if (r.empty()) {
      return absl::NotFoundError(
          absl::StrCat("job cluster=\"", cluster, "\" job_id=\"", job_id, "\" is not known"));
    }
    return ParseJob(r[0]);
  });
}

absl::StatusOr<std::vector<StoredWindow>> OfuStore::Windows(int64_t job, bool per_gpu,
                                                            int64_t from_ms, int64_t to_ms,
                                                            int limit) {
  // A per-GPU window is written again when finalized only if finalizing changed it (see
  // WindowEngine), so its finality is the job's: final before ofu_job_state.final_before.
  static const std::string kColumns = absl::StrReplaceAll(
      kWindowColumns, {{"w.finalized",
                        "(w.finalized OR coalesce(w.start_time < st.final_before, "
                        "false))"}});
  std::string sql =
      absl::StrCat("SELECT ", kColumns,
                   " FROM ofu_windows w LEFT JOIN ofu_job_state st ON st.job = w.job"
                   " WHERE w.job = $1 AND ",
                   per_gpu ? "w.gpu <> ''" : "w.gpu = ''",
                   " AND w.start_time >= timestamptz 'epoch' + $2 * interval '1 millisecond'"
                   " AND w.start_time < timestamptz 'epoch' + $3 * interval '1 millisecond'"
                   " ORDER BY w.start_time, w.gpu");
  if (limit > 0) absl::StrAppend(&sql, " LIMIT ", limit);
  return pool_->RunTransactionFor<std::vector<StoredWindow>>(
      [&](pqxx::work& txn) -> absl::StatusOr<std::vector<StoredWindow>> {
        std::vector<StoredWindow> out;
        for (const pqxx::row& r : txn.exec_params(sql, job, from_ms, to_ms)) {
          out.push_back(ParseWindow(r, 0));
        }
        return out;
      });
}

absl::StatusOr<std::vector<std::pair<JobRow, StoredWindow>>> OfuStore::FleetWindows(int64_t from_ms,
                                                                                    int64_t to_ms) {
  const std::string sql = absl::StrCat(
      "SELECT ", kJobColumns, ", ", kWindowColumns,
      " FROM ofu_windows w JOIN jobs j ON j.id = w.job LEFT JOIN ofu_job_state st ON st.job = "
      "j.id WHERE w.gpu = '' AND w.start_time >= timestamptz 'epoch' + $1 * interval '1 "
      "millisecond' AND w.start_time < timestamptz 'epoch' + $2 * interval '1 millisecond'"
      // In a fixed order: the fleet figures are floating-point sums over these rows.
      " ORDER BY j.cluster, j.job_id, w.start_time");
  return pool_->RunTransactionFor<std::vector<std::pair<JobRow, StoredWindow>>>(
      [&](pqxx::work& txn) -> absl::StatusOr<std::vector<std::pair<JobRow, StoredWindow>>> {
        std::vector<std::pair<JobRow, StoredWindow>> out;
        for (const pqxx::row& r : txn.exec_params(sql, from_ms, to_ms)) {
          out.emplace_back(ParseJob(r), ParseWindow(r, 15));
        }
        return out;
      });
}

absl::StatusOr<std::vector<FleetPiece>> OfuStore::FleetPieces(int64_t from_ms, int64_t to_ms,
                                                              double low_efficiency_threshold) {
  constexpr int64_t kHourMs = 3'600'000;
  // Whole hours [first_hour, end_hour) inside [from, to); none when the range is shorter.
  const int64_t first_hour = from_ms / kHourMs + (from_ms % kHourMs != 0 ? 1 : 0);
  const int64_t end_hour = to_ms / kHourMs;
  const bool rolled_up =
      low_efficiency_threshold == kFleetHoursLowEfficiencyOfu && first_hour < end_hour;
  // Parts, each summed per job and GPU model in PostgreSQL (ofu_fleet_sums, migration 0061):
  // 0 the windows before the first whole hour, 1 the whole hours, 2 the windows after them;
  // without whole hours, part 0 is the whole range.
  auto window_part = [](int part, int64_t from, int64_t to) {
    return absl::StrCat("SELECT ", part,
                        " AS part, * FROM ofu_fleet_sums(NULL, timestamptz 'epoch' + ", from,
                        " * interval '1 millisecond', timestamptz 'epoch' + ", to,
                        " * interval '1 millisecond', $1::float8)");
  };
  std::string parts;
  if (!rolled_up) {
    parts = window_part(0, from_ms, to_ms);
  } else {
    std::string deciles;
    for (int d = 1; d <= 10; ++d) {
      absl::StrAppend(&deciles, d > 1 ? ", " : "", "sum(gpu_hours_by_ofu_decile[", d,
                      "] ORDER BY hour)");
    }
    parts = absl::StrCat(
        window_part(0, from_ms, first_hour * kHourMs), " UNION ALL SELECT 1, job, ", first_hour,
        "::bigint, gpu_model, sum(windows)::integer, sum(gpu_hours ORDER BY hour), "
        "sum(effective_gpu_hours ORDER BY hour), sum(idle_gpu_hours ORDER BY hour), "
        "sum(low_efficiency_gpu_hours ORDER BY hour), ARRAY[",
        deciles, "] FROM ofu_fleet_hours WHERE hour >= ", first_hour, " AND hour < ", end_hour,
        " GROUP BY job, gpu_model UNION ALL ", window_part(2, end_hour * kHourMs, to_ms));
  }
  std::string decile_columns;
  for (int d = 1; d <= 10; ++d) {
    absl::StrAppend(&decile_columns, ", s.gpu_hours_by_ofu_decile[", d, "]");
  }
  const std::string sql = absl::StrCat(
      "SELECT ", kJobColumns,
      ", s.part, s.hour, s.gpu_model, s.gpu_hours, s.effective_gpu_hours, s.idle_gpu_hours, "
      "s.low_efficiency_gpu_hours",
      decile_columns, " FROM (", parts,
      ") s JOIN jobs j ON j.id = s.job LEFT JOIN ofu_job_state st ON st.job = j.id");
  struct Ordered {
    int part;
    int64_t hour;
    FleetPiece piece;
  };
  absl::StatusOr<std::vector<Ordered>> ordered = pool_->RunTransactionFor<std::vector<Ordered>>(
      [&](pqxx::work& txn) -> absl::StatusOr<std::vector<Ordered>> {
        std::vector<Ordered> out;
        for (const pqxx::row& r : txn.exec_params(sql, low_efficiency_threshold)) {
          Ordered o{.part = r[15].as<int>(),
                    .hour = r[16].as<int64_t>(),
                    .piece = {.job = ParseJob(r), .gpu_model = r[17].as<std::string>()}};
          FleetPiece& p = o.piece;
          p.gpu_hours = r[18].as<double>();
          p.effective_gpu_hours = r[19].as<double>();
          p.idle_gpu_hours = r[20].as<double>();
          p.low_efficiency_gpu_hours = r[21].as<double>();
          for (int d = 0; d < 10; ++d) p.gpu_hours_by_ofu_decile[d] = r[22 + d].as<double>();
          out.push_back(std::move(o));
        }
        return out;
      });
  if (!ordered.ok()) return ordered.status();
  // Summed in one order whatever order the database returned rows in.
  std::sort(ordered->begin(), ordered->end(), [](const Ordered& a, const Ordered& b) {
    return std::tie(a.piece.job.cluster, a.piece.job.job_id, a.part, a.hour, a.piece.gpu_model) <
           std::tie(b.piece.job.cluster, b.piece.job.job_id, b.part, b.hour, b.piece.gpu_model);
  });
  std::vector<FleetPiece> out;
  out.reserve(ordered->size());
  for (Ordered& o : *ordered) out.push_back(std::move(o.piece));
  return out;
}

absl::StatusOr<std::vector<PerGpuFigure>> OfuStore::GpuFigures(int64_t job) {
  constexpr char kSql[] =
      // Summed in window order: a floating-point sum in the order the rows happen to be
      // stored would differ in its last digits between deployments (one ofu or several).
      "SELECT gpu, sum(ofu * sample_count ORDER BY start_time) / nullif(sum(sample_count) "
      "FILTER (WHERE ofu IS NOT NULL), 0), bool_and(roofline_class = 3) FROM ofu_windows "
      "WHERE job = $1 AND gpu <> '' GROUP BY gpu ORDER BY gpu";
  return pool_->RunTransactionFor<std::vector<PerGpuFigure>>(
      [&](pqxx::work& txn) -> absl::StatusOr<std::vector<PerGpuFigure>> {
        std::vector<PerGpuFigure> out;
        for (const pqxx::row& r : txn.exec_params(kSql, job)) {
          if (r[1].is_null()) continue;
          out.push_back({.gpu = r[0].as<std::string>(),
                         .ofu = r[1].as<double>(),
                         .idle = !r[2].is_null() && r[2].as<bool>()});
        }
        return out;
      });
}

absl::StatusOr<std::optional<int64_t>> OfuStore::LatestWindowStart(int64_t job) {
  constexpr char kSql[] =
      "SELECT (extract(epoch FROM max(start_time)) * 1000)::bigint FROM ofu_windows "
      "WHERE job = $1 AND gpu = ''";
  return pool_->RunTransactionFor<std::optional<int64_t>>(
      [&](pqxx::work& txn) -> absl::StatusOr<std::optional<int64_t>> {
        pqxx::result r = txn.exec_params(kSql, job);
        if (r.empty() || r[0][0].is_null()) return std::optional<int64_t>();
        return std::optional<int64_t>(r[0][0].as<int64_t>());
      });
}

std::string OfuStore::ProducerId() const {
  return absl::StrCat("ofu-", shard_.index, "-of-", shard_.count);
}

absl::StatusOr<int64_t> OfuStore::AckedSequence(const std::string& target) {
  return pool_->RunTransactionFor<int64_t>([&](pqxx::work& txn) -> absl::StatusOr<int64_t> {
    pqxx::result r = txn.exec_params(
        "SELECT acked_seq FROM ofu_forward_state WHERE target = $1 AND producer = $2", target,
        ProducerId());
    return r.empty() ? int64_t{0} : r[0][0].as<int64_t>();
  });
}

absl::Status OfuStore::SetAckedSequence(const std::string& target, int64_t seq) {
  return pool_->RunTransaction([&](pqxx::work& txn) {
    txn.exec_params(
        "INSERT INTO ofu_forward_state (target, producer, acked_seq) VALUES ($1, $2, $3) "
        "ON CONFLICT (target, producer) DO UPDATE SET acked_seq = EXCLUDED.acked_seq, "
        "updated_at = now()",
        target, ProducerId(), seq);
    return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<int64_t>> OfuStore::PendingCommits(int64_t after, int limit) {
  return pool_->RunTransactionFor<std::vector<int64_t>>(
      [&](pqxx::work& txn) -> absl::StatusOr<std::vector<int64_t>> {
        std::vector<int64_t> out;
        for (const pqxx::row& r : txn.exec_params(
                 "SELECT DISTINCT commit_seq FROM ofu_windows WHERE gpu = '' AND producer = $1 "
                 "AND commit_seq > $2 ORDER BY commit_seq LIMIT $3",
                 ProducerId(), after, limit)) {
          out.push_back(r[0].as<int64_t>());
        }
        return out;
      });
}

absl::StatusOr<std::vector<std::pair<JobRow, StoredWindow>>> OfuStore::CommitWindows(
    int64_t commit_seq) {
  const std::string sql = absl::StrCat(
      "SELECT ", kJobColumns, ", ", kWindowColumns,
      " FROM ofu_windows w JOIN jobs j ON j.id = w.job LEFT JOIN ofu_job_state st ON st.job = "
      "j.id WHERE w.gpu = '' AND w.producer = $1 AND w.commit_seq = $2 ORDER BY w.start_time, "
      "w.job");
  return pool_->RunTransactionFor<std::vector<std::pair<JobRow, StoredWindow>>>(
      [&](pqxx::work& txn) -> absl::StatusOr<std::vector<std::pair<JobRow, StoredWindow>>> {
        std::vector<std::pair<JobRow, StoredWindow>> out;
        for (const pqxx::row& r : txn.exec_params(sql, ProducerId(), commit_seq)) {
          out.emplace_back(ParseJob(r), ParseWindow(r, 15));
        }
        return out;
      });
}

}  // namespace goodput::ofu
