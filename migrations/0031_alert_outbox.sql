-- 0031: the notification outbox (services/alerting/outbox.h).
-- The alert engine inserts one row per (alert, target, state) in the same transaction that
-- changes the alert; the unique idempotency key makes a replayed decision a no-op. A delivery
-- worker claims due rows (FOR UPDATE SKIP LOCKED, so replicas never send the same row twice at
-- once), sends them, and records every attempt with its error. `payload` is the whole
-- notification as JSON: delivery never reads the alert tables.
CREATE TABLE alert_outbox (
  id               bigserial   PRIMARY KEY,
  alert_id         bigint      NOT NULL,
  target           text        NOT NULL CHECK (target <> ''),
  state            text        NOT NULL CHECK (state IN ('firing', 'resolved')),
  idempotency_key  text        NOT NULL UNIQUE,
  payload          jsonb       NOT NULL,
  status           text        NOT NULL DEFAULT 'pending'
                               CHECK (status IN ('pending', 'delivered', 'failed', 'dropped')),
  attempts         integer     NOT NULL DEFAULT 0,
  last_error       text        NOT NULL DEFAULT '',
  created_at       timestamptz NOT NULL DEFAULT now(),
  last_attempt_at  timestamptz,
  next_attempt_at  timestamptz NOT NULL DEFAULT now(),
  delivered_at     timestamptz
);

-- The worker's claim query: due pending rows, oldest first.
CREATE INDEX alert_outbox_due ON alert_outbox (next_attempt_at, id) WHERE status = 'pending';
CREATE INDEX alert_outbox_by_alert ON alert_outbox (alert_id, id);

CREATE TABLE alert_delivery_attempts (
  outbox_id    bigint      NOT NULL REFERENCES alert_outbox (id) ON DELETE CASCADE,
  attempt      integer     NOT NULL,
  attempted_at timestamptz NOT NULL DEFAULT now(),
  ok           boolean     NOT NULL,
  error        text        NOT NULL DEFAULT '',
  PRIMARY KEY (outbox_id, attempt)
);
