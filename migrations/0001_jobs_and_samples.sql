-- 0001: jobs, their GPU allocations, raw per-GPU telemetry samples, ingest batch ids.
-- Applied once by the migration runner inside a transaction; never edit it after it is
-- merged: add a new numbered file instead.

CREATE EXTENSION IF NOT EXISTS btree_gist;

-- ---------------------------------------------------------------------------------------
-- Jobs registered by schedulers (Slurm prolog, Osmo, Kubernetes) or learnt from labels.
-- (cluster, job_id) is the job key of the API; `id` is the compact key other tables use.
CREATE TABLE jobs (
  id                   bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  cluster              text        NOT NULL CHECK (cluster <> ''),
  job_id               text        NOT NULL CHECK (job_id <> ''),
  scheduler            text        NOT NULL DEFAULT 'other'
                                   CHECK (scheduler IN ('slurm', 'osmo', 'kubernetes', 'other')),
  user_name            text        NOT NULL DEFAULT '',
  team                 text        NOT NULL DEFAULT '',  -- team or scheduler account
  name                 text        NOT NULL DEFAULT '',
  workload_fingerprint text        NOT NULL DEFAULT '',  -- e.g. model + config + GPU count + GPU model
  gpu_model            text        NOT NULL DEFAULT '',  -- as dcgm-exporter's modelName reports it
  state                text        NOT NULL DEFAULT 'running'
                                   CHECK (state IN ('pending', 'running', 'completed', 'failed',
                                                    'cancelled', 'unknown')),
  start_time           timestamptz,
  end_time             timestamptz,
  labels               jsonb       NOT NULL DEFAULT '{}'::jsonb CHECK (jsonb_typeof(labels) = 'object'),
  created_at           timestamptz NOT NULL DEFAULT now(),
  updated_at           timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT jobs_key UNIQUE (cluster, job_id),
  CONSTRAINT jobs_end_after_start CHECK (end_time IS NULL OR start_time IS NULL OR end_time >= start_time)
);

CREATE INDEX jobs_by_cluster_state ON jobs (cluster, state, start_time DESC);
CREATE INDEX jobs_by_user ON jobs (user_name, start_time DESC);
CREATE INDEX jobs_by_team ON jobs (team, start_time DESC);
CREATE INDEX jobs_by_fingerprint ON jobs (workload_fingerprint, start_time DESC)
  WHERE workload_fingerprint <> '';
