-- goodput: no-transaction
-- gpu_fault_events is distributed by host on Citus (services/platform/table_distribution.cc,
-- docs/scaling.md), and a distributed table's primary key must include its distribution
-- column: the key becomes (host, id), built here without blocking ingest's writes and swapped
-- in by the next file. id stays unique on its own (an identity column).
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS gpu_fault_events_host_id
  ON gpu_fault_events (host, id);
