-- Job-end reports are assembled by goodput-alerting at the end of the pipeline
-- (services/alerting/README.md, "Job-end reports"); the table job_reports (0056) and every
-- report in it stay as they are.
--
-- A report is assembled when an event changes it, not by a periodic scan: the transaction of
-- the event (an ended job's evaluation reached its end, its alerts changed) adds or renews the
-- job's request here; the reporter claims due requests (FOR UPDATE SKIP LOCKED), and deletes
-- one once its report is stored unless `generation` moved (a newer event renewed it).
CREATE TABLE job_report_requests (
  job          bigint      PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
  generation   bigint      NOT NULL DEFAULT 1,
  due_at       timestamptz NOT NULL DEFAULT now(),
  attempts     integer     NOT NULL DEFAULT 0,  -- failed assemblies (ofu or mfu unreachable)
  last_error   text        NOT NULL DEFAULT '',
  requested_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX job_report_requests_due ON job_report_requests (due_at, job);

-- Reports that could still change when goodput-ofu re-checked them get a request, so that
-- alerting revises them.
INSERT INTO job_report_requests (job)
SELECT job FROM job_reports WHERE NOT final OR created_at > now() - interval '1 day';

-- The AdminComment is an outbox row (kind 'admin_comment', state 'admin_comment', no alert);
-- the report names its row, whose status says whether Slurm has it.
ALTER TABLE job_reports ADD COLUMN admin_comment_key text;
ALTER TABLE job_reports DROP COLUMN admin_comment_written;
ALTER TABLE alert_outbox DROP CONSTRAINT alert_outbox_kind_check;
-- NOT VALID: the rows there passed the narrower check; validated by the next file.
ALTER TABLE alert_outbox ADD CONSTRAINT alert_outbox_kind_check CHECK (
  (kind = 'alert' AND alert_id IS NOT NULL AND state IN ('firing', 'resolved')) OR
  (kind = 'digest' AND alert_id IS NULL AND state = 'digest') OR
  (kind = 'admin_comment' AND alert_id IS NULL AND state = 'admin_comment')) NOT VALID;
