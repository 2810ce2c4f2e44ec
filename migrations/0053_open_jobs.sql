-- 0053: the jobs that have not ended, for goodput-ingest's sweep of jobs whose GPUs went
-- silent (services/ingest/maintenance.h). Open jobs are few next to all jobs ever run, so
-- the sweep reads them without scanning the table.
CREATE INDEX jobs_open_by_start ON jobs (start_time, id) WHERE end_time IS NULL;
