-- 0022: reconciliation of app MFU with OFU per window and per job, and the divergence events
-- sent to alerting with catch-up.
--
-- A job whose reports or windows changed is marked in mfu_reconcile_pending (in the
-- transaction that stored them); reconciling it rewrites its points and its verdict row and,
-- when the verdict changed or a new precision switch appeared, appends events under the
-- producer's next commit sequence, all in one transaction. The sequence is taken from the
-- locked row of mfu_event_producers, so sequences are assigned in commit order.

CREATE TABLE mfu_reconcile_pending (
  cluster     text        NOT NULL,
  job_id      text        NOT NULL,
  generation  bigint      NOT NULL DEFAULT 1,  -- bumped on every change; cleared if unchanged
  updated_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (cluster, job_id)
);

-- One row per OFU window of a job: app MFU from the reports overlapping it, OFU of the window.
CREATE TABLE mfu_reconciliation_points (
  cluster        text             NOT NULL,
  job_id         text             NOT NULL,
  start_time     timestamptz      NOT NULL,
  end_time       timestamptz      NOT NULL,
  app_mfu        double precision,            -- fraction; NULL without reports
  ofu            double precision NOT NULL,
  ofu_ci95_low   double precision NOT NULL,
  ofu_ci95_high  double precision NOT NULL,
  difference_pp  double precision,
  ratio          double precision,
  gpu_coverage   double precision NOT NULL,
  gpus_allocated integer          NOT NULL DEFAULT 0,
  report_count   integer          NOT NULL DEFAULT 0,
  paired         boolean          NOT NULL DEFAULT false,  -- reports cover it; used by verdicts
  verdict        smallint         NOT NULL DEFAULT 0,  -- goodput.v1.Verdict of its interval
  PRIMARY KEY (cluster, job_id, start_time)
);
CREATE INDEX mfu_reconciliation_points_by_time ON mfu_reconciliation_points (start_time);

-- The job's verdict and what the fleet report filters on.
CREATE TABLE mfu_job_reconciliations (
  cluster              text             NOT NULL,
  job_id               text             NOT NULL,
  verdict              smallint         NOT NULL DEFAULT 0,  -- goodput.v1.Verdict
  top_cause            smallint         NOT NULL DEFAULT 0,  -- goodput.v1.DivergenceCause
  -- Serialized goodput.v1.GetReconciliationResponse without job and points: the verdict,
  -- interval verdicts, precision switches and the latest report's framework fields.
  summary              bytea            NOT NULL,
  framework            text             NOT NULL DEFAULT '',
  gpu_model            text             NOT NULL DEFAULT '',
  switches_sent        integer          NOT NULL DEFAULT 0,  -- precision switches sent as events
  updated_at           timestamptz      NOT NULL DEFAULT now(),
  PRIMARY KEY (cluster, job_id)
);

CREATE TABLE mfu_event_producers (
  producer    text   PRIMARY KEY CHECK (producer <> ''),
  commit_seq  bigint NOT NULL DEFAULT 0
);

CREATE TABLE mfu_divergence_events (
  producer    text        NOT NULL,
  sequence    bigint      NOT NULL,
  ordinal     integer     NOT NULL,  -- order within the commit
  event       bytea       NOT NULL,  -- serialized goodput.v1.DivergenceEvent
  created_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (producer, sequence, ordinal)
);

CREATE TABLE mfu_forward_state (
  target      text        NOT NULL,  -- 'alerting'
  producer    text        NOT NULL,
  acked_seq   bigint      NOT NULL DEFAULT 0,
  updated_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (target, producer)
);
