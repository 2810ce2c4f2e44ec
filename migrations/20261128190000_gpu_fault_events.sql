-- GPU fault events (XID, ECC, row remapping, NVLink and PCIe errors, clock-event
-- slowdowns) and the per-GPU state their edge detection keeps. goodput-ingest writes both
-- in the transaction that stores the batch's samples (services/ingest/fault_events.h).
-- Both tables are new: their indexes are built on empty tables.

-- The last known value of every fault signal of a GPU, and when it last changed:
-- {"xid": [79, 1714564800000], "ecc_dbe_volatile": [2, ...], "xid_count:79": [1, ...]}.
-- One row per GPU (gpu_key = host|uuid-or-#index|mig-instance), locked FOR UPDATE by the
-- batch that reads it, so concurrent writers of one GPU see each other's edges.
CREATE TABLE gpu_fault_state (
  cluster     text        NOT NULL,
  gpu_key     text        NOT NULL,
  signals     jsonb       NOT NULL DEFAULT '{}'::jsonb CHECK (jsonb_typeof(signals) = 'object'),
  updated_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (cluster, gpu_key)
);

-- One row per fault event: a value that appeared, a counter that grew, a flag that rose.
-- `job` is the job the sample carrying it was attributed to (jobs.id), NULL for a GPU no job
-- held; queries for a job also take the events on its allocated GPUs during its allocations
-- (samples attributed after they arrived).
CREATE TABLE gpu_fault_events (
  id               bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  cluster          text        NOT NULL,
  host             text        NOT NULL,
  gpu_index        integer,
  gpu_uuid         text,
  mig_instance_id  integer,
  job              bigint,
  event_time       timestamptz NOT NULL,    -- the sample's time
  signal           text        NOT NULL,    -- core::FaultSignalName: xid, ecc_dbe_volatile, ...
  xid              integer,                 -- the XID code (signals xid and xid_count)
  value            double precision NOT NULL,
  previous_value   double precision,
  count            double precision NOT NULL CHECK (count > 0),  -- occurrences (a counter's increase)
  counter_reset    boolean     NOT NULL DEFAULT false,
  batch_id         text        NOT NULL,
  source           text        NOT NULL,    -- grpc, exposition, scrape, remote_write
  detected_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX gpu_fault_events_by_job ON gpu_fault_events (job, event_time) WHERE job IS NOT NULL;
CREATE INDEX gpu_fault_events_by_host ON gpu_fault_events (cluster, host, event_time);
CREATE INDEX gpu_fault_events_by_uuid ON gpu_fault_events (gpu_uuid, event_time)
  WHERE gpu_uuid IS NOT NULL;
