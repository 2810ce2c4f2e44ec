// The alert engine: applies the ordered pushes of ofu (windows) and mfu (divergence events)
// exactly once, feeds each job's new windows, in window order, to its detector state
// (job_evaluator.h), and turns what the detectors found into alerts with a lifecycle
// (alert_lifecycle.h) — all in the one PostgreSQL transaction that also advances the
// receiver's watermark, saves the detector state and enqueues the notifications (outbox.h).
// A push is acknowledged only after that transaction committed; a replayed push (at or below
// the watermark) changes nothing. The cost of a window does not depend on the job's length:
// only the windows after the job's evaluation frontier are read.
//
// A periodic Sweep, on an injected clock, does what no push triggers: alerts for running jobs
// whose telemetry stopped (judged against the data the platform has reached: while goodput
// itself is behind, one platform_lagging alert says so instead, platform_lag.h), gpu_fault alerts from the fault events ingest stored
// (gpu_fault_store.h), resolution of alerts whose job ended, and the start and end of
// silences.
//
// Lifecycle: a finding with no open alert of its fingerprint opens one, `firing` (or
// `silenced` when a silence matches: not delivered); each firing alert is enqueued once per
// routed target. An open alert whose finding is gone (or whose job ended) is `resolved`, and
// the resolution is enqueued to the targets that got the firing. `acknowledged` alerts stay
// open without re-notification. A finding that started and ended among the windows of one
// evaluation, or that was confirmed after its job ended, is recorded already resolved and
// sent, resolved with its evidence, to the targets that are not the job's scheduler. Changes
// are published to the AlertHub after commit.
//
//   AlertEngine engine(pool, config, &hub, logger);
//   absl::StatusOr<v1::DeliveryAck> ack = engine.PushWindows(request);
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "goodput/v1/alert.pb.h"
#include "services/alerting/alert_hub.h"
#include "services/alerting/alert_lifecycle.h"
#include "services/alerting/alert_rules.h"
#include "services/alerting/job_detectors.h"
#include "services/alerting/job_evaluator.h"
#include "services/alerting/platform_lag.h"
#include "services/core/ledger.h"
#include "services/platform/logging.h"
#include "services/platform/pg_pool.h"

namespace goodput::alerting {

namespace v1 = ::goodput::v1;

struct EngineConfig {
  RoutingConfig routing;
  std::vector<SeverityRule> severity_rules;  // before the built-in ones
  DetectorOptions detectors;
  std::string dashboard_url;  // base; the job page is <base>/#/job/<cluster>/<job_id>
  // Target name -> kind ("slurm", "osmo", "alertmanager", "webhook"), from delivery's
  // alerting.targets, to show in GetAlert's deliveries. Findings recorded already resolved
  // skip the scheduler kinds (slurm, osmo): there is no running job to tell.
  std::map<std::string, std::string> target_kinds;
  // A window is evaluated once a window ending this much later (data time) arrived, or the
  // job ended, or no window came for this long (wall time): ofu revises a window while late
  // samples may still reach it, and an evaluated window that is revised costs a replay.
  int64_t settle_s = 120;
  // The detector state is checkpointed to PostgreSQL when this much data time was evaluated
  // since the last checkpoint (and when a job's evaluation is complete).
  int64_t checkpoint_every_s = 3600;
  // Jobs whose detector state is kept in memory (least recently evaluated dropped first).
  size_t max_cached_jobs = 4096;
  // A GPU fault coincides with a finding when it happened on one of the job's GPUs (the
  // straggling GPU, for a straggler) from this long before the finding's onset up to its
  // detection (gpu_fault_findings.h); the default covers a collective's timeout (PyTorch's
  // default process-group timeout is 30 minutes), the longest a job normally runs on after
  // one of its GPUs died.
  int64_t fault_correlation_window_s = 1800;
  // Alerting faults this recent make their running job a candidate of the GPU fault sweep
  // (gpu_fault_store.h): longer than any outage of every alerting replica.
  int64_t fault_candidate_horizon_s = 7 * 86400;
  // The platform's own backlog (platform_lag.h): alerting.expected_window_delay_s and
  // alerting.platform_lag_alert_s; a producer counts while it delivered within
  // detectors.telemetry_stopped_after_s (inactive_after_s is set from it).
  PlatformLagOptions platform_lag;
};

// Where the engine hands over to the job-end products (job_reporter.h): what happens when a
// job has ended belongs after its evaluation, so the engine tells them, inside the
// transaction that evaluated, of every job whose evaluation reached its end after the job
// ended (every window it sent evaluated: its report can be written, or revised with the
// findings of late windows) and of every job whose alerts changed (an ended job's report
// lists them); `in_transaction` returns true when that made a report due. `after_commit` runs
// once such a transaction committed. The sweep calls `sweep` in a transaction of its own, for
// jobs no evaluation will bring (ended without a window to evaluate). Any may be empty.
struct JobEndHook {
  std::function<bool(pqxx::work&, const std::string& cluster, const std::string& job_id)>
      in_transaction;
  std::function<void()> after_commit;
  std::function<int(pqxx::work&)> sweep;
};

class AlertEngine {
 public:
  using Clock = std::function<absl::Time()>;

