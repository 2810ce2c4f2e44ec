// The alert store's SQL, as named constants (services/alerting/alert_engine.cc runs them).
// Times cross as unix milliseconds: GP_MS(n) turns parameter $n into a timestamptz and
// GP_TO_MS(col) a column into milliseconds, both exact. Tables: migrations/0030_alerts.sql,
// 0031 (outbox), 0054 (evaluation frontier, checkpoints, alert onset).
#pragma once

namespace goodput::alerting::sql {


#define GP_MS(n) "(timestamptz 'epoch' + $" #n "::bigint * interval '1 millisecond')"
#define GP_TO_MS(col) "(extract(epoch FROM " col ") * 1000)::bigint"

constexpr char kEnsureWatermark[] =
    "INSERT INTO alert_receiver_state (stream, producer) VALUES ($1, $2) "
    "ON CONFLICT (stream, producer) DO NOTHING";
constexpr char kLockWatermark[] =
    "SELECT watermark FROM alert_receiver_state WHERE stream = $1 AND producer = $2 FOR UPDATE";
constexpr char kSetWatermark[] =
    "UPDATE alert_receiver_state SET watermark = $3, updated_at = now() "
    "WHERE stream = $1 AND producer = $2";

// A producer's delivery progress (platform_lag.h), on its locked watermark row; all of the
// stream's producers for the sweep.
#define GP_PROGRESS_COLUMNS                                                          \
  "producer, " GP_TO_MS("data_frontier") ", " GP_TO_MS("frontier_advanced_at") ", " \
  "frontier_backlog_ms, " GP_TO_MS("lagging_since")
constexpr char kProducerProgress[] = "SELECT " GP_PROGRESS_COLUMNS
                                     " FROM alert_receiver_state WHERE stream = $1 AND producer = $2";
constexpr char kStreamProgress[] = "SELECT " GP_PROGRESS_COLUMNS
                                   " FROM alert_receiver_state WHERE stream = $1 ORDER BY producer";
constexpr char kSetProducerProgress[] =
    "UPDATE alert_receiver_state SET data_frontier = " GP_MS(3) ", frontier_advanced_at = " GP_MS(
        4) ", frontier_backlog_ms = $5, lagging_since = CASE WHEN $6::bigint IS NULL THEN NULL "
    "ELSE " GP_MS(6) " END WHERE stream = $1 AND producer = $2";

// Returns a row when the window was written (new, or a higher revision).
constexpr char kUpsertWindow[] =
    "INSERT INTO alert_windows (cluster, job_id, start_time, end_time, revision, window_pb) "
    "VALUES ($1, $2, " GP_MS(3) ", " GP_MS(4) ", $5, decode($6, 'base64')) "
    "ON CONFLICT (cluster, job_id, start_time) DO UPDATE SET end_time = EXCLUDED.end_time, "
    "  revision = EXCLUDED.revision, window_pb = EXCLUDED.window_pb, received_at = now() "
    "WHERE alert_windows.revision < EXCLUDED.revision RETURNING 1";
// The windows from the evaluation frontier on, in window order.
constexpr char kWindowsFrom[] =
    "SELECT encode(window_pb, 'base64') FROM alert_windows WHERE cluster = $1 AND job_id = $2 "
    "AND start_time >= " GP_MS(3) " ORDER BY start_time";
constexpr char kEvidenceWindows[] =
    "SELECT encode(window_pb, 'base64') FROM alert_windows WHERE cluster = $1 AND job_id = $2 "
    "AND start_time >= " GP_MS(3) " AND start_time < " GP_MS(4) " ORDER BY start_time LIMIT 60";

constexpr char kInsertEvent[] =
    "INSERT INTO alert_divergence_events (event_id, cluster, job_id, event_time, kind, event_pb) "
    "VALUES ($1, $2, $3, " GP_MS(4) ", $5, decode($6, 'base64')) "
    "ON CONFLICT (event_id) DO NOTHING RETURNING 1";
constexpr char kLatestVerdicts[] =
    "SELECT encode(event_pb, 'base64') FROM alert_divergence_events "
    "WHERE cluster = $1 AND job_id = $2 AND kind = 'verdict' "
    "ORDER BY event_time DESC, received_at DESC, event_id DESC LIMIT 20";
constexpr char kSwitchesBetween[] =
    "SELECT encode(event_pb, 'base64') FROM alert_divergence_events "
    "WHERE cluster = $1 AND job_id = $2 AND kind = 'precision_switch' "
    "AND event_time >= " GP_MS(3) " AND event_time < " GP_MS(4) " ORDER BY event_time";
constexpr char kJobEvents[] =
    "SELECT encode(event_pb, 'base64') FROM alert_divergence_events "
    "WHERE cluster = $1 AND job_id = $2 ORDER BY event_time, received_at, event_id";

constexpr char kJobLock[] =
    "SELECT pg_advisory_xact_lock(hashtext('alerting.job/' || $1 || '/' || $2))";
constexpr char kJobMeta[] =
    "SELECT scheduler, user_name, team, name, workload_fingerprint, gpu_model, state, "
    "  labels::text, coalesce(workload_kind, ''), " GP_TO_MS("end_time") ", " GP_TO_MS(
        "start_time") ", coalesce(gpu_count, 0) "
    "FROM jobs WHERE cluster = $1 AND job_id = $2";

// The increases of a job's serving token counters (prompt and generation, every engine
// series) whose later sample is after $3 (unix ms): [previous sample ms, sample ms, increase].
// A value below the one before is a counter that restarted: its increase is the value. 15
// minutes before $3 are read (TokenRate::kMaxSpreadMs) so that the first increase after it
// has its previous sample.
constexpr char kServingTokenIncreases[] =
    "SELECT " GP_TO_MS("t0") ", " GP_TO_MS("t1") ", inc FROM ("
    "  SELECT lag(s.sample_time) OVER w AS t0, s.sample_time AS t1, "
    "    CASE WHEN s.value < lag(s.value) OVER w THEN s.value "
    "         ELSE s.value - lag(s.value) OVER w END AS inc "
    "  FROM serving_samples s "
    "  WHERE s.job = (SELECT id FROM jobs WHERE cluster = $1 AND job_id = $2) "
    "    AND s.metric IN ('prompt_tokens', 'generation_tokens') "
    "    AND s.sample_time >= " GP_MS(3) " - interval '15 minutes' "
    "  WINDOW w AS (PARTITION BY s.host, s.pod, s.engine, s.series, s.metric "
    "               ORDER BY s.sample_time)) d "
    "WHERE t0 IS NOT NULL AND t1 > " GP_MS(3) " ORDER BY t1";

// The job's windows arrived: their span and workload (the state's row exists from then on).
constexpr char kTouchJobState[] =
    "INSERT INTO alert_job_state (cluster, job_id, workload_fingerprint, first_window_start, "
    "  last_window_end) VALUES ($1, $2, $3, " GP_MS(4) ", " GP_MS(5) ") "
    "ON CONFLICT (cluster, job_id) DO UPDATE SET "
    "  workload_fingerprint = CASE WHEN alert_job_state.workload_fingerprint = '' "
    "    THEN EXCLUDED.workload_fingerprint ELSE alert_job_state.workload_fingerprint END, "
    "  first_window_start = LEAST(alert_job_state.first_window_start, EXCLUDED.first_window_start), "
    "  last_window_end = GREATEST(alert_job_state.last_window_end, EXCLUDED.last_window_end), "
    "  updated_at = now()";
// Where the job's evaluation stands; the last column: no window came for $3 seconds.
constexpr char kJobState[] =
    "SELECT workload_fingerprint, " GP_TO_MS("first_window_start") ", " GP_TO_MS(
        "last_window_end") ", " GP_TO_MS("evaluated_end") ", generation, "
    "  encode(checkpoint, 'base64'), " GP_TO_MS("checkpoint_end") ", "
    "  updated_at < now() - $3 * interval '1 second' "
    "FROM alert_job_state WHERE cluster = $1 AND job_id = $2";
constexpr char kSaveJobState[] =
    "UPDATE alert_job_state SET steady_median_ofu = $3, steady_mad_ofu = $4, steady_windows = $5, "
    "  effective_peak_tflops = $6, evaluated_end = " GP_MS(7) ", generation = generation + 1, "
    "  checkpoint = CASE WHEN $8::text IS NULL THEN checkpoint ELSE decode($8, 'base64') END, "
    "  checkpoint_end = CASE WHEN $8::text IS NULL THEN checkpoint_end ELSE " GP_MS(7) " END "
    "WHERE cluster = $1 AND job_id = $2 RETURNING generation";
// Jobs with windows not yet evaluated that nothing newer will settle: ended, or quiet for $1 s.
constexpr char kJobsToSettle[] =
    "SELECT s.cluster, s.job_id FROM alert_job_state s LEFT JOIN jobs j "
    "  ON j.cluster = s.cluster AND j.job_id = s.job_id "
    "WHERE (s.evaluated_end IS NULL OR s.evaluated_end < s.last_window_end) "
    "  AND (coalesce(j.state, 'running') NOT IN ('pending', 'running', 'unknown') "
    "       OR s.updated_at < now() - $1 * interval '1 second') "
    "UNION "
    "SELECT DISTINCT a.cluster, a.job_id FROM alerts a JOIN jobs j "
    "  ON j.cluster = a.cluster AND j.job_id = a.job_id "
    "WHERE a.state <> 'resolved' AND j.state NOT IN ('pending', 'running', 'unknown')";
// Earlier jobs of the workload: started before this one, most recent first.
constexpr char kEarlierJobs[] =
    "SELECT job_id, (extract(epoch FROM last_window_end))::bigint, steady_median_ofu, "
    "  steady_mad_ofu, steady_windows, effective_peak_tflops FROM alert_job_state "
    "WHERE workload_fingerprint = $1 AND first_window_start < " GP_MS(2)
    "  AND NOT (cluster = $3 AND job_id = $4) "
    "ORDER BY first_window_start DESC LIMIT $5";

#define GP_ALERT_COLUMNS                                                               \
  "id, fingerprint, kind, state, notified_targets::text, encode(alert_pb, 'base64'), " \
  "labels::text, " GP_TO_MS("start_time") ", " GP_TO_MS("end_time") ", " GP_TO_MS(     \
      "update_time") ", ack_by, " GP_TO_MS("ack_time") ", ack_comment, update_time::text"

constexpr char kOpenAlertsOfJob[] = "SELECT " GP_ALERT_COLUMNS
                                    " FROM alerts WHERE cluster = $1 AND job_id = $2 "
                                    "AND state <> 'resolved' ORDER BY id FOR UPDATE";
constexpr char kOpenAlerts[] =
    "SELECT " GP_ALERT_COLUMNS " FROM alerts WHERE state <> 'resolved' ORDER BY id FOR UPDATE";
constexpr char kAlertById[] = "SELECT " GP_ALERT_COLUMNS " FROM alerts WHERE id = $1";
constexpr char kAlertByIdForUpdate[] =
    "SELECT " GP_ALERT_COLUMNS " FROM alerts WHERE id = $1 FOR UPDATE";
constexpr char kInsertAlert[] =
    "INSERT INTO alerts (fingerprint, kind, state, severity, cluster, job_id, labels, alert_pb, "
    "  start_time, update_time, onset_time) "
    "VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, decode($8, 'base64'), " GP_MS(9) ", " GP_MS(
        9) ", " GP_MS(10) ") RETURNING id";
constexpr char kInsertResolvedAlert[] =
    "INSERT INTO alerts (fingerprint, kind, state, severity, cluster, job_id, labels, alert_pb, "
    "  start_time, end_time, update_time, onset_time) "
    "VALUES ($1, $2, 'resolved', $3, $4, $5, $6::jsonb, decode($7, 'base64'), " GP_MS(8) ", " GP_MS(
        9) ", " GP_MS(10) ", " GP_MS(11) ") RETURNING id";
constexpr char kRecordedBefore[] =
    "SELECT 1 FROM alerts WHERE fingerprint = $1 AND onset_time = " GP_MS(2) " LIMIT 1";
constexpr char kUpdateAlertDecision[] =
    "UPDATE alerts SET severity = $2, labels = $3::jsonb, alert_pb = decode($4, 'base64'), "
    "  update_time = " GP_MS(5) " WHERE id = $1";
constexpr char kSetAlertState[] =
    "UPDATE alerts SET state = $2, update_time = " GP_MS(3) " WHERE id = $1";
constexpr char kResolveAlert[] = "UPDATE alerts SET state = 'resolved', end_time = " GP_MS(
    2) ", update_time = " GP_MS(2) " WHERE id = $1";
constexpr char kAckAlert[] =
    "UPDATE alerts SET state = 'acknowledged', ack_by = $2, ack_comment = $3, "
    "  ack_time = " GP_MS(4) ", update_time = " GP_MS(4) " WHERE id = $1";
constexpr char kSetNotified[] =
    "UPDATE alerts SET notified_targets = (SELECT coalesce(array_agg(DISTINCT t), '{}') FROM "
    "  unnest(notified_targets || string_to_array($2, E'\\x1f')) AS t WHERE t <> '') "
    "WHERE id = $1";
constexpr char kListAlerts[] =
    "SELECT " GP_ALERT_COLUMNS " FROM alerts "
    "WHERE ($1 = '' OR state = ANY(string_to_array($1, ','))) "
    "  AND ($2 = '' OR kind = ANY(string_to_array($2, ','))) "
    "  AND ($3 = '' OR severity = ANY(string_to_array($3, ','))) "
    "  AND ($4 = '' OR cluster = $4) AND ($5 = '' OR job_id = $5) "
    "  AND ($6::bigint IS NULL OR coalesce(end_time, 'infinity') >= " GP_MS(6) ") "
    "  AND ($7::bigint IS NULL OR start_time < " GP_MS(7) ") "
    "  AND ($8::text IS NULL OR (update_time, id) < ($8::timestamptz, $9::bigint)) "
    "ORDER BY update_time DESC, id DESC LIMIT $10";

// Running jobs whose telemetry is stale, and jobs with an open telemetry_stopped alert.
// $1: the reference time (the clock less the platform's backlog) less telemetry_stopped_after_s.
constexpr char kTelemetryCandidates[] =
    "SELECT s.cluster, s.job_id, " GP_TO_MS("s.last_window_end") " FROM alert_job_state s "
    "JOIN jobs j ON j.cluster = s.cluster AND j.job_id = s.job_id "
    "WHERE j.state = 'running' AND s.last_window_end < " GP_MS(1) " "
    "UNION "
    "SELECT s.cluster, s.job_id, " GP_TO_MS("s.last_window_end") " FROM alert_job_state s "
    "JOIN alerts a ON a.cluster = s.cluster AND a.job_id = s.job_id "
    "WHERE a.state <> 'resolved' AND a.kind = 'telemetry_stopped'";
constexpr char kLastWindowEnd[] = "SELECT " GP_TO_MS(
    "last_window_end") " FROM alert_job_state WHERE cluster = $1 AND job_id = $2";

constexpr char kActiveSilences[] =
    "SELECT id, matchers::text FROM alert_silences WHERE deleted_at IS NULL "
    "AND start_time <= " GP_MS(1) " AND end_time > " GP_MS(1) " ORDER BY id";
#define GP_SILENCE_COLUMNS \
  "id, matchers::text, " GP_TO_MS("start_time") ", " GP_TO_MS("end_time") ", created_by, " \
  "comment, " GP_TO_MS("created_at") ", " GP_TO_MS("deleted_at")
constexpr char kInsertSilence[] =
    "INSERT INTO alert_silences (matchers, start_time, end_time, created_by, comment, created_at) "
    "VALUES ($1::jsonb, " GP_MS(2) ", " GP_MS(3) ", $4, $5, " GP_MS(
        6) ") RETURNING " GP_SILENCE_COLUMNS;
constexpr char kDeleteSilence[] =
    "UPDATE alert_silences SET deleted_at = coalesce(deleted_at, " GP_MS(2) ") WHERE id = $1 "
    "RETURNING " GP_SILENCE_COLUMNS;
constexpr char kListSilences[] =
    "SELECT " GP_SILENCE_COLUMNS " FROM alert_silences "
    "WHERE ($1 OR (deleted_at IS NULL AND end_time > " GP_MS(2) ")) "
    "  AND ($3::bigint IS NULL OR id < $3) ORDER BY id DESC LIMIT $4";
constexpr char kOpenAlertsByUpdate[] = "SELECT " GP_ALERT_COLUMNS
                                       " FROM alerts WHERE state <> 'resolved' "
                                       "ORDER BY update_time DESC, id DESC";

}  // namespace goodput::alerting::sql
