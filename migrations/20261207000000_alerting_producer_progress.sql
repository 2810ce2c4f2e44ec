-- Each ofu producer's delivery progress, beside its receiver watermark: the newest window end
-- it delivered (its data frontier), when that frontier last moved (the alert engine's clock),
-- the backlog then (how much older the window was on arrival than a window plus ofu's
-- lateness) and since when the backlog has been at the platform_lagging alert's threshold
-- (services/alerting/platform_lag.h). Nullable columns: no rewrite, no default to fill.
ALTER TABLE alert_receiver_state
  ADD COLUMN data_frontier        timestamptz,
  ADD COLUMN frontier_advanced_at timestamptz,
  ADD COLUMN frontier_backlog_ms  bigint,
  ADD COLUMN lagging_since        timestamptz;