  // `hub` may be null. `clock` defaults to absl::Now.
  AlertEngine(platform::PgPool* pg, EngineConfig config, AlertHub* hub, platform::Logger logger,
              Clock clock = nullptr);
  ~AlertEngine();

  // Ordered pushes (see DeliverySequence). INVALID_ARGUMENT for a bad position; windows and
  // events that lack their job are skipped (and logged) so one bad item does not block the
  // stream.
  absl::StatusOr<v1::DeliveryAck> PushWindows(const v1::PushWindowsRequest& request);
  absl::StatusOr<v1::DeliveryAck> PushDivergenceEvents(
      const v1::PushDivergenceEventsRequest& request);

  // Set before Start and the first push.
  void SetJobEndHook(JobEndHook hook) { job_end_hook_ = std::move(hook); }

  // Telemetry-stopped detection, alerts of ended jobs, silences that started or ended; then
  // the job-end hook's sweep.
  absl::Status Sweep();
  // Runs Sweep every `interval` on a thread until Stop. With several replicas, `may_sweep`
  // (e.g. holding a Redis lease) lets one of them do it; sweeping twice is harmless (every
  // change is made under row and job locks and is idempotent), only wasted work.
  void Start(absl::Duration interval, std::function<bool()> may_sweep = nullptr);
  void Stop();

  absl::StatusOr<v1::Alert> GetAlert(const std::string& alert_id);
  absl::StatusOr<v1::ListAlertsResponse> ListAlerts(const v1::ListAlertsRequest& request);
  // The job's goodput ledger (services/core/ledger.h): its stored windows replayed through detectors
  // built as a rebuild builds them, their findings the causes; the allocation is `gpus` (the
  // registry's gpu_count when 0) over the job's registered start and end. nullopt when
  // alerting has no window of the job. Reads only; the job's evaluation is not touched.
  absl::StatusOr<std::optional<core::JobLedger>> Ledger(const std::string& cluster,
                                                  const std::string& job_id, int gpus = 0);
  // Open (firing, acknowledged, silenced) alerts matching `filter`, newest change first.
  absl::StatusOr<std::vector<v1::Alert>> OpenAlerts(const AlertFilter& filter);
  absl::StatusOr<v1::Alert> AckAlert(const v1::AckAlertRequest& request);
  absl::StatusOr<v1::Silence> CreateSilence(const v1::Silence& silence);
  absl::StatusOr<v1::Silence> DeleteSilence(const std::string& silence_id);
  absl::StatusOr<v1::ListSilencesResponse> ListSilences(const v1::ListSilencesRequest& request);

  const EngineConfig& config() const { return config_; }

 private:
  struct Tx;  // one transaction's context (changes to publish after commit)
  struct JobMeta;
  struct OpenAlert;
  struct ActiveSilence;
  struct JobChange;  // what one ordered push (or the sweep) brings to one job
  struct CachedJob;
  struct EvaluatedJob;

