-- 0002: what the ingest service needs beyond 0001: every final job state of the API,
-- the GPU count of jobs attributed by labels, the outcome of an ingest batch for retries,
-- and the DCGM fields of the API that 0001's samples table lacks.

-- The API's final states (goodput.v1.JobState): timed_out, preempted and ended as well.
ALTER TABLE jobs DROP CONSTRAINT IF EXISTS jobs_state_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_state_check
  CHECK (state IN ('pending', 'running', 'completed', 'failed', 'cancelled', 'timed_out',
                   'preempted', 'ended', 'unknown'));

-- GPUs a job holds when its telemetry is attributed by labels rather than allocations
-- (the denominator of GPU coverage); NULL when the allocations say.
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS gpu_count integer CHECK (gpu_count IS NULL OR gpu_count >= 0);

-- A retried batch is answered with its first outcome, including how many samples no job
-- could be attributed to at the time.
ALTER TABLE ingest_batches ADD COLUMN IF NOT EXISTS unattributed_count integer NOT NULL DEFAULT 0
  CHECK (unattributed_count >= 0);

-- DCGM_FI_DEV_GPU_UTIL (203) as a fraction 0..1, DCGM_FI_DEV_FB_FREE (251) in MiB.
ALTER TABLE samples ADD COLUMN IF NOT EXISTS gpu_util real;
ALTER TABLE samples ADD COLUMN IF NOT EXISTS fb_free_mib real;

-- Late attribution by label (dcgm-exporter's hpc_job, Osmo workflow id) for samples that
-- arrived before their job was registered.
CREATE INDEX IF NOT EXISTS samples_unattributed_hpc_job ON samples ((labels ->> 'hpc_job'))
  WHERE job IS NULL;