CREATE INDEX jobs_by_start ON jobs (start_time DESC, id);
-- Label lookups (e.g. Osmo's workflow id, Kubernetes pod) for attribution.
CREATE INDEX jobs_by_labels ON jobs USING gin (labels jsonb_path_ops);

-- ---------------------------------------------------------------------------------------
-- GPUs held by a job over a time range. A GPU is named by host + index, by UUID, or both.
-- `valid` is [start, end); an open upper bound means "still held". The exclusion
-- constraints refuse two jobs holding one GPU at overlapping times (the service checks
-- first to name both jobs; the constraints keep concurrent registrations honest).
CREATE TABLE job_gpus (
  job          bigint      NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  cluster      text        NOT NULL,
  host         text        NOT NULL CHECK (host <> ''),
  gpu_index    integer     CHECK (gpu_index >= 0),
  gpu_uuid     text        CHECK (gpu_uuid <> ''),
  valid        tstzrange   NOT NULL CHECK (NOT isempty(valid)),
  created_at   timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT job_gpus_named CHECK (gpu_index IS NOT NULL OR gpu_uuid IS NOT NULL),
  CONSTRAINT job_gpus_no_overlap_by_index
    EXCLUDE USING gist (cluster WITH =, host WITH =, gpu_index WITH =, valid WITH &&),
  CONSTRAINT job_gpus_no_overlap_by_uuid
    EXCLUDE USING gist (gpu_uuid WITH =, valid WITH &&)
);
-- The exclusion constraints' GiST indexes also serve "which job held this GPU at time t";
-- this one lists a job's GPUs.
CREATE INDEX job_gpus_by_job ON job_gpus (job);

-- ---------------------------------------------------------------------------------------
-- Ingest batches: a batch id seen once is not stored twice (retries are acknowledged
-- without writing). Rows are deleted after the retry horizon by the ingest service.
CREATE TABLE ingest_batches (
  batch_id       text        PRIMARY KEY CHECK (batch_id <> ''),
  source         text        NOT NULL DEFAULT '',   -- 'grpc', 'exposition', 'scrape', 'remote_write'
  received_at    timestamptz NOT NULL DEFAULT now(),
  sample_count   integer     NOT NULL DEFAULT 0 CHECK (sample_count >= 0),  -- samples in the batch
  stored_count   integer     NOT NULL DEFAULT 0 CHECK (stored_count >= 0),  -- samples kept
  refused_count  integer     NOT NULL DEFAULT 0 CHECK (refused_count >= 0),
  first_seq      bigint,                            -- samples.seq range written by the batch
  last_seq       bigint,
  ingest_xid     xid8        NOT NULL DEFAULT pg_current_xact_id()
);
CREATE INDEX ingest_batches_by_received ON ingest_batches (received_at);

-- ---------------------------------------------------------------------------------------
-- Raw per-GPU samples, one row per GPU per sample time, range-partitioned by sample time
-- (one partition per UTC day; see samples_create_partitions / samples_drop_partitions_before).
-- Written with COPY. Fields follow dcgm-exporter (DCGM field ids in comments); NULL means
-- the exporter did not report the field.
--
-- seq increases with every row written and is the downstream watermark. Sequence values
-- are taken before commit, so concurrent writers can commit out of seq order; a reader
-- that must not skip rows reads only rows whose ingest_xid is below the oldest running
-- transaction (samples_safe_xid()), and resumes from the last seq it processed.
CREATE SEQUENCE samples_seq AS bigint;

CREATE TABLE samples (
  seq                      bigint      NOT NULL DEFAULT nextval('samples_seq'),
  sample_time              timestamptz NOT NULL,          -- the sample's own timestamp
  received_at              timestamptz NOT NULL DEFAULT now(),
  ingest_xid               xid8        NOT NULL DEFAULT pg_current_xact_id(),
  batch_id                 text,                          -- ingest_batches.batch_id
  cluster                  text        NOT NULL,
  host                     text        NOT NULL,
  gpu_index                integer,
  gpu_uuid                 text,
  gpu_model                text,                          -- modelName label
  mig_profile              text,                          -- MIG instance profile, if any
  mig_instance_id          integer,
  job                      bigint,                        -- jobs.id; NULL until attributed
  tensor_active            real,     -- DCGM_FI_PROF_PIPE_TENSOR_ACTIVE (1004), 0..1
  sm_clock_mhz             real,     -- DCGM_FI_DEV_SM_CLOCK (100)
  sm_active                real,     -- DCGM_FI_PROF_SM_ACTIVE (1002), 0..1
  sm_occupancy             real,     -- DCGM_FI_PROF_SM_OCCUPANCY (1003), 0..1
  dram_active              real,     -- DCGM_FI_PROF_DRAM_ACTIVE (1005), 0..1
  fp64_active              real,     -- DCGM_FI_PROF_PIPE_FP64_ACTIVE (1006), 0..1
  fp32_active              real,     -- DCGM_FI_PROF_PIPE_FP32_ACTIVE (1007), 0..1
  fp16_active              real,     -- DCGM_FI_PROF_PIPE_FP16_ACTIVE (1008), 0..1
  gr_engine_active         real,     -- DCGM_FI_PROF_GR_ENGINE_ACTIVE (1001), 0..1
  fb_used_mib              real,     -- DCGM_FI_DEV_FB_USED (252)
  power_w                  real,     -- DCGM_FI_DEV_POWER_USAGE (155)
  energy_mj                double precision,  -- DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION (156), cumulative
  temperature_c            real,     -- DCGM_FI_DEV_GPU_TEMP (150)
  nvlink_tx_bytes          double precision,  -- DCGM_FI_PROF_NVLINK_TX_BYTES (1011)
  nvlink_rx_bytes          double precision,  -- DCGM_FI_PROF_NVLINK_RX_BYTES (1012)
  pcie_tx_bytes            double precision,  -- DCGM_FI_PROF_PCIE_TX_BYTES (1009)
  pcie_rx_bytes            double precision,  -- DCGM_FI_PROF_PCIE_RX_BYTES (1010)
  clock_throttle_reasons   bigint,   -- DCGM_FI_DEV_CLOCK_THROTTLE_REASONS (112), bit mask
  labels                   jsonb                          -- other exporter labels kept as-is
) PARTITION BY RANGE (sample_time);

-- Per-job reads (OFU windows, replays) and late attribution of unattributed samples.
CREATE INDEX samples_by_job ON samples (job, sample_time) WHERE job IS NOT NULL;
CREATE INDEX samples_unattributed ON samples (cluster, host, sample_time) WHERE job IS NULL;
-- Catch-up by watermark.
CREATE INDEX samples_by_seq ON samples (seq);

-- The oldest transaction id that may still be running: rows with ingest_xid below it are
-- all committed (or rolled back) and a watermark reader may consume them.
CREATE FUNCTION samples_safe_xid() RETURNS xid8
  LANGUAGE sql STABLE
  AS $$ SELECT pg_snapshot_xmin(pg_current_snapshot()) $$;

-- Creates the daily partitions covering [from_time, to_time] that do not exist yet and
-- returns how many it created. Safe to call concurrently and repeatedly; call it ahead of
-- time (e.g. for the next days) and for the range of a batch before writing it.
CREATE FUNCTION samples_create_partitions(from_time timestamptz, to_time timestamptz)
  RETURNS integer
  LANGUAGE plpgsql
  AS $$
DECLARE
  day     date := (from_time AT TIME ZONE 'UTC')::date;
  last    date := (to_time AT TIME ZONE 'UTC')::date;
  part    text;
  created integer := 0;
BEGIN
  IF to_time < from_time THEN
    RAISE EXCEPTION 'samples_create_partitions: to_time % is before from_time %', to_time, from_time
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF last - day > 3660 THEN
    RAISE EXCEPTION 'samples_create_partitions: range % .. % spans more than ten years', from_time, to_time
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  -- Serializes creators in this transaction so concurrent callers do not collide.
  PERFORM pg_advisory_xact_lock(hashtext('goodput.samples_create_partitions'));
  WHILE day <= last LOOP
    part := 'samples_' || to_char(day, 'YYYYMMDD');
    IF to_regclass(part) IS NULL THEN
      EXECUTE format(
        'CREATE TABLE %I PARTITION OF samples FOR VALUES FROM (%L) TO (%L)',
        part,
        (day::timestamp AT TIME ZONE 'UTC'),
        ((day + 1)::timestamp AT TIME ZONE 'UTC'));
      created := created + 1;
    END IF;
    day := day + 1;
  END LOOP;
  RETURN created;
END
$$;

-- Drops the daily partitions that end at or before `cutoff` (retention) and returns how
-- many it dropped.
CREATE FUNCTION samples_drop_partitions_before(cutoff timestamptz)
  RETURNS integer
  LANGUAGE plpgsql
  AS $$
DECLARE
  rec     record;
  dropped integer := 0;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtext('goodput.samples_create_partitions'));
  FOR rec IN
    SELECT c.relname
      FROM pg_inherits i
      JOIN pg_class c ON c.oid = i.inhrelid
      JOIN pg_class p ON p.oid = i.inhparent
     WHERE p.relname = 'samples'
       AND c.relname ~ '^samples_[0-9]{8}$'
       AND ((to_date(substring(c.relname FROM 9), 'YYYYMMDD') + 1)::timestamp AT TIME ZONE 'UTC') <= cutoff
  LOOP
    EXECUTE format('DROP TABLE %I', rec.relname);
    dropped := dropped + 1;
  END LOOP;
  RETURN dropped;
END
$$;

-- Partitions for yesterday through the next week, so a fresh install can ingest at once.
SELECT samples_create_partitions(now() - interval '1 day', now() + interval '7 days');