  absl::StatusOr<int64_t> LockWatermark(Tx& tx, const std::string& stream,
                                        const std::string& producer);
  // Jobs touched by one ordered push, evaluated once after all its items are written.
  using JobKey = std::pair<std::string, std::string>;
  using JobSet = std::map<JobKey, JobChange>;
  // The exactly-once receive of one ordered push on `stream`: checks the position, locks the
  // producer's watermark, acks duplicates and gaps without writing, else runs `write_items`,
  // evaluates the jobs it touched and advances the watermark, all in one transaction.
  absl::StatusOr<v1::DeliveryAck> ReceiveInOrder(
      const v1::DeliverySequence& pos, const char* stream, const char* rpc,
      const std::function<void(Tx&, JobSet&)>& write_items);
  // Takes the job's lock (evaluations of one job run one at a time) and reads what alerts
  // say about it; defaults when the job is not registered.
  JobMeta LockJobMeta(Tx& tx, const std::string& cluster, const std::string& job_id);
  JobMeta ReadJobMeta(Tx& tx, const std::string& cluster, const std::string& job_id);
  // A detector state for the job from its first window on: its workload's earlier jobs as
  // known at `first_start_ms`, and mfu's stored events.
  std::unique_ptr<JobEvaluator> NewEvaluator(Tx& tx, const JobMeta& meta, int64_t first_start_ms);
  // Tells `ev` whether the job is an inference service and, for one, returns its engines'
  // token rate from `from_ms` on (unset when none reported).
  std::optional<TokenRate> ServingLoad(Tx& tx, const JobMeta& meta, JobEvaluator& ev,
                                       int64_t from_ms);
  // Feeds the job's new settled windows and mfu's new events to its detector state (cached,
  // restored from its checkpoint, or rebuilt from its windows), applies the lifecycle to its
  // alerts and saves the state.
  absl::Status EvaluateJob(Tx& tx, const std::string& cluster, const std::string& job_id,
                           const JobChange& change);
  // Reads the job's open alerts once, decides their lifecycle from `input`
  // (alert_lifecycle.h) and applies the decisions.
  absl::Status ApplyLifecycle(Tx& tx, const JobMeta& meta, const LifecycleInput& input);
  // The alert for `finding` with its words, labels and severity (no evidence windows yet).
  v1::Alert DescribeFinding(const Tx& tx, const JobMeta& meta, const Finding& f,
                            const std::string& fingerprint, Labels& labels) const;
  // Evidence read from what alerting stored: windows around the finding, the GPUs it names,
  // mfu's verdict and the precision switches near it.
  void AddEvidence(Tx& tx, const JobMeta& meta, const Finding& f, v1::Alert& alert);
  // Telemetry-stopped decisions (the sweep's).
  absl::Status Reconcile(Tx& tx, const JobMeta& meta, const std::vector<Finding>& findings,
                         const std::set<Kind>& kinds);
  std::unique_ptr<JobEvaluator> TakeCached(const JobKey& key, int64_t generation);
  void PutCached(JobKey key, std::unique_ptr<JobEvaluator> evaluator, int64_t generation);
  absl::Status Resolve(Tx& tx, const OpenAlert& open);
  // The targets `labels` route to; without the scheduler kinds (slurm, osmo) unless
  // `to_scheduler`: a finding recorded after its job ended, or the platform's own alert.
  std::vector<std::string> RoutedTargets(const Labels& labels, bool to_scheduler) const;
  absl::Status ApplySilences(Tx& tx);
  absl::Status EnqueueState(Tx& tx, int64_t alert_id, const v1::Alert& alert,
                            const std::string& state, const std::vector<std::string>& targets);
  absl::StatusOr<std::vector<ActiveSilence>> LoadActiveSilences(Tx& tx);
  absl::Status RunAndPublish(const std::function<absl::Status(Tx&)>& fn);
  // Running jobs whose telemetry stopped `backlog_ms` before now: judged against the data the
  // platform has reached, not the clock.
  absl::Status SweepTelemetry(int64_t backlog_ms);
  // A push from `producer` on `stream` delivered windows up to `newest_end_ms`: its progress
  // (platform_lag.h), on its watermark row that ReceiveInOrder holds locked.
  void AdvanceProducerProgress(Tx& tx, const std::string& stream, const std::string& producer,
                               int64_t newest_end_ms);
  // The platform's backlog now, with its platform_lagging alert opened, updated or resolved
  // (platform_lag_sweep.cc).
  absl::StatusOr<PlatformLag> SweepPlatformLag();
  PlatformLagOptions LagOptions() const;  // config_.platform_lag with its inactive time
  // gpu_fault alerts (gpu_fault_store.h): every candidate job's alerting faults, one finding
  // per faulty GPU, decided under the job's lock.
  absl::Status SweepGpuFaults();
  absl::Status SweepEndedJobs();
  // Reads (cluster, job_id) rows with `candidates` in one transaction, then runs `fn` for each
  // job in a transaction of its own, publishing its changes; `what` names the step in errors.
  absl::Status ForEachCandidateJob(
      const std::function<pqxx::result(pqxx::work&)>& candidates, const char* what,
      const std::function<absl::Status(Tx&, const std::string&, const std::string&)>& fn);

  platform::PgPool* pg_;
  EngineConfig config_;
  JobEndHook job_end_hook_;
  AlertHub* hub_;
  platform::Logger logger_;
  Clock clock_;

  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;

  absl::Mutex cache_mu_;
  std::map<JobKey, std::unique_ptr<CachedJob>> cache_ ABSL_GUARDED_BY(cache_mu_);
  int64_t cache_clock_ ABSL_GUARDED_BY(cache_mu_) = 0;
};

}  // namespace goodput::alerting
