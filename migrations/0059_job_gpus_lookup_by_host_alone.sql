-- 0059: the short-name lookup of attribution (SampleStore::LoadAttributor) by the short name
-- alone. 0058's index on (cluster, short name) let PostgreSQL, for a cluster its statistics
-- had not seen yet (a new cluster, or a fleet registered since the last ANALYZE), estimate the
-- cluster at one row and scan all of that cluster's allocations through the index for every
-- batch: 42 ms a batch of 1,000 samples at 100,000 GPUs (pipeline bench), 90 ms on a fresh
-- 100,000-GPU cluster. The lookup is now one probe per host name, short name and UUID, each
-- on an index its one equality selects by (this one for short names; (cluster, host) and the
-- UUID index for the others), with the cluster of short-name and UUID matches compared
-- afterwards.
CREATE INDEX job_gpus_by_short_host_name ON job_gpus ((lower(split_part(host, '.', 1))));
DROP INDEX job_gpus_by_short_host;
