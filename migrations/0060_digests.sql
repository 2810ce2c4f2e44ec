-- 0060: efficiency digests (services/alerting/README.md, "Digests").
-- The outbox carries digests beside alert notifications: `kind` says which; a digest row has
-- no alert (alert_id NULL) and state 'digest'. Alert rows are unchanged, so the delivery
-- worker's ordering and re-send rules (which join on alert_id) never match a digest row.
ALTER TABLE alert_outbox ALTER COLUMN alert_id DROP NOT NULL;
ALTER TABLE alert_outbox ADD COLUMN kind text NOT NULL DEFAULT 'alert';
ALTER TABLE alert_outbox DROP CONSTRAINT alert_outbox_state_check;
ALTER TABLE alert_outbox ADD CONSTRAINT alert_outbox_kind_check CHECK (
  (kind = 'alert' AND alert_id IS NOT NULL AND state IN ('firing', 'resolved')) OR
  (kind = 'digest' AND alert_id IS NULL AND state = 'digest'));

-- One row per (grouping, period) whose digests were enqueued, in the same transaction as
-- their outbox rows: a restarted or second replica skips a period that is here, and the
-- outbox's idempotency keys make a race between two replicas harmless.
CREATE TABLE alert_digest_periods (
  group_by     text        NOT NULL CHECK (group_by IN ('user', 'team')),
  period_start timestamptz NOT NULL,
  period_end   timestamptz NOT NULL CHECK (period_end > period_start),
  digests      integer     NOT NULL DEFAULT 0,  -- groups that got a digest
  rows         integer     NOT NULL DEFAULT 0,  -- outbox rows enqueued
  created_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (group_by, period_start)
);
