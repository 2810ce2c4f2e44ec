#include "services/alerting/alert_engine.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <exception>
#include <limits>
#include <nlohmann/json.hpp>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "services/alerting/alert_engine_internal.h"
#include "services/alerting/alert_messages.h"
#include "services/alerting/alert_proto.h"
#include "services/alerting/alert_store_sql.h"
#include "services/alerting/gpu_fault_findings.h"
#include "services/alerting/gpu_fault_store.h"
#include "services/alerting/outbox.h"
#include "services/api/api_convert.h"
#include "services/detect/divergence.h"
#include "services/platform/stored_json.h"

namespace goodput::alerting {

namespace {

using namespace sql;  // NOLINT: the store's statements, by name
using namespace engine_internal;  // NOLINT: ToMs, Encode, Decode, PgError

std::string GpuKey(const v1::GpuRef& g) {
  return absl::StrCat(g.host(), "/", g.has_gpu_index() ? absl::StrCat(g.gpu_index()) : "", "/",
                      g.uuid());
}

// Labels and matchers are columns this service wrote; a row holding something else gives
// none (platform::ParseStoredJson bounds what is parsed).
Labels LabelsFromJson(const std::string& text) {
  Labels out;
  absl::StatusOr<nlohmann::json> j = platform::ParseStoredJson(text);
  if (!j.ok() || !j->is_object()) return out;
  for (auto it = j->begin(); it != j->end(); ++it) {
    out[it.key()] = it.value().is_string() ? it.value().get<std::string>() : it.value().dump();
  }
  return out;
}
std::string LabelsToJson(const Labels& labels) { return nlohmann::json(labels).dump(); }

std::string MatchersToJson(const std::vector<Matcher>& ms) {
  nlohmann::json j = nlohmann::json::array();
  for (const Matcher& m : ms) {
    j.push_back(
        {{"name", m.name()}, {"value", m.value()}, {"op", kOpNames[static_cast<int>(m.op())]}});
  }
  return j.dump();
}
std::vector<Matcher> MatchersFromJson(const std::string& text) {
  std::vector<Matcher> out;
  absl::StatusOr<nlohmann::json> list = platform::ParseStoredJson(text);
  if (!list.ok() || !list->is_array()) return out;
  try {
    for (const nlohmann::json& j : *list) {
      Matcher::Op op = Matcher::Op::kEqual;
      const std::string o = j.value("op", "=");
      for (int i = 0; i < 4; ++i) {
        if (o == kOpNames[i]) op = static_cast<Matcher::Op>(i);
      }
      absl::StatusOr<Matcher> m = Matcher::Create(j.value("name", ""), j.value("value", ""), op);
      if (m.ok()) out.push_back(*std::move(m));
    }
  } catch (const std::exception&) {
  }
  return out;
}

std::optional<std::string> OptString(const pqxx::field& f) {
  if (f.is_null()) return std::nullopt;
  return f.as<std::string>();
}

std::vector<std::string> PgTextArray(const std::string& text) {
  // "{a,b}" as produced by text[]::text for simple names; quoted elements are unquoted.
  std::vector<std::string> out;
  if (text.size() < 2) return out;
  for (absl::string_view part : absl::StrSplit(text.substr(1, text.size() - 2), ',')) {
    std::string s(part);
    if (s.size() >= 2 && s.front() == '"' && s.back() == '"') s = s.substr(1, s.size() - 2);
    if (!s.empty()) out.push_back(s);
  }
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The engine.

namespace {

// Row (GP_ALERT_COLUMNS) -> alert with its row state.
template <class Open>
Open AlertFromRow(const pqxx::row& r) {
  Open o;
  o.id = r[0].as<int64_t>();
  o.fingerprint = r[1].as<std::string>();
  o.kind = KindFromName(r[2].as<std::string>());
  o.state = r[3].as<std::string>();
  o.notified_targets = PgTextArray(r[4].as<std::string>());
  Decode(r[5].as<std::string>(), &o.alert);
  o.alert.set_alert_id(absl::StrCat(o.id));
  o.alert.set_fingerprint(o.fingerprint);
  o.alert.set_state(StateFromName(o.state));
  *o.alert.mutable_start_time() = MsTs(r[7].as<int64_t>());
  if (!r[8].is_null()) {
    *o.alert.mutable_end_time() = MsTs(r[8].as<int64_t>());
  } else {
    o.alert.clear_end_time();
  }
  *o.alert.mutable_update_time() = MsTs(r[9].as<int64_t>());
  if (!r[10].is_null()) {
    v1::Acknowledgement* ack = o.alert.mutable_acknowledgement();
    ack->set_by(r[10].as<std::string>());
    if (!r[11].is_null()) *ack->mutable_time() = MsTs(r[11].as<int64_t>());
    ack->set_comment(OptString(r[12]).value_or(""));
  }
  return o;
}

}  // namespace

AlertEngine::AlertEngine(platform::PgPool* pg, EngineConfig config, AlertHub* hub,
                         platform::Logger logger, Clock clock)
    : pg_(pg),
      config_(std::move(config)),
      hub_(hub),
      logger_(std::move(logger)),
      clock_(clock ? std::move(clock) : Clock([] { return absl::Now(); })) {}

AlertEngine::~AlertEngine() { Stop(); }

absl::Status AlertEngine::RunAndPublish(const std::function<absl::Status(Tx&)>& fn) {
  std::vector<v1::SubscribeAlertsResponse> changes;
  std::vector<EvaluatedJob> evaluated;
  bool job_end_changed = false;
  const int64_t now_ms = ToMs(clock_());
  absl::Status s = pg_->RunTransaction([&](pqxx::work& w) -> absl::Status {
    job_end_changed = false;
    Tx tx{.w = w, .now_ms = now_ms, .changes = {}};
    std::vector<ActiveSilence> silences;
    absl::StatusOr<std::vector<ActiveSilence>> loaded = LoadActiveSilences(tx);
    if (!loaded.ok()) return loaded.status();
    silences = *std::move(loaded);
    tx.silences = &silences;
    absl::Status st = fn(tx);
    if (st.ok() && job_end_hook_.in_transaction) {
      // Jobs evaluated to their end, and jobs whose alerts changed, in this transaction.
      std::set<std::pair<std::string, std::string>> jobs = std::move(tx.evaluated_to_end);
      for (const v1::SubscribeAlertsResponse& c : tx.changes) {
        if (c.alert().job().job_id().empty()) continue;  // the platform's own alert
        jobs.emplace(c.alert().job().cluster(), c.alert().job().job_id());
      }
      for (const auto& [cluster, job_id] : jobs) {
        if (job_end_hook_.in_transaction(w, cluster, job_id)) job_end_changed = true;
      }
    }
    if (st.ok()) {
      changes = std::move(tx.changes);
      evaluated = std::move(tx.evaluated);
    }
    return st;
  });
  if (!s.ok()) return s;
  if (job_end_changed && job_end_hook_.after_commit) job_end_hook_.after_commit();
  // Detector states advanced in a committed transaction are the job's state now.
  for (EvaluatedJob& e : evaluated) {
    if (e.evaluator != nullptr) PutCached(e.key, std::move(e.evaluator), e.generation);
  }
  if (hub_ != nullptr) {
    for (const v1::SubscribeAlertsResponse& c : changes) hub_->Publish(c);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<AlertEngine::ActiveSilence>> AlertEngine::LoadActiveSilences(Tx& tx) {
  std::vector<ActiveSilence> out;
  for (const pqxx::row& r : tx.w.exec_params(kActiveSilences, tx.now_ms)) {
    out.push_back({r[0].as<int64_t>(), MatchersFromJson(r[1].as<std::string>())});
  }
  return out;
}

absl::StatusOr<int64_t> AlertEngine::LockWatermark(Tx& tx, const std::string& stream,
                                                   const std::string& producer) {
  tx.w.exec_params(kEnsureWatermark, stream, producer);
  pqxx::result r = tx.w.exec_params(kLockWatermark, stream, producer);
  return r[0][0].as<int64_t>();
}

namespace {
absl::Status CheckPosition(const v1::DeliverySequence& p) {
  if (p.producer_id().empty()) {
    return absl::InvalidArgumentError("position.producer_id: must not be empty");
  }
  if (p.sequence() <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("position.sequence: ", p.sequence(), " must be positive"));
  }
  if (p.previous_sequence() < 0 || p.previous_sequence() >= p.sequence()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "position.previous_sequence: ", p.previous_sequence(), " must be in [0, sequence)"));
  }
  return absl::OkStatus();
}
}  // namespace

absl::StatusOr<v1::DeliveryAck> AlertEngine::ReceiveInOrder(
    const v1::DeliverySequence& pos, const char* stream, const char* rpc,
    const std::function<void(Tx&, JobSet&)>& write_items) {
  if (absl::Status s = CheckPosition(pos); !s.ok()) return s;
  v1::DeliveryAck ack;
  absl::Status s = RunAndPublish([&](Tx& tx) -> absl::Status {
    ack.Clear();
    try {
      absl::StatusOr<int64_t> wm = LockWatermark(tx, stream, pos.producer_id());
      if (!wm.ok()) return wm.status();
      ack.set_watermark_sequence(*wm);
      if (pos.sequence() <= *wm) {
        ack.set_duplicate(true);
        return absl::OkStatus();
      }
      if (pos.previous_sequence() > *wm) {
        ack.set_gap_detected(true);
        return absl::OkStatus();
      }
      JobSet jobs;
      write_items(tx, jobs);
      for (const auto& [key, change] : jobs) {
        if (absl::Status st = EvaluateJob(tx, key.first, key.second, change); !st.ok()) return st;
      }
      tx.w.exec_params(kSetWatermark, stream, pos.producer_id(), pos.sequence());
      ack.set_watermark_sequence(pos.sequence());
      return absl::OkStatus();
    } catch (const std::exception& e) {
      if (platform::IsPgConnectionFailure(e)) throw;
      return PgError(e, rpc);
    }
  });
  if (!s.ok()) return s;
  return ack;
}

absl::StatusOr<v1::DeliveryAck> AlertEngine::PushWindows(const v1::PushWindowsRequest& request) {
  const v1::DeliverySequence& pos = request.position();
  return ReceiveInOrder(pos, "windows", "PushWindows", [&](Tx& tx, JobSet& jobs) {
    // Per job: the span of the windows written, for its state row.
    struct Span {
      int64_t first_ms = INT64_MAX, last_end_ms = INT64_MIN;
      std::string fingerprint;
    };
    std::map<JobKey, Span> spans;
    for (int i = 0; i < request.windows_size(); ++i) {
      const v1::OfuWindow& w = request.windows(i);
      if (w.job().cluster().empty() || w.job().job_id().empty() || !w.has_start_time() ||
          w.has_gpu()) {
        logger_.Warn("skipping a window without its job, start or that is per GPU",
                     {{"index", i}, {"producer", pos.producer_id()}, {"sequence", pos.sequence()}});
        continue;
      }
      const int64_t start_ms = TsMs(w.start_time());
      const int64_t end_ms =
          w.has_end_time() ? TsMs(w.end_time()) : start_ms + int64_t{w.window_s()} * 1000;
      pqxx::result r = tx.w.exec_params(kUpsertWindow, w.job().cluster(), w.job().job_id(),
                                        start_ms, end_ms, w.revision(), Encode(w));
      const JobKey key{w.job().cluster(), w.job().job_id()};
      JobChange& change = jobs[key];
      if (!r.empty()) {  // written: new, or a higher revision of a stored window
        change.first_changed_start_s = std::min(change.first_changed_start_s, start_ms / 1000);
      }
      Span& span = spans[key];
      span.first_ms = std::min(span.first_ms, start_ms);
      span.last_end_ms = std::max(span.last_end_ms, end_ms);
      if (span.fingerprint.empty()) span.fingerprint = w.workload_fingerprint();
    }
    int64_t newest_end_ms = INT64_MIN;
    for (const auto& [key, span] : spans) {
      tx.w.exec_params(kTouchJobState, key.first, key.second, span.fingerprint, span.first_ms,
                       span.last_end_ms);
      newest_end_ms = std::max(newest_end_ms, span.last_end_ms);
    }
    if (!spans.empty()) AdvanceProducerProgress(tx, "windows", pos.producer_id(), newest_end_ms);
  });
}

namespace {

PrecisionSwitchObs SwitchObs(const v1::DivergenceEvent& e) {
  const v1::PrecisionSwitch& p = e.precision_switch();
  return {TsMs(p.has_time() ? p.time() : e.time()) / 1000, p.peak_tflops_before(),
          p.peak_tflops_after()};
}

std::string ProtoEnumSuffix(const std::string& full, const std::string& prefix) {
  std::string s = full.substr(std::min(full.size(), prefix.size()));
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// A decisive verdict (too little evidence says nothing about the last decisive one: it stands).
std::optional<DivergenceObs> VerdictObs(const v1::DivergenceEvent& e) {
  if (!e.has_verdict() || e.verdict().verdict() == v1::VERDICT_INSUFFICIENT_EVIDENCE) {
    return std::nullopt;
  }
  const v1::Divergence& d = e.verdict();
  DivergenceObs obs;
  obs.time_s = TsMs(e.time()) / 1000;
  obs.interval_start_s = TsMs(e.interval().start_time()) / 1000;
  obs.interval_end_s = TsMs(e.interval().end_time()) / 1000;
  obs.verdict = ProtoEnumSuffix(v1::Verdict_Name(d.verdict()), "VERDICT_");
  obs.ratio = d.ratio();
  obs.confidence = d.confidence();
  obs.correction_factor = d.correction_factor();
  if (!d.causes().empty()) {
    obs.top_cause =
        ProtoEnumSuffix(v1::DivergenceCause_Name(d.causes(0).cause()), "DIVERGENCE_CAUSE_");
  }
  obs.reason = d.reason();
  return obs;
}

}  // namespace

absl::StatusOr<v1::DeliveryAck> AlertEngine::PushDivergenceEvents(
    const v1::PushDivergenceEventsRequest& request) {
  const v1::DeliverySequence& pos = request.position();
  return ReceiveInOrder(pos, "divergence", "PushDivergenceEvents", [&](Tx& tx, JobSet& jobs) {
    for (int i = 0; i < request.events_size(); ++i) {
      const v1::DivergenceEvent& e = request.events(i);
      if (e.event_id().empty() || e.job().cluster().empty() || e.job().job_id().empty() ||
          e.event_case() == v1::DivergenceEvent::EVENT_NOT_SET) {
        logger_.Warn("skipping a divergence event without id, job or content",
                     {{"index", i}, {"producer", pos.producer_id()}, {"sequence", pos.sequence()}});
        continue;
      }
      const bool verdict = e.event_case() == v1::DivergenceEvent::kVerdict;
      int64_t t_ms = e.has_time() ? TsMs(e.time()) : tx.now_ms;
      if (!verdict && e.precision_switch().has_time()) t_ms = TsMs(e.precision_switch().time());
      pqxx::result r =
          tx.w.exec_params(kInsertEvent, e.event_id(), e.job().cluster(), e.job().job_id(), t_ms,
                           verdict ? "verdict" : "precision_switch", Encode(e));
      JobChange& change = jobs[{e.job().cluster(), e.job().job_id()}];
      if (r.empty()) continue;  // an event already applied
      if (!verdict) {
        change.switches.push_back(SwitchObs(e));
      } else if (std::optional<DivergenceObs> obs = VerdictObs(e);
                 obs && (!change.divergence || change.divergence->time_s <= obs->time_s)) {
        change.divergence = obs;
      }
    }
  });
}

namespace {

JobWindow ToJobWindow(const v1::OfuWindow& w) {
  JobWindow j;
  j.window.start_s = TsMs(w.start_time()) / 1000;
  j.window.end_s = w.has_end_time() ? TsMs(w.end_time()) / 1000 : j.window.start_s + w.window_s();
  j.window.ofu = w.ofu();
  j.window.gpu_coverage = w.gpus_allocated() > 0 ? w.gpu_coverage() : 1.0;
  j.warmup = w.warmup();
  j.gpus_allocated = w.gpus_allocated();
  j.gpus_reporting = w.gpus_reporting();
  j.gpu_ofu_median = w.gpu_ofu_median();
  for (const v1::Straggler& s : w.stragglers()) {
    j.stragglers.push_back({GpuKey(s.gpu()), s.ofu(), s.score()});
  }
  for (const v1::GpuRef& g : w.idle_gpus()) j.idle_gpus.push_back(GpuKey(g));
  for (int f : w.flags()) {
    if (f > 0 && f < 32) j.flags |= 1u << f;
  }
  j.power_w_mean = w.power_w_mean();
  for (const v1::SilentGpu& g : w.silent_gpus()) {
    j.silent_gpus.push_back({GpuKey(g.gpu()), TsMs(g.last_sample_time()) / 1000, g.host_silent()});
  }
  if (w.has_gr_engine_active_mean()) j.activity.gr_engine_mean = w.gr_engine_active_mean();
  if (w.has_sm_active_mean()) j.activity.sm_mean = w.sm_active_mean();
  if (w.has_gpu_tensor_active_max()) j.activity.tensor_max = w.gpu_tensor_active_max();
  if (w.has_gpu_sm_active_max()) j.activity.sm_max = w.gpu_sm_active_max();
  if (w.has_gpu_gr_engine_active_max()) j.activity.gr_engine_max = w.gpu_gr_engine_active_max();
  return j;
}

}  // namespace

AlertEngine::JobMeta AlertEngine::LockJobMeta(Tx& tx, const std::string& cluster,
                                              const std::string& job_id) {
  tx.w.exec_params(kJobLock, cluster, job_id);
  return ReadJobMeta(tx, cluster, job_id);
}

AlertEngine::JobMeta AlertEngine::ReadJobMeta(Tx& tx, const std::string& cluster,
                                              const std::string& job_id) {
  JobMeta meta;
  meta.cluster = cluster;
  meta.job_id = job_id;
  pqxx::result m = tx.w.exec_params(kJobMeta, cluster, job_id);
  if (!m.empty()) {
    meta.scheduler = m[0][0].as<std::string>();
    meta.user = m[0][1].as<std::string>();
    meta.team = m[0][2].as<std::string>();
    meta.name = m[0][3].as<std::string>();
    meta.workload_fingerprint = m[0][4].as<std::string>();
    meta.gpu_model = m[0][5].as<std::string>();
    meta.state = m[0][6].as<std::string>();
    meta.labels = LabelsFromJson(m[0][7].as<std::string>());
    meta.workload_kind = m[0][8].as<std::string>();
    if (!m[0][9].is_null()) meta.end_s = m[0][9].as<int64_t>() / 1000;
    if (!m[0][10].is_null()) meta.start_s = m[0][10].as<int64_t>() / 1000;
    meta.gpu_count = m[0][11].as<int>();
  }
  return meta;
}

std::unique_ptr<JobEvaluator> AlertEngine::TakeCached(const JobKey& key, int64_t generation) {
  absl::MutexLock lock(&cache_mu_);
  auto it = cache_.find(key);
  if (it == cache_.end()) return nullptr;
  std::unique_ptr<CachedJob> c = std::move(it->second);
  cache_.erase(it);
  // Another replica evaluated the job since: its state is in PostgreSQL, not here.
  if (c->generation != generation) return nullptr;
  return std::move(c->evaluator);
}

void AlertEngine::PutCached(JobKey key, std::unique_ptr<JobEvaluator> evaluator,
                            int64_t generation) {
  absl::MutexLock lock(&cache_mu_);
  auto c = std::make_unique<CachedJob>();
  c->evaluator = std::move(evaluator);
  c->generation = generation;
  c->used = ++cache_clock_;
  cache_[std::move(key)] = std::move(c);
  if (cache_.size() <= config_.max_cached_jobs) return;
  auto oldest = cache_.begin();
  for (auto it = cache_.begin(); it != cache_.end(); ++it) {
    if (it->second->used < oldest->second->used) oldest = it;
  }
  cache_.erase(oldest);
}

std::unique_ptr<JobEvaluator> AlertEngine::NewEvaluator(Tx& tx, const JobMeta& meta,
                                                        int64_t first_start_ms) {
  std::vector<EarlierJob> earlier;
  if (!meta.workload_fingerprint.empty()) {
    for (const pqxx::row& r :
         tx.w.exec_params(kEarlierJobs, meta.workload_fingerprint, first_start_ms, meta.cluster,
                          meta.job_id, config_.detectors.baseline.max_jobs)) {
      EarlierJob j;
      j.job_id = r[0].as<std::string>();
      j.last_end_s = r[1].as<int64_t>();
      j.steady.job_id = j.job_id;
      j.steady.median_ofu = r[2].as<double>();
      j.steady.mad_ofu = r[3].as<double>();
      j.steady.steady_windows = r[4].as<int64_t>();
      j.steady.effective_peak_tflops = r[5].as<double>();
      earlier.push_back(std::move(j));
    }
  }
  auto ev = std::make_unique<JobEvaluator>(config_.detectors, earlier);
  std::optional<DivergenceObs> verdict;
  for (const pqxx::row& r : tx.w.exec_params(kJobEvents, meta.cluster, meta.job_id)) {
    v1::DivergenceEvent e;
    if (!Decode(r[0].as<std::string>(), &e)) {
      logger_.Warn("skipping a stored divergence event that does not parse",
                   {{"cluster", meta.cluster}, {"job_id", meta.job_id}});
      continue;
    }
    if (e.has_precision_switch()) ev->AddPrecisionSwitch(SwitchObs(e));
    if (std::optional<DivergenceObs> obs = VerdictObs(e)) verdict = obs;
  }
  if (verdict) ev->SetDivergence(*verdict);
  return ev;
}

std::optional<TokenRate> AlertEngine::ServingLoad(Tx& tx, const JobMeta& meta, JobEvaluator& ev,
                                                  int64_t from_ms) {
  // An inference service is read by its load: its engines' tokens per window.
  const bool serving = meta.workload_kind == "inference";
  ev.SetServing(serving);
  if (!serving) return std::nullopt;
  std::vector<TokenIncrease> increases;
  for (const pqxx::row& r :
       tx.w.exec_params(kServingTokenIncreases, meta.cluster, meta.job_id, from_ms)) {
    increases.push_back({r[0].as<int64_t>(), r[1].as<int64_t>(), r[2].as<double>()});
  }
  if (increases.empty()) return std::nullopt;
  return TokenRate(std::move(increases));
}

absl::Status AlertEngine::EvaluateJob(Tx& tx, const std::string& cluster,
                                      const std::string& job_id, const JobChange& change) {
  JobMeta meta = LockJobMeta(tx, cluster, job_id);
  const JobKey key{cluster, job_id};
  std::set<Kind> kinds(std::begin(kAllKinds), std::end(kAllKinds));
  // Telemetry stopped is the sweep's: a replayed old window must not decide it.
  if (meta.active()) kinds.erase(Kind::kTelemetryStopped);
  // GPU faults come from ingest's fault events, not from windows: the sweep decides them.
  kinds.erase(Kind::kGpuFault);
  kinds.erase(Kind::kPlatformLagging);  // not a job's

  pqxx::result row = tx.w.exec_params(kJobState, cluster, job_id, config_.settle_s);
  if (row.empty()) {
    // mfu's verdict on a job alerting has no windows of yet: only the verdict can be decided,
    // and the state is built once windows arrive (from all events then).
    JobEvaluator evaluator(config_.detectors, {});
    if (change.divergence) evaluator.SetDivergence(*change.divergence);
    LifecycleInput in{.job_active = meta.active(),
                      .kinds = {Kind::kDivergence},
                      .holding = evaluator.current(),
                      .ended = {}};
    return ApplyLifecycle(tx, meta, in);
  }
  const pqxx::row& st = row[0];
  if (meta.workload_fingerprint.empty()) meta.workload_fingerprint = st[0].as<std::string>();
  const int64_t first_start_ms = st[1].as<int64_t>();
  const int64_t newest_end_s = st[2].as<int64_t>() / 1000;
  const int64_t generation = st[4].as<int64_t>();
  const bool quiet = st[7].as<bool>();  // no window came for settle_s

  std::unique_ptr<JobEvaluator> ev = TakeCached(key, generation);
  bool from_checkpoint = false;
  if (ev == nullptr && !st[5].is_null()) {
    // The checkpoint is read back defensively (JobEvaluator::Restore: size, depth and value
    // limits): a row that is not one is logged by its key and rebuilt from the job's windows.
    std::string bytes;
    absl::StatusOr<std::unique_ptr<JobEvaluator>> restored =
        absl::Base64Unescape(st[5].as<std::string>(), &bytes)
            ? JobEvaluator::Restore(config_.detectors, bytes)
            : absl::InvalidArgumentError("checkpoint: not base64");
    if (restored.ok()) {
      ev = *std::move(restored);
      from_checkpoint = true;
    } else {
      logger_.Warn(
          "bad detector checkpoint in alert_job_state: rebuilding the job's detector "
          "state from its windows",
          {{"cluster", cluster},
           {"job_id", job_id},
           {"checkpoint_bytes", static_cast<int64_t>(bytes.size())},
           {"error", std::string(restored.status().message())}});
    }
  }
  bool rebuild = ev == nullptr;
  // A revised window the detectors already saw, or a precision switch among those windows,
  // changes how they read: replay the job.
  if (ev != nullptr && change.first_changed_start_s < ev->last_end_s()) rebuild = true;
  for (const PrecisionSwitchObs& s : change.switches) {
    if (rebuild) break;
    if (ev->needs_replay(s)) {
      rebuild = true;
    } else {
      ev->AddPrecisionSwitch(s);
    }
  }
  if (rebuild) {
    ev = NewEvaluator(tx, meta, first_start_ms);
  } else if (change.divergence) {
    ev->SetDivergence(*change.divergence);
  }

  // The windows after the frontier, in window order; the newest wait to settle while the job
  // runs and windows keep coming.
  const bool settle_all = change.force || !meta.active() || quiet;
  const int64_t frontier_ms = ev->windows() > 0 ? ev->last_end_s() * 1000 : 0;
  std::optional<TokenRate> tokens = ServingLoad(tx, meta, *ev, frontier_ms);
  std::vector<Finding> ended;
  for (const pqxx::row& r : tx.w.exec_params(kWindowsFrom, cluster, job_id, frontier_ms)) {
    v1::OfuWindow w;
    if (!Decode(r[0].as<std::string>(), &w)) {
      logger_.Warn("skipping a stored window that does not parse",
                   {{"cluster", cluster}, {"job_id", job_id}});
      continue;
    }
    JobWindow jw = ToJobWindow(w);
    if (!settle_all && jw.window.end_s + config_.settle_s > newest_end_s) break;
    if (tokens) jw.tokens_per_s = tokens->For(jw.window.start_s * 1000, jw.window.end_s * 1000);
    if (meta.gpu_model.empty()) meta.gpu_model = w.gpu_model();
    ev->AddWindow(jw);
    // Conditions that ended on the way are decided in order with the others.
    for (Finding& f : ev->TakeEnded()) ended.push_back(std::move(f));
    // Drops that recovered before they were confirmed: never paged; told in the log until
    // the job's record keeps them.
    for (const TransientSlowdown& t : ev->TakeTransients()) {
      logger_.Info("transient slowdown",
                   {{"cluster", cluster}, {"job_id", job_id},
                    {"onset_s", absl::StrCat(t.onset_s)}, {"end_s", absl::StrCat(t.end_s)},
                    {"factor", absl::StrFormat("%.2f", t.factor)},
                    {"lost_gpu_hours", absl::StrFormat("%.3f", t.lost_gpu_hours)}});
    }
  }

  LifecycleInput in{.job_active = meta.active(),
                    .kinds = kinds,
                    .holding = ev->current(),
                    .ended = std::move(ended)};
  if (ev->windows() == 0) in.kinds = {Kind::kDivergence};
  if (absl::Status s = ApplyLifecycle(tx, meta, in); !s.ok()) return s;
  if (ev->windows() == 0) return absl::OkStatus();

  // Save where the job's evaluation stands; checkpoint now and then, after a rebuild, and
  // when everything the job sent was evaluated after its end.
  const int64_t checkpoint_end_s = st[6].is_null() ? INT64_MIN / 2 : st[6].as<int64_t>() / 1000;
  // The report waits for the windows that reach the job's end: ofu may send an ended job's
  // windows in several pushes (a revised last window moves to a later commit), and a report
  // of the first push would miss what the last windows show. A job whose telemetry stopped
  // before its end is asked for by the sweep once no window has come since the last one.
  const bool complete = !meta.active() && ev->last_end_s() >= newest_end_s;
  const bool reached_end = !meta.end_s.has_value() || ev->last_end_s() >= *meta.end_s;
  if (complete && (reached_end || quiet)) tx.evaluated_to_end.emplace(cluster, job_id);
  const bool checkpoint = rebuild || complete ||
                          ev->last_end_s() - checkpoint_end_s >= config_.checkpoint_every_s;
  std::optional<std::string> blob;
  if (checkpoint && !(from_checkpoint && ev->last_end_s() == checkpoint_end_s)) {
    blob = absl::Base64Escape(ev->Checkpoint());
  }
  const detect::JobSteadyState steady = ev->steady();
  pqxx::result saved = tx.w.exec_params(kSaveJobState, cluster, job_id, steady.median_ofu,
                                        steady.mad_ofu, steady.steady_windows,
                                        steady.effective_peak_tflops, ev->last_end_s() * 1000,
                                        blob);
  // A job evaluated to its end keeps no memory here; late windows restore the checkpoint.
  if (!complete) {
    tx.evaluated.push_back({key, std::move(ev), saved[0][0].as<int64_t>()});
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<core::JobLedger>> AlertEngine::Ledger(const std::string& cluster,
                                                             const std::string& job_id,
                                                             int gpus) {
  std::optional<core::JobLedger> ledger;
  absl::Status s = pg_->RunTransaction([&](pqxx::work& w) -> absl::Status {
    ledger.reset();
    try {
      Tx tx{.w = w, .now_ms = ToMs(clock_()), .changes = {}};
      JobMeta meta = ReadJobMeta(tx, cluster, job_id);
      pqxx::result row = w.exec_params(kJobState, cluster, job_id, config_.settle_s);
      if (row.empty()) return absl::OkStatus();  // no window of the job
      if (meta.workload_fingerprint.empty()) meta.workload_fingerprint = row[0][0].as<std::string>();
      // The job's windows replayed through detectors built as a rebuild builds them, so the
      // causes are the ones its alerts were decided from.
      std::unique_ptr<JobEvaluator> ev = NewEvaluator(tx, meta, row[0][1].as<int64_t>());
      std::optional<TokenRate> tokens = ServingLoad(tx, meta, *ev, 0);
      core::JobLedgerInput in;
      if (gpus <= 0) gpus = meta.gpu_count;
      if (gpus > 0 && meta.start_s && meta.end_s && *meta.end_s > *meta.start_s) {
        in.allocated_gpu_hours = gpus * static_cast<double>(*meta.end_s - *meta.start_s) / 3600.0;
      }
      auto add_cause = [&in](const Finding& f, int64_t open_end_s) {
        const int64_t to_s = f.condition_end_s.value_or(open_end_s);
        switch (f.kind) {
          case Kind::kHung:
            in.causes.push_back({.kind = core::LedgerCause::Kind::kHung, .from_s = f.onset_s,
                                 .to_s = to_s});
            break;
          case Kind::kJobIdle:
            in.causes.push_back({.kind = core::LedgerCause::Kind::kJobIdle, .from_s = f.onset_s,
                                 .to_s = to_s});
            break;
          case Kind::kRegressionInJob:
            in.causes.push_back({.kind = core::LedgerCause::Kind::kRegression, .from_s = f.onset_s,
                                 .to_s = to_s, .reference_ofu = f.before_ofu.value_or(0),
                                 .factor = f.factor.value_or(0)});
            break;
          case Kind::kRegressionVsWorkload:
            in.causes.push_back({.kind = core::LedgerCause::Kind::kBelowWorkload, .from_s = f.onset_s,
                                 .to_s = to_s, .reference_ofu = f.baseline_ofu.value_or(0),
                                 .factor = f.factor.value_or(0)});
            break;
          default:
            break;
        }
      };
      for (const pqxx::row& r : w.exec_params(kWindowsFrom, cluster, job_id, 0)) {
        v1::OfuWindow pw;
        if (!Decode(r[0].as<std::string>(), &pw)) continue;
        JobWindow jw = ToJobWindow(pw);
        if (tokens) jw.tokens_per_s = tokens->For(jw.window.start_s * 1000, jw.window.end_s * 1000);
        in.windows.push_back({.start_s = jw.window.start_s,
                              .end_s = jw.window.end_s,
                              .gpus_allocated = jw.gpus_allocated,
                              .gpus_reporting = jw.gpus_reporting,
                              .idle_gpus = static_cast<int>(jw.idle_gpus.size()),
                              .warmup = jw.warmup,
                              .ofu = pw.ofu()});
        ev->AddWindow(jw);
        for (const Finding& f : ev->TakeEnded()) add_cause(f, ev->last_end_s());
        for (const TransientSlowdown& t : ev->TakeTransients()) {
          in.causes.push_back({.kind = core::LedgerCause::Kind::kTransient, .from_s = t.onset_s,
                               .to_s = t.end_s, .reference_ofu = t.before_ofu,
                               .factor = t.factor});
        }
      }
      if (in.windows.empty()) return absl::OkStatus();
      for (const Finding& f : ev->current()) add_cause(f, ev->last_end_s() + 1);
      ledger = core::BuildJobLedger(in);
      return absl::OkStatus();
    } catch (const std::exception& e) {
      if (platform::IsPgConnectionFailure(e)) throw;
      return PgError(e, "job ledger");
    }
  });
  if (!s.ok()) return s;
  return ledger;
}

absl::Status AlertEngine::EnqueueState(Tx& tx, int64_t alert_id, const v1::Alert& a,
                                       const std::string& state,
                                       const std::vector<std::string>& targets) {
  if (targets.empty()) return absl::OkStatus();
  Notification n;
  n.alert_id = alert_id;
  n.fingerprint = a.fingerprint();
  n.kind = std::string(KindName(KindFromProto(a.kind()).value_or(Kind::kRegressionInJob)));
  n.severity = a.labels().count("severity") ? a.labels().at("severity") : "warning";
  n.state = state;
  n.cluster = a.job().cluster();
  n.job_id = a.job().job_id();
  auto label = [&a](const char* k) {
    auto it = a.labels().find(k);
    return it == a.labels().end() ? std::string() : it->second;
  };
  n.scheduler = label("scheduler");
  n.team = label("team");
  n.user = label("user");
  n.labels = Labels(a.labels().begin(), a.labels().end());
  n.summary = a.summary();
  n.description = a.description();
  if (a.evidence().has_factor()) n.factor = a.evidence().factor();
  if (a.evidence().has_divergence()) {
    n.verdict = ProtoEnumSuffix(v1::Verdict_Name(a.evidence().divergence().verdict()), "VERDICT_");
  }
  n.dashboard_url = a.dashboard_url();
  n.start_time =
      std::chrono::system_clock::time_point(std::chrono::milliseconds(TsMs(a.start_time())));
  if (state == "resolved") {
    n.end_time = std::chrono::system_clock::time_point(
        std::chrono::milliseconds(a.has_end_time() ? TsMs(a.end_time()) : tx.now_ms));
  }
  absl::StatusOr<int> added = Enqueue(tx.w, n, targets);
  if (!added.ok()) return added.status();
  tx.w.exec_params(kSetNotified, alert_id, absl::StrJoin(targets, "\x1f"));
  return absl::OkStatus();
}

std::vector<std::string> AlertEngine::RoutedTargets(const Labels& labels,
                                                    bool to_scheduler) const {
  std::vector<std::string> targets;
  for (const std::string& t : RouteTargets(config_.routing, labels)) {
    auto kind = config_.target_kinds.find(t);
    if (!to_scheduler && kind != config_.target_kinds.end() &&
        (kind->second == "slurm" || kind->second == "osmo")) {
      continue;
    }
    targets.push_back(t);
  }
  return targets;
}

absl::Status AlertEngine::Resolve(Tx& tx, const OpenAlert& open) {
  tx.w.exec_params(kResolveAlert, open.id, tx.now_ms);
  v1::Alert a = open.alert;
  a.set_state(v1::ALERT_STATE_RESOLVED);
  *a.mutable_end_time() = MsTs(tx.now_ms);
  *a.mutable_update_time() = MsTs(tx.now_ms);
  // Only targets that heard the firing hear the resolution.
  if (absl::Status s = EnqueueState(tx, open.id, a, "resolved", open.notified_targets); !s.ok())
    return s;
  v1::SubscribeAlertsResponse c;
  c.set_change(v1::ALERT_CHANGE_RESOLVED);
  *c.mutable_alert() = std::move(a);
  tx.changes.push_back(std::move(c));
  return absl::OkStatus();
}

v1::Alert AlertEngine::DescribeFinding(const Tx& tx, const JobMeta& meta, const Finding& finding,
                                       const std::string& fp, Labels& labels) const {
  Finding f = finding;
  // A fault on the job's GPUs around the finding's onset is its likely cause.
  if (f.kind != Kind::kGpuFault && f.faults.empty() && CorrelatesWithFaults(f.kind)) {
    f.faults = CoincidingFaults(f, JobFaults(tx.w, meta.cluster, meta.job_id),
                                config_.fault_correlation_window_s);
  }
  v1::Alert a;
  a.set_fingerprint(fp);
  a.set_kind(KindToProto(f.kind));
  a.mutable_job()->set_cluster(meta.cluster);
  a.mutable_job()->set_job_id(meta.job_id);
  labels = meta.labels;
  Labels own = {
      {"cluster", meta.cluster},     {"job_id", meta.job_id},
      {"scheduler", meta.scheduler}, {"team", meta.team},
      {"user", meta.user},           {"kind", std::string(KindName(f.kind))},
      {"gpu_model", meta.gpu_model}, {"workload_fingerprint", meta.workload_fingerprint}};
  // Alertmanager can route a service's pages apart from a training run's.
  if (!meta.workload_kind.empty()) own["workload_kind"] = meta.workload_kind;
  if (f.kind == Kind::kStraggler) own["gpu"] = f.detail;
  if (f.kind == Kind::kSilentGpu) own[f.host.empty() ? "gpu" : "host"] = f.detail;
  for (const auto& [k, v] : f.extra_labels) own.emplace(k, v);  // never over the job's keys
  for (auto& [k, v] : own) labels[k] = v;
  if (meta.job_id.empty()) {  // the platform's own alert: no job, cluster or owner to name
    std::erase_if(labels, [](const auto& kv) { return kv.second.empty(); });
  }
  const Severity severity = DecideSeverity(config_.severity_rules, labels, f.factor);
  labels["severity"] = std::string(SeverityName(severity));
  a.set_severity(SeverityToProto(severity));
  for (const auto& [k, v] : labels) (*a.mutable_labels())[k] = v;
  const int64_t now_s = tx.now_ms / 1000;
  const Message msg = Describe(f, {.cluster = meta.cluster,
                                   .job_id = meta.job_id,
                                   .job_name = meta.name,
                                   .gpu_model = meta.gpu_model,
                                   .now_s = now_s});
  a.set_summary(msg.summary);
  std::string description = msg.description;
  if (f.kind != Kind::kGpuFault && !f.faults.empty()) {
    const std::string cause = LikelyCause(f.faults.front(), f.onset_s, now_s);
    a.set_summary(absl::StrCat(msg.summary, " — likely cause: ", FaultWhat(f.faults.front()),
                               " on GPU ", FaultGpuName(f.faults.front())));
    absl::StrAppend(&description, " Likely cause: ", cause, ".");
    a.mutable_evidence()->set_likely_cause(cause);
  }
  if (f.condition_end_s) {
    const int64_t minutes = std::max<int64_t>(0, *f.condition_end_s - f.onset_s) / 60;
    absl::StrAppend(&description, " It ended at ", ClockTime(*f.condition_end_s, now_s),
                    ", after ", minutes, " minute", minutes == 1 ? "" : "s", ".");
  }
  a.set_description(description);
  a.set_dashboard_url(meta.job_id.empty()
                          ? config_.dashboard_url
                          : DashboardUrl(config_.dashboard_url, meta.cluster, meta.job_id));

  v1::AlertEvidence* ev = a.mutable_evidence();
  ev->set_detector(f.detector);
  ev->set_confidence(f.confidence);
  *ev->mutable_onset_time() = MsTs(f.onset_s * 1000);
  if (f.detected_s > 0) *ev->mutable_detected_time() = MsTs(f.detected_s * 1000);
  if (f.condition_end_s) *ev->mutable_condition_end_time() = MsTs(*f.condition_end_s * 1000);
  if (f.before_ofu) ev->set_before_ofu(*f.before_ofu);
  if (f.after_ofu) ev->set_after_ofu(*f.after_ofu);
  if (f.factor) ev->set_factor(*f.factor);
  if (f.baseline_ofu) ev->set_baseline_ofu(*f.baseline_ofu);
  for (const std::string& j : f.baseline_job_ids) {
    v1::JobKey* k = ev->add_baseline_jobs();
    k->set_cluster(meta.cluster);
    k->set_job_id(j);
  }
  if (f.kind == Kind::kIdleGpus) ev->set_idle_gpu_hours(f.idle_gpu_hours);
  if (f.serving) {
    v1::ServingEvidence* s = ev->mutable_serving();
    s->set_load_before_tokens_per_s(f.serving->load_before);
    s->set_load_after_tokens_per_s(f.serving->load_after);
    s->set_gpu_seconds_per_token_before(f.serving->cost_before);
    s->set_gpu_seconds_per_token_after(f.serving->cost_after);
    s->set_comparable_windows(f.serving->comparable_windows);
  }
  for (int bit = 1; bit < 32; ++bit) {
    if (f.flags & (1u << bit)) ev->add_data_quality_flags(static_cast<v1::DataQualityFlag>(bit));
  }
  if (f.kind == Kind::kTelemetryStopped || f.kind == Kind::kSilentGpu ||
      f.kind == Kind::kPlatformLagging)
    *ev->mutable_last_sample_time() = MsTs(f.last_sample_s * 1000);
  for (size_t i = 0; i < f.faults.size() && i < 50; ++i) {
    *ev->add_faults() = FaultEventProto(f.faults[i], meta.cluster, meta.job_id);
  }
  if (f.kind == Kind::kGpuFault && !f.faults.empty()) *a.add_gpus() = GpuRefOf(f.faults.front());
  return a;
}

void AlertEngine::AddEvidence(Tx& tx, const JobMeta& meta, const Finding& f, v1::Alert& a) {
  v1::AlertEvidence* ev = a.mutable_evidence();
  std::map<std::string, v1::GpuRef> refs;
  if (f.evidence_to_s > f.evidence_from_s) {
    for (const pqxx::row& r : tx.w.exec_params(kEvidenceWindows, meta.cluster, meta.job_id,
                                               f.evidence_from_s * 1000, f.evidence_to_s * 1000)) {
      v1::OfuWindow* w = ev->add_windows();
      if (!Decode(r[0].as<std::string>(), w)) {
        ev->mutable_windows()->RemoveLast();
        continue;
      }
      for (const v1::Straggler& s : w->stragglers()) refs[GpuKey(s.gpu())] = s.gpu();
      for (const v1::GpuRef& g : w->idle_gpus()) refs[GpuKey(g)] = g;
      for (const v1::SilentGpu& g : w->silent_gpus()) refs[GpuKey(g.gpu())] = g.gpu();
    }
  }
  for (const std::string& g : f.gpus) {
    v1::GpuRef ref = refs.count(g) ? refs[g] : v1::GpuRef();
    *a.add_gpus() = ref;
    if (f.kind == Kind::kIdleGpus) *ev->add_idle_gpus() = ref;
    if (f.kind == Kind::kStraggler) {
      v1::Straggler* s = ev->add_stragglers();
      *s->mutable_gpu() = ref;
      s->set_score(f.straggler_score);
      s->set_ofu(f.straggler_ofu);
    }
  }
  if (f.kind == Kind::kDivergence) {
    for (const pqxx::row& r : tx.w.exec_params(kLatestVerdicts, meta.cluster, meta.job_id)) {
      v1::DivergenceEvent e;
      if (Decode(r[0].as<std::string>(), &e) && VerdictObs(e)) {
        *ev->mutable_divergence() = e.verdict();
        break;
      }
    }
  }
  if (!f.precision_switches.empty()) {
    const int64_t from = f.precision_switches.front().time_s;
    const int64_t to = f.precision_switches.back().time_s + 1;
    for (const pqxx::row& r : tx.w.exec_params(kSwitchesBetween, meta.cluster, meta.job_id,
                                               from * 1000, to * 1000)) {
      v1::DivergenceEvent e;
      if (!Decode(r[0].as<std::string>(), &e) || !e.has_precision_switch()) continue;
      const int64_t t = SwitchObs(e).time_s;
      for (const PrecisionSwitchObs& p : f.precision_switches) {
        if (p.time_s == t) {
          *ev->add_precision_switches() = e.precision_switch();
          break;
        }
      }
    }
  }
}

absl::Status AlertEngine::ApplyLifecycle(Tx& tx, const JobMeta& meta,
                                         const LifecycleInput& input) {
  std::map<int64_t, OpenAlert> open;
  std::vector<OpenAlertRef> refs;
  for (const pqxx::row& r : tx.w.exec_params(kOpenAlertsOfJob, meta.cluster, meta.job_id)) {
    OpenAlert o = AlertFromRow<OpenAlert>(r);
    refs.push_back({o.id, o.fingerprint, o.kind});
    open.emplace(o.id, std::move(o));
  }
  const std::vector<Decision> decisions =
      DecideLifecycle(meta.cluster, meta.job_id, input, refs);
  for (const Decision& d : decisions) {
    auto it = open.find(d.alert_id);
    if (d.action == Decision::Action::kResolve) {
      if (it == open.end()) continue;
      OpenAlert& o = it->second;
      if (d.finding) {
        // The alert as the condition ended, with its duration and evidence.
        Labels labels;
        v1::Alert a = DescribeFinding(tx, meta, *d.finding, d.fingerprint, labels);
        AddEvidence(tx, meta, *d.finding, a);
        tx.w.exec_params(kUpdateAlertDecision, o.id, o.alert.labels().count("severity")
                                                         ? o.alert.labels().at("severity")
                                                         : std::string("warning"),
                         LabelsToJson(LabelsOf(o.alert)), Encode(a), tx.now_ms);
        a.set_alert_id(o.alert.alert_id());
        a.set_state(o.alert.state());
        a.set_severity(o.alert.severity());
        *a.mutable_labels() = o.alert.labels();
        *a.mutable_start_time() = o.alert.start_time();
        if (o.alert.has_acknowledgement()) *a.mutable_acknowledgement() = o.alert.acknowledgement();
        o.alert = std::move(a);
      }
      if (absl::Status s = Resolve(tx, o); !s.ok()) return s;
      open.erase(it);
      continue;
    }
    const Finding& f = *d.finding;
    Labels labels;
    v1::Alert a = DescribeFinding(tx, meta, f, d.fingerprint, labels);
    const Severity severity =
        SeverityFromName(labels["severity"]).value_or(Severity::kWarning);
    if (d.action == Decision::Action::kUpdate) {
      if (it == open.end()) continue;
      OpenAlert& o = it->second;
      // Only what a person reads counts as a change; the evidence windows move every push.
      if (o.alert.summary() == a.summary() && o.alert.severity() == a.severity() &&
          o.alert.description() == a.description()) {
        continue;
      }
      AddEvidence(tx, meta, f, a);
      tx.w.exec_params(kUpdateAlertDecision, o.id, std::string(SeverityName(severity)),
                       LabelsToJson(labels), Encode(a), tx.now_ms);
      a.set_alert_id(absl::StrCat(o.id));
      a.set_state(o.alert.state());
      *a.mutable_start_time() = o.alert.start_time();
      *a.mutable_update_time() = MsTs(tx.now_ms);
      if (o.alert.has_acknowledgement()) *a.mutable_acknowledgement() = o.alert.acknowledgement();
      v1::SubscribeAlertsResponse c;
      c.set_change(v1::ALERT_CHANGE_UPDATED);
      *c.mutable_alert() = std::move(a);
      tx.changes.push_back(std::move(c));
      continue;
    }
    if (d.action == Decision::Action::kRecordResolved) {
      // Recorded once: a replay from a checkpoint meets the findings it recorded before.
      if (!tx.w.exec_params(kRecordedBefore, d.fingerprint, f.onset_s * 1000).empty()) continue;
      AddEvidence(tx, meta, f, a);
      a.set_found_after_job_end(d.found_after_job_end);
      if (d.found_after_job_end) {
        a.set_description(absl::StrCat(
            a.description(),
            " Found from data evaluated after the job had ended; not sent to its scheduler."));
      }
      const int64_t start_ms = f.detected_s > 0 ? std::min(f.detected_s * 1000, tx.now_ms)
                                                : tx.now_ms;
      const int64_t end_ms =
          f.condition_end_s ? std::max(start_ms, std::min(*f.condition_end_s * 1000, tx.now_ms))
                            : tx.now_ms;
      pqxx::result r = tx.w.exec_params(
          kInsertResolvedAlert, d.fingerprint, std::string(KindName(f.kind)),
          std::string(SeverityName(severity)), meta.cluster, meta.job_id, LabelsToJson(labels),
          Encode(a), start_ms, end_ms, tx.now_ms, f.onset_s * 1000);
      const int64_t id = r[0][0].as<int64_t>();
      a.set_alert_id(absl::StrCat(id));
      a.set_state(v1::ALERT_STATE_RESOLVED);
      *a.mutable_start_time() = MsTs(start_ms);
      *a.mutable_end_time() = MsTs(end_ms);
      *a.mutable_update_time() = MsTs(tx.now_ms);
      // Resolved with its evidence, to the targets that keep a record; the scheduler has no
      // running job to tell.
      const std::vector<std::string> targets = RoutedTargets(labels, /*to_scheduler=*/false);
      bool silenced = false;
      for (const ActiveSilence& s : *tx.silences) silenced = silenced || MatchesAll(s.matchers, labels);
      if (!silenced) {
        if (absl::Status s = EnqueueState(tx, id, a, "resolved", targets); !s.ok()) return s;
      }
      v1::SubscribeAlertsResponse c;
      c.set_change(v1::ALERT_CHANGE_RESOLVED);
      *c.mutable_alert() = std::move(a);
      tx.changes.push_back(std::move(c));
      continue;
    }
    // kOpen.
    AddEvidence(tx, meta, f, a);
    std::vector<int64_t> silenced_by;
    for (const ActiveSilence& s : *tx.silences) {
      if (MatchesAll(s.matchers, labels)) silenced_by.push_back(s.id);
    }
    const std::string state = silenced_by.empty() ? "firing" : "silenced";
    pqxx::result r = tx.w.exec_params(kInsertAlert, d.fingerprint, std::string(KindName(f.kind)),
                                      state, std::string(SeverityName(severity)), meta.cluster,
                                      meta.job_id, LabelsToJson(labels), Encode(a), tx.now_ms,
                                      f.onset_s * 1000);
    const int64_t id = r[0][0].as<int64_t>();
    a.set_alert_id(absl::StrCat(id));
    a.set_state(StateFromName(state));
    *a.mutable_start_time() = MsTs(tx.now_ms);
    *a.mutable_update_time() = MsTs(tx.now_ms);
    for (int64_t s : silenced_by) a.add_silence_ids(absl::StrCat(s));
    if (state == "firing") {
      // The platform's own alert has no job for a scheduler to tell.
      if (absl::Status s = EnqueueState(tx, id, a, "firing",
                                        RoutedTargets(labels, !meta.job_id.empty()));
          !s.ok())
        return s;
    }
    v1::SubscribeAlertsResponse c;
    c.set_change(v1::ALERT_CHANGE_FIRED);
    *c.mutable_alert() = std::move(a);
    tx.changes.push_back(std::move(c));
  }
  return absl::OkStatus();
}

absl::Status AlertEngine::Reconcile(Tx& tx, const JobMeta& meta,
                                    const std::vector<Finding>& findings,
                                    const std::set<Kind>& kinds) {
  // The sweep decides for a running job (job_active), whatever the job's state says.
  return ApplyLifecycle(tx, meta,
                        {.job_active = true, .kinds = kinds, .holding = findings, .ended = {}});
}

absl::Status AlertEngine::ApplySilences(Tx& tx) {
  for (const pqxx::row& r : tx.w.exec(kOpenAlerts)) {
    OpenAlert o = AlertFromRow<OpenAlert>(r);
    if (o.state != "firing" && o.state != "silenced") continue;
    const Labels labels = LabelsOf(o.alert);
    std::vector<int64_t> by;
    for (const ActiveSilence& s : *tx.silences) {
      if (MatchesAll(s.matchers, labels)) by.push_back(s.id);
    }
    const bool silenced = !by.empty();
    if (silenced == (o.state == "silenced")) continue;
    const std::string state = silenced ? "silenced" : "firing";
    tx.w.exec_params(kSetAlertState, o.id, state, tx.now_ms);
    o.alert.set_state(StateFromName(state));
    *o.alert.mutable_update_time() = MsTs(tx.now_ms);
    for (int64_t s : by) o.alert.add_silence_ids(absl::StrCat(s));
    if (!silenced) {
      // Delivered now that nothing silences it (once per target: the key is per state).
      if (absl::Status s =
              EnqueueState(tx, o.id, o.alert, "firing",
                           RoutedTargets(labels, !o.alert.job().job_id().empty()));
          !s.ok())
        return s;
    }
    v1::SubscribeAlertsResponse c;
    c.set_change(v1::ALERT_CHANGE_SILENCE_CHANGED);
    *c.mutable_alert() = std::move(o.alert);
    tx.changes.push_back(std::move(c));
  }
  return absl::OkStatus();
}

absl::Status AlertEngine::ForEachCandidateJob(
    const std::function<pqxx::result(pqxx::work&)>& candidates, const char* what,
    const std::function<absl::Status(Tx&, const std::string&, const std::string&)>& fn) {
  std::vector<std::pair<std::string, std::string>> jobs;
  absl::Status s = pg_->RunTransaction([&](pqxx::work& w) -> absl::Status {
    jobs.clear();
    for (const pqxx::row& r : candidates(w)) {
      jobs.emplace_back(r[0].as<std::string>(), r[1].as<std::string>());
    }
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  // One transaction per job: a job's evaluation never waits for another's locks.
  for (const auto& [cluster, job_id] : jobs) {
    absl::Status st = RunAndPublish([&](Tx& tx) -> absl::Status {
      try {
        return fn(tx, cluster, job_id);
      } catch (const std::exception& e) {
        if (platform::IsPgConnectionFailure(e)) throw;
        return PgError(e, what);
      }
    });
    if (!st.ok()) return st;
  }
  return absl::OkStatus();
}

absl::Status AlertEngine::SweepEndedJobs() {
  // Ended jobs with open alerts, and jobs with windows still to evaluate that will not be
  // followed by newer ones (the job ended, or no window came for settle_s).
  JobChange force;
  force.force = true;
  return ForEachCandidateJob(
      [&](pqxx::work& w) { return w.exec_params(kJobsToSettle, config_.settle_s); },
      "sweep of ended and quiet jobs",
      [&](Tx& tx, const std::string& cluster, const std::string& job_id) {
        return EvaluateJob(tx, cluster, job_id, force);
      });
}

absl::Status AlertEngine::SweepTelemetry(int64_t backlog_ms) {
  const int64_t reference_ms = ToMs(clock_()) - backlog_ms;
  const int64_t stale_before_ms =
      reference_ms - config_.detectors.telemetry_stopped_after_s * 1000;
  return ForEachCandidateJob(
      [&](pqxx::work& w) { return w.exec_params(kTelemetryCandidates, stale_before_ms); },
      "telemetry sweep",
      [&](Tx& tx, const std::string& cluster, const std::string& job_id) {
        const JobMeta meta = LockJobMeta(tx, cluster, job_id);
        pqxx::result last = tx.w.exec_params(kLastWindowEnd, cluster, job_id);
        std::vector<Finding> findings;
        if (!last.empty() && meta.state == "running") {
          if (std::optional<Finding> f =
                  TelemetryStopped(last[0][0].as<int64_t>() / 1000,
                                   (tx.now_ms - backlog_ms) / 1000, config_.detectors)) {
            findings.push_back(*f);
          }
        }
        return Reconcile(tx, meta, findings, {Kind::kTelemetryStopped});
      });
}

absl::Status AlertEngine::SweepGpuFaults() {
  return ForEachCandidateJob(
      [&](pqxx::work& w) { return GpuFaultCandidates(w, config_.fault_candidate_horizon_s); },
      "GPU fault sweep",
      [&](Tx& tx, const std::string& cluster, const std::string& job_id) {
        const JobMeta meta = LockJobMeta(tx, cluster, job_id);
        std::vector<Finding> holding, ended;
        for (Finding& f : GpuFaultFindings(JobFaults(tx.w, cluster, job_id))) {
          (f.condition_end_s ? ended : holding).push_back(std::move(f));
        }
        return ApplyLifecycle(tx, meta,
                              {.job_active = meta.active(),
                               .kinds = {Kind::kGpuFault},
                               .holding = std::move(holding),
                               .ended = std::move(ended)});
      });
}

absl::Status AlertEngine::Sweep() {
  absl::Status s = RunAndPublish([&](Tx& tx) -> absl::Status {
    try {
      return ApplySilences(tx);
    } catch (const std::exception& e) {
      if (platform::IsPgConnectionFailure(e)) throw;
      return PgError(e, "silence sweep");
    }
  });
  if (!s.ok()) return s;
  if (absl::Status st = SweepEndedJobs(); !st.ok()) return st;
  absl::StatusOr<PlatformLag> lag = SweepPlatformLag();
  if (!lag.ok()) return lag.status();
  if (absl::Status st = SweepTelemetry(lag->backlog_ms); !st.ok()) return st;
  if (absl::Status st = SweepGpuFaults(); !st.ok()) return st;
  if (!job_end_hook_.sweep) return absl::OkStatus();
  int added = 0;
  if (absl::Status st = pg_->RunTransaction([&](pqxx::work& w) -> absl::Status {
        added = job_end_hook_.sweep(w);
        return absl::OkStatus();
      });
      !st.ok()) {
    return st;
  }
  if (added > 0 && job_end_hook_.after_commit) job_end_hook_.after_commit();
  return absl::OkStatus();
}

void AlertEngine::Start(absl::Duration interval, std::function<bool()> may_sweep) {
  thread_ = std::thread([this, interval, may_sweep = std::move(may_sweep)] {
    while (true) {
      if (may_sweep && !may_sweep()) {
        // Another replica sweeps.
      } else if (absl::Status s = Sweep(); !s.ok()) {
        logger_.Warn("alert sweep failed; retrying", {{"error", s.ToString()}});
      }
      absl::MutexLock lock(&mu_);
      auto stopping = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stop_; };
      mu_.AwaitWithTimeout(absl::Condition(&stopping), interval);
      if (stop_) return;
    }
  });
}

void AlertEngine::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

// ---------------------------------------------------------------------------------------------
// Reads and person-made changes.

namespace {

absl::StatusOr<int64_t> ParseId(const std::string& id, const char* field) {
  int64_t v = 0;
  if (!absl::SimpleAtoi(id, &v) || v <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": \"", id, "\" is not an id"));
  }
  return v;
}

v1::DeliveryState DeliveryStateOf(const DeliveryRecord& d) {
  if (d.status == "delivered") return v1::DELIVERY_STATE_DELIVERED;
  if (d.status == "failed" || d.status == "dropped") return v1::DELIVERY_STATE_FAILED;
  return d.attempts > 0 ? v1::DELIVERY_STATE_RETRYING : v1::DELIVERY_STATE_PENDING;
}

google::protobuf::Timestamp TpTs(std::chrono::system_clock::time_point t) {
  return MsTs(std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count());
}

}  // namespace

absl::StatusOr<v1::Alert> AlertEngine::GetAlert(const std::string& alert_id) {
  absl::StatusOr<int64_t> id = ParseId(alert_id, "alert_id");
  if (!id.ok()) return id.status();
  return pg_->RunTransactionFor<v1::Alert>([&](pqxx::work& w) -> absl::StatusOr<v1::Alert> {
    try {
      pqxx::result r = w.exec_params(kAlertById, *id);
      if (r.empty())
        return absl::NotFoundError(absl::StrCat("alert ", alert_id, " does not exist"));
      OpenAlert o = AlertFromRow<OpenAlert>(r[0]);
      if (o.state != "resolved") {
        Tx tx{.w = w, .now_ms = ToMs(clock_()), .changes = {}};
        absl::StatusOr<std::vector<ActiveSilence>> silences = LoadActiveSilences(tx);
        if (!silences.ok()) return silences.status();
        for (const ActiveSilence& s : *silences) {
          if (MatchesAll(s.matchers, LabelsOf(o.alert)))
            o.alert.add_silence_ids(absl::StrCat(s.id));
        }
      }
      absl::StatusOr<std::vector<DeliveryRecord>> deliveries = DeliveriesForAlert(w, *id);
      if (!deliveries.ok()) return deliveries.status();
      for (const DeliveryRecord& d : *deliveries) {
        v1::Delivery* out = o.alert.add_deliveries();
        out->set_target(d.target);
        if (auto k = config_.target_kinds.find(d.target); k != config_.target_kinds.end()) {
          out->set_target_kind(k->second == "slurm"          ? v1::TARGET_KIND_SLURM
                               : k->second == "osmo"         ? v1::TARGET_KIND_OSMO
                               : k->second == "alertmanager" ? v1::TARGET_KIND_ALERTMANAGER
                               : k->second == "webhook"      ? v1::TARGET_KIND_WEBHOOK
                                                             : v1::TARGET_KIND_UNSPECIFIED);
        }
        out->set_alert_state(StateFromName(d.state));
        out->set_idempotency_key(d.idempotency_key);
        out->set_state(DeliveryStateOf(d));
        out->set_attempts(d.attempts);
        out->set_last_error(d.last_error);
        *out->mutable_create_time() = TpTs(d.create_time);
        if (d.last_attempt_time) *out->mutable_last_attempt_time() = TpTs(*d.last_attempt_time);
        if (d.next_attempt_time && out->state() == v1::DELIVERY_STATE_RETRYING)
          *out->mutable_next_attempt_time() = TpTs(*d.next_attempt_time);
        if (d.delivered_time) *out->mutable_delivered_time() = TpTs(*d.delivered_time);
      }
      return o.alert;
    } catch (const std::exception& e) {
      if (platform::IsPgConnectionFailure(e)) throw;
      return PgError(e, "GetAlert");
    }
  });
}

absl::StatusOr<v1::ListAlertsResponse> AlertEngine::ListAlerts(
    const v1::ListAlertsRequest& request) {
  absl::StatusOr<AlertFilter> filter = FilterFromRequest(request);
  if (!filter.ok()) return filter.status();
  int page_size = request.page_size() <= 0 ? 100 : std::min(request.page_size(), 1000);
  std::optional<std::string> after_time;
  std::optional<int64_t> after_id;
  if (!request.page_token().empty()) {
    std::vector<std::string> parts = absl::StrSplit(request.page_token(), absl::MaxSplits('|', 1));
    int64_t id = 0;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &id)) {
      return absl::InvalidArgumentError(
          absl::StrCat("page_token: \"", request.page_token(), "\" is not a token of this list"));
    }
    after_id = id;
    after_time = parts[1];
  }
  std::vector<std::string> states, kinds, severities;
  for (v1::AlertState s : filter->states) states.push_back(StateName(s));
  for (v1::AlertKind k : filter->kinds) kinds.push_back(std::string(KindName(*KindFromProto(k))));
  if (filter->min_severity != v1::SEVERITY_UNSPECIFIED) {
    for (int s = filter->min_severity; s <= 3; ++s) {
      severities.push_back(std::string(SeverityName(static_cast<Severity>(s))));
    }
  }
  return pg_->RunTransactionFor<v1::ListAlertsResponse>(
      [&](pqxx::work& w) -> absl::StatusOr<v1::ListAlertsResponse> {
        try {
          v1::ListAlertsResponse out;
          std::optional<std::string> cursor_time = after_time;
          std::optional<int64_t> cursor_id = after_id;
          // Label matchers are applied here, so a page may take several reads.
          while (out.alerts_size() < page_size) {
            const int limit = page_size - out.alerts_size();
            pqxx::result r = w.exec_params(
                kListAlerts, absl::StrJoin(states, ","), absl::StrJoin(kinds, ","),
                absl::StrJoin(severities, ","), filter->cluster, filter->job_id,
                filter->active_from_ms, filter->active_to_ms, cursor_time, cursor_id, limit);
            for (const pqxx::row& row : r) {
              OpenAlert o = AlertFromRow<OpenAlert>(row);
              cursor_time = row[13].as<std::string>();
              cursor_id = o.id;
              if (!filter->job_id.empty() && o.alert.job().cluster() != filter->job_cluster)
                continue;
              if (!MatchesAll(filter->matchers, LabelsOf(o.alert))) continue;
              *out.add_alerts() = std::move(o.alert);
            }
            if (static_cast<int>(r.size()) < limit) {
              cursor_time.reset();
              break;
            }
          }
          if (cursor_time) out.set_next_page_token(absl::StrCat(*cursor_id, "|", *cursor_time));
          return out;
        } catch (const std::exception& e) {
          if (platform::IsPgConnectionFailure(e)) throw;
          return PgError(e, "ListAlerts");
        }
      });
}

absl::StatusOr<std::vector<v1::Alert>> AlertEngine::OpenAlerts(const AlertFilter& filter) {
  return pg_->RunTransactionFor<std::vector<v1::Alert>>(
      [&](pqxx::work& w) -> absl::StatusOr<std::vector<v1::Alert>> {
        try {
          std::vector<v1::Alert> out;
          for (const pqxx::row& row :
               w.exec(kOpenAlertsByUpdate)) {
            OpenAlert o = AlertFromRow<OpenAlert>(row);
            if (filter.Matches(o.alert)) out.push_back(std::move(o.alert));
          }
          return out;
        } catch (const std::exception& e) {
          if (platform::IsPgConnectionFailure(e)) throw;
          return PgError(e, "open alerts");
        }
      });
}

absl::StatusOr<v1::Alert> AlertEngine::AckAlert(const v1::AckAlertRequest& request) {
  absl::StatusOr<int64_t> id = ParseId(request.alert_id(), "alert_id");
  if (!id.ok()) return id.status();
  if (request.by().empty()) return absl::InvalidArgumentError("by: who acknowledges is required");
  v1::Alert result;
  absl::Status s = RunAndPublish([&](Tx& tx) -> absl::Status {
    try {
      pqxx::result r = tx.w.exec_params(kAlertByIdForUpdate, *id);
      if (r.empty()) {
        return absl::NotFoundError(absl::StrCat("alert ", request.alert_id(), " does not exist"));
      }
      OpenAlert o = AlertFromRow<OpenAlert>(r[0]);
      if (o.state == "resolved") {
        return absl::FailedPreconditionError(absl::StrCat(
            "alert ", request.alert_id(), " is resolved; there is nothing to acknowledge"));
      }
      if (o.state == "acknowledged") {
        result = o.alert;
        return absl::OkStatus();
      }
      tx.w.exec_params(kAckAlert, o.id, request.by(), request.comment(), tx.now_ms);
      o.alert.set_state(v1::ALERT_STATE_ACKNOWLEDGED);
      *o.alert.mutable_update_time() = MsTs(tx.now_ms);
      v1::Acknowledgement* ack = o.alert.mutable_acknowledgement();
      ack->set_by(request.by());
      ack->set_comment(request.comment());
      *ack->mutable_time() = MsTs(tx.now_ms);
      result = o.alert;
      v1::SubscribeAlertsResponse c;
      c.set_change(v1::ALERT_CHANGE_ACKNOWLEDGED);
      *c.mutable_alert() = o.alert;
      tx.changes.push_back(std::move(c));
      return absl::OkStatus();
    } catch (const std::exception& e) {
      if (platform::IsPgConnectionFailure(e)) throw;
      return PgError(e, "AckAlert");
    }
  });
  if (!s.ok()) return s;
  return result;
}

namespace {
v1::Silence SilenceFromRow(const pqxx::row& r, int64_t now_ms) {
  v1::Silence s;
  s.set_silence_id(absl::StrCat(r[0].as<int64_t>()));
  for (const Matcher& m : MatchersFromJson(r[1].as<std::string>())) {
    v1::LabelMatcher* out = s.add_matchers();
    out->set_name(m.name());
    out->set_value(m.value());
    out->set_comparison(OpToProto(m.op()));
  }
  *s.mutable_active()->mutable_start_time() = MsTs(r[2].as<int64_t>());
  *s.mutable_active()->mutable_end_time() = MsTs(r[3].as<int64_t>());
  s.set_created_by(r[4].as<std::string>());
  s.set_comment(r[5].as<std::string>());
  *s.mutable_create_time() = MsTs(r[6].as<int64_t>());
  s.set_expired(!r[7].is_null() || r[3].as<int64_t>() <= now_ms);
  return s;
}
}  // namespace

absl::StatusOr<v1::Silence> AlertEngine::CreateSilence(const v1::Silence& silence) {
  if (silence.matchers().empty()) {
    return absl::InvalidArgumentError("silence.matchers: at least one matcher is required");
  }
  absl::StatusOr<std::vector<Matcher>> matchers =
      MatchersFromProto(silence.matchers(), "silence.matchers");
  if (!matchers.ok()) return matchers.status();
  const int64_t now_ms = ToMs(clock_());
  if (!silence.active().has_end_time()) {
    return absl::InvalidArgumentError("silence.active.end_time: required");
  }
  const int64_t start_ms =
      silence.active().has_start_time() ? TsMs(silence.active().start_time()) : now_ms;
  const int64_t end_ms = TsMs(silence.active().end_time());
  if (end_ms <= start_ms || end_ms <= now_ms) {
    return absl::InvalidArgumentError(
        absl::StrCat("silence.active.end_time: ", absl::FormatTime(absl::FromUnixMillis(end_ms)),
                     " must be after the start and in the future"));
  }
  v1::Silence out;
  absl::Status s = RunAndPublish([&](Tx& tx) -> absl::Status {
    try {
      pqxx::result r = tx.w.exec_params(kInsertSilence, MatchersToJson(*matchers), start_ms, end_ms,
                                        silence.created_by(), silence.comment(), tx.now_ms);
      out = SilenceFromRow(r[0], tx.now_ms);
      if (start_ms <= tx.now_ms) {
        tx.silences->push_back({r[0][0].as<int64_t>(), *matchers});
      }
      return ApplySilences(tx);
    } catch (const std::exception& e) {
      if (platform::IsPgConnectionFailure(e)) throw;
      return PgError(e, "CreateSilence");
    }
  });
  if (!s.ok()) return s;
  return out;
}

absl::StatusOr<v1::Silence> AlertEngine::DeleteSilence(const std::string& silence_id) {
  absl::StatusOr<int64_t> id = ParseId(silence_id, "silence_id");
  if (!id.ok()) return id.status();
  v1::Silence out;
  absl::Status s = RunAndPublish([&](Tx& tx) -> absl::Status {
    try {
      pqxx::result r = tx.w.exec_params(kDeleteSilence, *id, tx.now_ms);
      if (r.empty())
        return absl::NotFoundError(absl::StrCat("silence ", silence_id, " does not exist"));
      out = SilenceFromRow(r[0], tx.now_ms);
      tx.silences->erase(std::remove_if(tx.silences->begin(), tx.silences->end(),
                                        [&](const ActiveSilence& a) { return a.id == *id; }),
                         tx.silences->end());
      return ApplySilences(tx);
    } catch (const std::exception& e) {
      if (platform::IsPgConnectionFailure(e)) throw;
      return PgError(e, "DeleteSilence");
    }
  });
  if (!s.ok()) return s;
  return out;
}

absl::StatusOr<v1::ListSilencesResponse> AlertEngine::ListSilences(
    const v1::ListSilencesRequest& request) {
  const int page_size = request.page_size() <= 0 ? 100 : std::min(request.page_size(), 1000);
  std::optional<int64_t> after;
  if (!request.page_token().empty()) {
    absl::StatusOr<int64_t> id = ParseId(request.page_token(), "page_token");
    if (!id.ok()) return id.status();
    after = *id;
  }
  const int64_t now_ms = ToMs(clock_());
  return pg_->RunTransactionFor<v1::ListSilencesResponse>(
      [&](pqxx::work& w) -> absl::StatusOr<v1::ListSilencesResponse> {
        try {
          v1::ListSilencesResponse out;
          pqxx::result r =
              w.exec_params(kListSilences, request.include_expired(), now_ms, after, page_size);
          for (const pqxx::row& row : r) *out.add_silences() = SilenceFromRow(row, now_ms);
          if (static_cast<int>(r.size()) == page_size) {
            out.set_next_page_token(out.silences(out.silences_size() - 1).silence_id());
          }
          return out;
        } catch (const std::exception& e) {
          if (platform::IsPgConnectionFailure(e)) throw;
          return PgError(e, "ListSilences");
        }
      });
}

}  // namespace goodput::alerting
