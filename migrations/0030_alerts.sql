-- 0030: the alert engine (services/alerting): what it received from ofu and mfu, what it
-- derived per job, the alerts with their lifecycle, and silences. The outbox is 0031.

-- Receiver watermark per ordered stream ('windows' from ofu, 'divergence' from mfu) and
-- producer: the highest DeliverySequence applied, written in the transaction that applied it.
CREATE TABLE alert_receiver_state (
  stream      text        NOT NULL CHECK (stream IN ('windows', 'divergence')),
  producer    text        NOT NULL CHECK (producer <> ''),
  watermark   bigint      NOT NULL DEFAULT 0,
  updated_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (stream, producer)
);

-- Job-level OFU windows as pushed (a higher revision replaces a lower one). `window_pb` is the
-- serialized goodput.v1.OfuWindow: the detectors read it back and alerts attach it as evidence.
CREATE TABLE alert_windows (
  cluster     text        NOT NULL,
  job_id      text        NOT NULL,
  start_time  timestamptz NOT NULL,
  end_time    timestamptz NOT NULL,
  revision    integer     NOT NULL DEFAULT 0,
  window_pb   bytea       NOT NULL,
  received_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (cluster, job_id, start_time)
);

-- Divergence verdicts and precision switches from mfu (serialized goodput.v1.DivergenceEvent).
CREATE TABLE alert_divergence_events (
  event_id    text        PRIMARY KEY CHECK (event_id <> ''),
  cluster     text        NOT NULL,
  job_id      text        NOT NULL,
  event_time  timestamptz NOT NULL,
  kind        text        NOT NULL CHECK (kind IN ('verdict', 'precision_switch')),
  event_pb    bytea       NOT NULL,
  received_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX alert_divergence_events_by_job ON alert_divergence_events (cluster, job_id, event_time);

-- Per job: the span of its windows and its steady state, the input of later jobs' workload
-- baselines and of the telemetry-stopped sweep.
CREATE TABLE alert_job_state (
  cluster                text             NOT NULL,
  job_id                 text             NOT NULL,
  workload_fingerprint   text             NOT NULL DEFAULT '',
  first_window_start     timestamptz      NOT NULL,
  last_window_end        timestamptz      NOT NULL,
  steady_median_ofu      double precision NOT NULL DEFAULT 0,
  steady_mad_ofu         double precision NOT NULL DEFAULT 0,
  steady_windows         bigint           NOT NULL DEFAULT 0,
  effective_peak_tflops  double precision NOT NULL DEFAULT 0,
  updated_at             timestamptz      NOT NULL DEFAULT now(),
  PRIMARY KEY (cluster, job_id)
);
CREATE INDEX alert_job_state_by_workload ON alert_job_state (workload_fingerprint, first_window_start DESC)
  WHERE workload_fingerprint <> '';
CREATE INDEX alert_job_state_by_last_window ON alert_job_state (last_window_end);

-- Alerts. `alert_pb` is the serialized goodput.v1.Alert as last decided (summary, evidence,
-- labels, GPUs); the columns are what queries filter on and what changes without a new
-- decision (state, acknowledgement). At most one open alert per fingerprint.
CREATE TABLE alerts (
  id                bigserial   PRIMARY KEY,
  fingerprint       text        NOT NULL,
  kind              text        NOT NULL,
  state             text        NOT NULL CHECK (state IN ('firing', 'resolved', 'acknowledged', 'silenced')),
  severity          text        NOT NULL CHECK (severity IN ('info', 'warning', 'critical')),
  cluster           text        NOT NULL,
  job_id            text        NOT NULL,
  labels            jsonb       NOT NULL DEFAULT '{}'::jsonb,
  alert_pb          bytea       NOT NULL,
  start_time        timestamptz NOT NULL,
  end_time          timestamptz,
  update_time       timestamptz NOT NULL,
  ack_by            text,
  ack_time          timestamptz,
  ack_comment       text,
  -- Targets the firing state was enqueued to: the resolved state goes to the same ones.
  notified_targets  text[]      NOT NULL DEFAULT '{}'
);
CREATE UNIQUE INDEX alerts_open_fingerprint ON alerts (fingerprint) WHERE state <> 'resolved';
CREATE INDEX alerts_by_update ON alerts (update_time DESC, id DESC);
CREATE INDEX alerts_by_job ON alerts (cluster, job_id);
CREATE INDEX alerts_open ON alerts (id) WHERE state <> 'resolved';

CREATE TABLE alert_silences (
  id          bigserial   PRIMARY KEY,
  matchers    jsonb       NOT NULL CHECK (jsonb_typeof(matchers) = 'array'),
  start_time  timestamptz NOT NULL,
  end_time    timestamptz NOT NULL CHECK (end_time > start_time),
  created_by  text        NOT NULL DEFAULT '',
  comment     text        NOT NULL DEFAULT '',
  created_at  timestamptz NOT NULL DEFAULT now(),
  deleted_at  timestamptz
);
CREATE INDEX alert_silences_active ON alert_silences (end_time) WHERE deleted_at IS NULL;
