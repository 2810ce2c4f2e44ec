-- 0010: OFU windows per job and per GPU, the ofu consumer's watermark, and per-job
-- progress of the window engine (what is final, how far event time has gone).

-- One row per (job, GPU, window start). gpu = '' is the job-level window; otherwise the GPU
-- key "host/index/uuid" (index or uuid may be empty). Rows are upserted while a window can be
-- revised (revision counts the updates) and frozen once finalized.
CREATE TABLE ofu_windows (
  job                 bigint           NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  gpu                 text             NOT NULL DEFAULT '',
  start_time          timestamptz      NOT NULL,
  window_s            integer          NOT NULL CHECK (window_s > 0),
  gpu_model           text             NOT NULL DEFAULT '',
  ofu                 double precision,            -- fraction; NULL without usable samples
  ofu_stddev          double precision NOT NULL DEFAULT 0,
  ofu_ci95_half_width double precision,
  sample_count        bigint           NOT NULL DEFAULT 0,
  gpus_reporting      integer          NOT NULL DEFAULT 0,
  gpus_allocated      integer          NOT NULL DEFAULT 0,
  gpu_coverage        double precision NOT NULL DEFAULT 0,
  gpu_ofu_min         double precision,
  gpu_ofu_median      double precision,
  gpu_ofu_max         double precision,
  tensor_active_mean  double precision,
  sm_clock_mhz_mean   double precision,
  flags               integer          NOT NULL DEFAULT 0,  -- bit n: goodput.v1.DataQualityFlag n
  spatial_imbalance   double precision,
  temporal_imbalance  double precision,
  stragglers          jsonb            NOT NULL DEFAULT '[]'::jsonb,  -- [{"gpu","ofu","score"}]
  idle_gpus           text[]           NOT NULL DEFAULT '{}',
  idle_gpu_count      integer          NOT NULL DEFAULT 0,
  roofline_class      smallint         NOT NULL DEFAULT 0,  -- goodput.v1.RooflineClass
  hbm_peak_fraction   double precision,
  energy_j            double precision,
  power_w_mean        double precision,
  late_sample_count   bigint           NOT NULL DEFAULT 0,
  revision            integer          NOT NULL DEFAULT 0,
  finalized           boolean          NOT NULL DEFAULT false,
  updated_at          timestamptz      NOT NULL DEFAULT now(),
  PRIMARY KEY (job, gpu, start_time)
);
-- Fleet summaries scan job-level windows by time.
CREATE INDEX ofu_windows_job_level_by_time ON ofu_windows (start_time) WHERE gpu = '';

-- Watermark of each ofu shard. Consumed samples are exactly those with
-- ingest_xid < xid_done, plus those with xid_done <= ingest_xid < xid_round_end and
-- seq <= seq_cursor (a round in progress). Every sample not yet consumed has seq > seq_floor.
CREATE TABLE ofu_consumer_state (
  shard_index    integer     NOT NULL CHECK (shard_index >= 0),
  shard_count    integer     NOT NULL CHECK (shard_count > 0),
  xid_done       xid8        NOT NULL,
  xid_round_end  xid8        NOT NULL,
  seq_cursor     bigint      NOT NULL DEFAULT 0,
  seq_floor      bigint      NOT NULL DEFAULT 0,
  samples_consumed bigint    NOT NULL DEFAULT 0,
  updated_at     timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (shard_index, shard_count)
);

-- Per job: windows starting before final_before are final; max_event_time is the newest
-- sample time seen. Written in the same transaction as the windows and the watermark.
CREATE TABLE ofu_job_state (
  job               bigint      PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
  final_before      timestamptz,
  max_event_time    timestamptz,
  late_sample_count bigint      NOT NULL DEFAULT 0,
  updated_at        timestamptz NOT NULL DEFAULT now()
);
