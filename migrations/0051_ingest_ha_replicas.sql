-- 0051: the elected replica of each Prometheus HA pair that remote_writes to goodput-ingest
-- (see services/ingest/remote_write.h, HaOptions). One row per cluster, kept in PostgreSQL so
-- that every ingest replica drops the same standby replica's samples.
CREATE TABLE ingest_ha_replicas (
  cluster    text        PRIMARY KEY,
  replica    text        NOT NULL,
  last_seen  timestamptz NOT NULL
);
