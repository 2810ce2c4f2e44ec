// What the alert engine's files share (alert_engine.cc, platform_lag_sweep.cc): one
// transaction's context, a job's registration as alerts read it, an open alert, and the
// conversions of times and stored protos. Private to the engine; nothing else includes it.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "goodput/v1/alert.pb.h"
#include "google/protobuf/message_lite.h"
#include "services/alerting/alert_engine.h"
#include "services/api/api_convert.h"
#include "services/platform/pg_pool.h"

namespace goodput::alerting {

namespace engine_internal {

inline int64_t ToMs(absl::Time t) { return absl::ToUnixMillis(t); }
inline int64_t TsMs(const google::protobuf::Timestamp& t) { return api::TimestampToUnixMs(t); }
inline google::protobuf::Timestamp MsTs(int64_t ms) { return api::UnixMsToTimestamp(ms); }

// Protos are stored base64 in bytea columns (decode($n, 'base64')).
inline std::string Encode(const google::protobuf::MessageLite& m) {
  return absl::Base64Escape(m.SerializeAsString());
}
template <class M>
bool Decode(const std::string& b64, M* m) {
  std::string bytes;
  return absl::Base64Unescape(b64, &bytes) && m->ParseFromString(bytes);
}

inline absl::Status PgError(const std::exception& e, absl::string_view what) {
  return platform::PgExceptionToStatus(e, what);
}

}  // namespace engine_internal

struct AlertEngine::CachedJob {
  std::unique_ptr<JobEvaluator> evaluator;
  int64_t generation = 0;
  int64_t used = 0;  // cache clock at the last evaluation
};

// A detector state advanced in a transaction: cached once the transaction committed.
struct AlertEngine::EvaluatedJob {
  JobKey key = {};
  std::unique_ptr<JobEvaluator> evaluator = {};
  int64_t generation = 0;
};

struct AlertEngine::JobChange {
  // The earliest window start (s) written by the push: new, or a revision of a stored one.
  int64_t first_changed_start_s = std::numeric_limits<int64_t>::max();
  std::vector<PrecisionSwitchObs> switches = {};  // new precision switches
  std::optional<DivergenceObs> divergence = {};   // the newest decisive verdict pushed
  bool force = false;  // evaluate every stored window: nothing newer will settle them
};

struct AlertEngine::Tx {
  pqxx::work& w;
  int64_t now_ms;
  std::vector<v1::SubscribeAlertsResponse> changes;
  std::vector<ActiveSilence>* silences = nullptr;  // loaded once per transaction
  std::vector<EvaluatedJob> evaluated = {};
  std::set<std::pair<std::string, std::string>> evaluated_to_end = {};  // for the job-end hook
};

struct AlertEngine::JobMeta {
  std::string cluster, job_id;
  std::string scheduler = "other", user, team, name, workload_fingerprint, gpu_model;
  std::string workload_kind;  // jobs.workload_kind: "inference" is read by its load
  std::string state = "running";
  std::optional<int64_t> end_s;  // jobs.end_time, when known
  std::optional<int64_t> start_s;
  int gpu_count = 0;  // 0 when unknown
  Labels labels;
  bool active() const { return state == "running" || state == "pending" || state == "unknown"; }
};

struct AlertEngine::OpenAlert {
  int64_t id = 0;
  std::string fingerprint;
  std::optional<Kind> kind;
  std::string state;
  std::vector<std::string> notified_targets;
  v1::Alert alert;  // with the row's state, times and acknowledgement
};

struct AlertEngine::ActiveSilence {
  int64_t id = 0;
  std::vector<Matcher> matchers;
};

}  // namespace goodput::alerting
