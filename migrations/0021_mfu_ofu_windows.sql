-- 0021: job-level OFU windows received by goodput-mfu from ofu (MfuService.PushOfuWindows),
-- and the delivery watermark per producing ofu replica.
-- Windows are keyed by job key and window start; a higher revision replaces a lower one.
-- The watermark is written in the same transaction as the windows of a push, so a push
-- retried after a restart (at or below the watermark) is acknowledged without being applied
-- twice, and a push that skips sequences is refused as a gap until ofu re-sends from it.
CREATE TABLE mfu_ofu_windows (
  cluster              text             NOT NULL CHECK (cluster <> ''),
  job_id               text             NOT NULL CHECK (job_id <> ''),
  start_time           timestamptz      NOT NULL,
  end_time             timestamptz      NOT NULL,
  gpu_model            text             NOT NULL DEFAULT '',
  workload_fingerprint text             NOT NULL DEFAULT '',
  ofu                  double precision NOT NULL,  -- fraction
  ofu_ci95_low         double precision NOT NULL,
  ofu_ci95_high        double precision NOT NULL,
  gpu_coverage         double precision NOT NULL,
  gpus_allocated       integer          NOT NULL DEFAULT 0,
  sample_count         bigint           NOT NULL DEFAULT 0,
  warmup               boolean          NOT NULL DEFAULT false,
  revision             integer          NOT NULL DEFAULT 0,
  finalized            boolean          NOT NULL DEFAULT false,
  producer             text             NOT NULL,
  sequence             bigint           NOT NULL,  -- the push that wrote this revision
  received_at          timestamptz      NOT NULL DEFAULT now(),
  PRIMARY KEY (cluster, job_id, start_time),
  CONSTRAINT mfu_ofu_windows_interval CHECK (end_time > start_time)
);
-- Fleet reports scan windows by time.
CREATE INDEX mfu_ofu_windows_by_time ON mfu_ofu_windows (start_time);

CREATE TABLE mfu_delivery_watermarks (
  producer    text        PRIMARY KEY CHECK (producer <> ''),  -- DeliverySequence.producer_id
  sequence    bigint      NOT NULL DEFAULT 0,                  -- highest applied
  updated_at  timestamptz NOT NULL DEFAULT now()
);
