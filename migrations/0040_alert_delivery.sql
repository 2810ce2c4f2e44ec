-- 0040: what the delivery worker needs beyond the outbox of 0031.
-- resend_at: when a delivered firing notification is due to be sent again (targets such as
-- Alertmanager forget an alert that is not re-sent); NULL once its alert has a resolution
-- for that target, and for targets that need no re-sending.
ALTER TABLE alert_outbox ADD COLUMN resend_at timestamptz;
CREATE INDEX alert_outbox_resend ON alert_outbox (target, resend_at) WHERE resend_at IS NOT NULL;

-- Each target has its own worker loop, which claims that target's due rows.
CREATE INDEX alert_outbox_due_by_target ON alert_outbox (target, next_attempt_at, id)
  WHERE status = 'pending';
