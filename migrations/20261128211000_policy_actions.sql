-- The policy stage's audit log (services/alerting/policy_stage.h): one row per action a rule
-- takes on a finding — (alert, rule, action, node) is unique, so a finding seen again, by
-- another replica or after a restart, adds nothing. A row is the ladder's state (warned,
-- waiting for its grace; then done, failed, dry_run, exempt, cleared; undone) and what an
-- operator reads afterwards: the rule, the finding and its evidence, the command, its outcome
-- and who undid it. Replicas claim due rows FOR UPDATE SKIP LOCKED; `claimed_until` is the
-- lease of the replica running the command (a replica that dies mid-command leaves the row to
-- another once it ends, which looks at the peer before acting again).
CREATE TABLE policy_actions (
  id             bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  rule           text        NOT NULL CHECK (rule <> ''),
  alert_id       bigint      NOT NULL,
  fingerprint    text        NOT NULL,
  kind           text        NOT NULL,
  cluster        text        NOT NULL,
  job_id         text        NOT NULL,
  scheduler      text        NOT NULL DEFAULT '',
  action         text        NOT NULL CHECK (action IN ('cancel', 'requeue', 'drain')),
  node           text        NOT NULL DEFAULT '',
  dry_run        boolean     NOT NULL,
  status         text        NOT NULL DEFAULT 'waiting'
                             CHECK (status IN ('waiting', 'acting', 'done', 'failed', 'dry_run',
                                               'exempt', 'cleared', 'undone')),
  evidence       jsonb       NOT NULL DEFAULT '{}'::jsonb CHECK (jsonb_typeof(evidence) = 'object'),
  command        text        NOT NULL DEFAULT '',
  outcome        text        NOT NULL DEFAULT '',
  note           text        NOT NULL DEFAULT '',   -- why it waits (rate limit, job age)
  peer_before    text        NOT NULL DEFAULT '',   -- the job's start time before a requeue
  attempts       integer     NOT NULL DEFAULT 0,
  warned_at      timestamptz NOT NULL,
  act_after      timestamptz NOT NULL,
  claimed_until  timestamptz,
  acted_at       timestamptz,
  acted_by       text        NOT NULL DEFAULT '',   -- the replica that ran the command
  undone_at      timestamptz,
  undone_by      text        NOT NULL DEFAULT '',
  undo_outcome   text        NOT NULL DEFAULT '',
  created_at     timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT policy_actions_once UNIQUE (alert_id, rule, action, node)
);
CREATE INDEX policy_actions_due ON policy_actions (act_after, id)
  WHERE status IN ('waiting', 'acting');
CREATE INDEX policy_actions_by_job ON policy_actions (cluster, job_id, id);
CREATE INDEX policy_actions_by_time ON policy_actions (created_at DESC, id DESC);
-- The rate limit's count: drains done on a cluster in the last hour.
CREATE INDEX policy_actions_drains ON policy_actions (cluster, acted_at)
  WHERE action = 'drain' AND status IN ('done', 'undone');

-- The outbox carries the policy stage's notices (kind 'policy', state 'policy', about an
-- alert): the owner's warning and the operators' record of each outcome. They are never
-- re-sent and never resolved. NOT VALID: the rows there passed the narrower check; validated
-- by the next file.
ALTER TABLE alert_outbox DROP CONSTRAINT alert_outbox_kind_check;
ALTER TABLE alert_outbox ADD CONSTRAINT alert_outbox_kind_check CHECK (
  (kind = 'alert' AND alert_id IS NOT NULL AND state IN ('firing', 'resolved')) OR
  (kind = 'digest' AND alert_id IS NULL AND state = 'digest') OR
  (kind = 'admin_comment' AND alert_id IS NULL AND state = 'admin_comment') OR
  (kind = 'policy' AND alert_id IS NOT NULL AND state = 'policy')) NOT VALID;
