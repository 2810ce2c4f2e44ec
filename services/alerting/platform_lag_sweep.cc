// The alert engine's side of platform_lag.h: each ofu producer's delivery progress, kept on
// its receiver watermark row, and the platform's own alert, decided by the sweep.
#include <optional>
#include <string>
#include <vector>

#include "services/alerting/alert_engine.h"
#include "services/alerting/alert_engine_internal.h"
#include "services/alerting/alert_store_sql.h"

namespace goodput::alerting {

namespace {

using namespace engine_internal;  // NOLINT: ToMs, PgError

std::optional<int64_t> OptMs(const pqxx::field& f) {
  if (f.is_null()) return std::nullopt;
  return f.as<int64_t>();
}

// Row (GP_PROGRESS_COLUMNS) -> progress.
ProducerProgress ProgressFromRow(const pqxx::row& r) {
  ProducerProgress p;
  p.producer = r[0].as<std::string>();
  p.frontier_ms = OptMs(r[1]);
  p.advanced_at_ms = OptMs(r[2]).value_or(0);
  p.backlog_ms = OptMs(r[3]).value_or(0);
  p.lagging_since_ms = OptMs(r[4]);
  return p;
}

}  // namespace

PlatformLagOptions AlertEngine::LagOptions() const {
  PlatformLagOptions o = config_.platform_lag;
  o.inactive_after_s = config_.detectors.telemetry_stopped_after_s;
  return o;
}

void AlertEngine::AdvanceProducerProgress(Tx& tx, const std::string& stream,
                                          const std::string& producer, int64_t newest_end_ms) {
  pqxx::result r = tx.w.exec_params(sql::kProducerProgress, stream, producer);
  if (r.empty()) return;
  const ProducerProgress before = ProgressFromRow(r[0]);
  const ProducerProgress after = AdvanceProgress(before, newest_end_ms, tx.now_ms, LagOptions());
  if (after.frontier_ms == before.frontier_ms) return;  // an older window: nothing moved
  tx.w.exec_params(sql::kSetProducerProgress, stream, producer, *after.frontier_ms,
                   after.advanced_at_ms, after.backlog_ms, after.lagging_since_ms);
}

absl::StatusOr<PlatformLag> AlertEngine::SweepPlatformLag() {
  PlatformLag lag;
  absl::Status s = RunAndPublish([&](Tx& tx) -> absl::Status {
    try {
      std::vector<ProducerProgress> producers;
      for (const pqxx::row& r : tx.w.exec_params(sql::kStreamProgress, "windows")) {
        producers.push_back(ProgressFromRow(r));
      }
      lag = AssessPlatformLag(producers, tx.now_ms, LagOptions());
      std::vector<Finding> holding;
      if (lag.alert) {
        Finding f;
        f.kind = Kind::kPlatformLagging;
        f.detector = "platform_lag/newest_window_age";
        f.confidence = 1.0;
        f.onset_s = lag.lagging_since_ms.value_or(tx.now_ms) / 1000;
        f.detected_s = tx.now_ms / 1000;
        f.last_sample_s = lag.frontier_ms / 1000;  // the data the platform has reached
        f.platform_lag = lag;
        f.extra_labels["component"] = "goodput";
        holding.push_back(std::move(f));
      }
      // One alert for the platform: no cluster, no job (and so never a scheduler's); decided
      // under the lock of that empty key, so two sweeping replicas take turns.
      tx.w.exec_params(sql::kJobLock, "", "");
      JobMeta platform;
      platform.scheduler = "";
      return Reconcile(tx, platform, holding, {Kind::kPlatformLagging});
    } catch (const std::exception& e) {
      if (platform::IsPgConnectionFailure(e)) throw;
      return PgError(e, "platform lag sweep");
    }
  });
  if (!s.ok()) return s;
  return lag;
}

}  // namespace goodput::alerting
