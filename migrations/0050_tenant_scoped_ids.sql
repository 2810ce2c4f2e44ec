-- 0050: ids that clients choose are scoped by tenant. A batch id or MFU report id already
-- used by one cluster must not make another cluster's real batch or report a "duplicate"
-- that is acknowledged with nothing stored.

-- Ingest batches: one id space per (cluster, source). Rows stored before this migration
-- keep cluster '' and are still recognized as earlier deliveries (see sample_store.cc).
ALTER TABLE ingest_batches ADD COLUMN cluster text NOT NULL DEFAULT '';
ALTER TABLE ingest_batches DROP CONSTRAINT ingest_batches_pkey;
ALTER TABLE ingest_batches ADD CONSTRAINT ingest_batches_pkey PRIMARY KEY (cluster, source, batch_id);

-- MFU reports: one id space per cluster.
ALTER TABLE mfu_reports DROP CONSTRAINT mfu_reports_pkey;
ALTER TABLE mfu_reports ADD CONSTRAINT mfu_reports_pkey PRIMARY KEY (cluster, report_id);
