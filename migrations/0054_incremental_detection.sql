-- 0054: alerting evaluates each job's windows once, in window order, with detector state kept
-- in memory and checkpointed here (services/alerting/job_evaluator.h).
--
-- alert_job_state gains the evaluation frontier: `evaluated_end` is the end of the last
-- window fed to the detectors, `generation` counts evaluations (a replica whose cached state
-- is of another generation reloads it), and `checkpoint` is the detector state as of
-- `checkpoint_end` (CBOR), so that a restart replays only the windows after it.
ALTER TABLE alert_job_state
  ADD COLUMN evaluated_end       timestamptz,
  ADD COLUMN generation          bigint      NOT NULL DEFAULT 0,
  ADD COLUMN checkpoint          bytea,
  ADD COLUMN checkpoint_end      timestamptz;

-- A finding is identified by its fingerprint and onset: a replay from a checkpoint that meets
-- a finding already recorded (open or resolved) does not record it twice.
ALTER TABLE alerts ADD COLUMN onset_time timestamptz;
CREATE INDEX alerts_by_fingerprint_onset ON alerts (fingerprint, onset_time);

-- The sweep's candidates: jobs with windows not yet evaluated (few next to all jobs).
CREATE INDEX alert_job_state_to_evaluate ON alert_job_state (updated_at)
  WHERE evaluated_end IS NULL OR evaluated_end < last_window_end;
