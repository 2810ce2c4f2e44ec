-- The primary key of gpu_fault_events becomes (host, id), on the unique index the previous
-- file built (ADD ... USING INDEX: no scan, a short exclusive lock; the index takes the
-- constraint's name).
ALTER TABLE gpu_fault_events
  DROP CONSTRAINT gpu_fault_events_pkey,
  ADD CONSTRAINT gpu_fault_events_pkey PRIMARY KEY USING INDEX gpu_fault_events_host_id;
