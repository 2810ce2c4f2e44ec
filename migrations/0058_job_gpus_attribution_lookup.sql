-- 0058: the lookups goodput-ingest's attribution makes for every batch of samples
-- (SampleStore::LoadAttributor): the allocations of the batch's hosts, by the host name as
-- stored, by its short lower-case form (allocations registered before host names were made
-- canonical), or by GPU UUID. The exclusion constraints' GiST indexes cannot serve the short
-- form, so PostgreSQL scanned every allocation of the cluster for each batch: a cost that grew
-- with the fleet (75 ms per batch of 1,000 samples at 20,000 GPUs, 2 ms with these).
CREATE INDEX job_gpus_by_host ON job_gpus (cluster, host);
CREATE INDEX job_gpus_by_short_host ON job_gpus (cluster, (lower(split_part(host, '.', 1))));
CREATE INDEX job_gpus_by_uuid ON job_gpus (gpu_uuid) WHERE gpu_uuid IS NOT NULL;
