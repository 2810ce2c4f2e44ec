-- 0059: attribution's allocation lookup (SampleStore::LoadAttributor) by host name alone.
-- With 0058's indexes, which lead with the cluster, PostgreSQL estimated a cluster that its
-- statistics had not seen yet (a new cluster, or a fleet registered since the last ANALYZE)
-- at one row, scanned all of that cluster's allocations through the index for every batch
-- and filtered them by host: 42 ms a batch of 1,000 samples at 100,000 GPUs (pipeline bench),
-- 90 ms on a fresh 100,000-GPU cluster. The lookup is now one probe per host name (and per
-- UUID) with the cluster compared afterwards, and these indexes serve the probes whatever
-- the statistics say: 6 to 8 ms for 125 hosts on the same cluster, analyzed or not.
CREATE INDEX job_gpus_by_host_name ON job_gpus (host);
CREATE INDEX job_gpus_by_short_host_name ON job_gpus ((lower(split_part(host, '.', 1))));
DROP INDEX job_gpus_by_short_host;
