-- goodput: no-transaction
-- Two reads of gpu_fault_events that its indexes (20261128190000) do not serve:
-- - goodput-alerting's GPU fault sweep (services/alerting/gpu_fault_store.h) asks every sweep
--   for the recent events that alert by themselves (XIDs, double-bit ECC, row remapping);
--   they are a small share of the table (NVLink, PCIe, single-bit ECC and clock-slowdown
--   events are most of it), so a partial index keeps the sweep's cost that of those few;
-- - goodput-ingest's maintenance deletes events older than ingest.fault_event_retention_days,
--   oldest first, in batches (services/ingest/maintenance.h).
CREATE INDEX CONCURRENTLY IF NOT EXISTS gpu_fault_events_alerting ON gpu_fault_events (event_time)
  WHERE signal IN ('ecc_dbe_volatile', 'ecc_dbe_aggregate', 'remapped_rows_uncorrectable',
                   'row_remap_failure', 'row_remap_pending')
     OR (signal IN ('xid', 'xid_count') AND coalesce(xid, 0) <> 0);
CREATE INDEX CONCURRENTLY IF NOT EXISTS gpu_fault_events_by_time ON gpu_fault_events (event_time);
