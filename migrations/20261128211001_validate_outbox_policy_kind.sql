-- The outbox's kinds with the policy stage's notices (20261128211000), checked on the rows
-- already there without blocking writes (VALIDATE CONSTRAINT takes a SHARE UPDATE EXCLUSIVE
-- lock).
ALTER TABLE alert_outbox VALIDATE CONSTRAINT alert_outbox_kind_check;
