-- 0011: forwarding of job-level OFU windows to mfu and alerting with catch-up.
-- Each commit of an ofu shard that writes job-level windows takes the shard's next commit
-- sequence; the rows it writes carry it (a revised window moves to the newer commit). A
-- forwarder pushes the rows of each commit in sequence order and records, per target, the
-- highest sequence the target acknowledged.

ALTER TABLE ofu_consumer_state ADD COLUMN commit_seq bigint NOT NULL DEFAULT 0;

ALTER TABLE ofu_windows ADD COLUMN producer text NOT NULL DEFAULT '';
ALTER TABLE ofu_windows ADD COLUMN commit_seq bigint NOT NULL DEFAULT 0;
CREATE INDEX ofu_windows_job_level_by_commit ON ofu_windows (producer, commit_seq)
  WHERE gpu = '';

CREATE TABLE ofu_forward_state (
  target      text        NOT NULL,  -- 'mfu', 'alerting'
  producer    text        NOT NULL,  -- DeliverySequence.producer_id, e.g. 'ofu-0-of-1'
  acked_seq   bigint      NOT NULL DEFAULT 0,
  updated_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (target, producer)
);
