-- 0052: MIG instances can be allocated to jobs; the host names telemetry printed per job;
-- the share of a GPU each job window stands for (MIG instance SMs, time-sliced GPUs).

-- ---------------------------------------------------------------------------------------
-- A job may hold one MIG instance of a GPU (`mig_instance` = GPU_I_ID) instead of the whole
-- GPU. Two jobs on two instances of one GPU do not overlap; a whole-GPU allocation overlaps
-- every instance of that GPU. `slots` is the part of the GPU an allocation holds: the
-- instance [k, k+1) or, for the whole GPU, every instance [0, infinity).
ALTER TABLE job_gpus
  ADD COLUMN mig_instance integer CHECK (mig_instance >= 0),
  ADD COLUMN mig_profile  text    NOT NULL DEFAULT '',
  ADD COLUMN slots        int4range GENERATED ALWAYS AS (
    CASE WHEN mig_instance IS NULL THEN int4range(0, NULL)
         ELSE int4range(mig_instance, mig_instance + 1) END) STORED;

ALTER TABLE job_gpus
  DROP CONSTRAINT job_gpus_no_overlap_by_index,
  DROP CONSTRAINT job_gpus_no_overlap_by_uuid;
ALTER TABLE job_gpus
  ADD CONSTRAINT job_gpus_no_overlap_by_index
    EXCLUDE USING gist (cluster WITH =, host WITH =, gpu_index WITH =, slots WITH &&,
                        valid WITH &&),
  ADD CONSTRAINT job_gpus_no_overlap_by_uuid
    EXCLUDE USING gist (gpu_uuid WITH =, slots WITH &&, valid WITH &&);

-- ---------------------------------------------------------------------------------------
-- Host names as exporters printed them (FQDN, upper case, Kubernetes node name), per job and
-- canonical host, when they differ from the canonical name. Written by ingest the first
-- time a form is seen for a job; read by the job API (Job.hosts_seen).
CREATE TABLE job_hosts_seen (
  job          bigint      NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  host         text        NOT NULL,
  reported_as  text        NOT NULL,
  first_seen   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (job, host, reported_as)
);

-- ---------------------------------------------------------------------------------------
-- GPUs a job window stands for in fleet figures: the allocated GPUs, with a MIG instance
-- counted as its share of the GPU's SMs and a GPU time-sliced between n jobs as 1/n. NULL in
-- rows written before this migration: gpus_allocated.
ALTER TABLE ofu_windows ADD COLUMN gpu_equivalents double precision
  CHECK (gpu_equivalents IS NULL OR gpu_equivalents >= 0);
