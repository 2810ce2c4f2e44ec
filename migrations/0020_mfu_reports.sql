-- 0020: framework MFU reports received by goodput-mfu.
-- A report is keyed by its client-chosen report_id: a retried report is acknowledged as a
-- duplicate and not stored twice. Reports name their job by key (cluster, job_id) and are
-- kept even when that job is not registered yet; they are attached by that key once it is.
-- app_mfu and friends are filled when the job's GPU model is known (at write time, or later
-- when the reports are read); gpu_model records the model they were computed for.
CREATE TABLE mfu_reports (
  report_id            text             PRIMARY KEY CHECK (report_id <> ''),
  cluster              text             NOT NULL CHECK (cluster <> ''),
  job_id               text             NOT NULL CHECK (job_id <> ''),
  interval_start       timestamptz      NOT NULL,
  interval_end         timestamptz      NOT NULL,
  received_at          timestamptz      NOT NULL DEFAULT now(),
  report               bytea            NOT NULL,  -- serialized goodput.v1.MfuReport
  precision_assumed    boolean          NOT NULL DEFAULT false,  -- BF16 assumed
  app_mfu              double precision,           -- fraction; NULL until computable
  model_tflops_per_gpu double precision,           -- NULL for the `mfu` form
  peak_tflops          double precision,           -- dense peak or P_eff used
  gpu_model            text,                       -- model app_mfu was computed for
  CONSTRAINT mfu_reports_interval CHECK (interval_end > interval_start)
);

CREATE INDEX mfu_reports_by_job ON mfu_reports (cluster, job_id, interval_start, report_id);
