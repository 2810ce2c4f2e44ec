-- Job-level windows carry what alerting tells hung, idle and silent GPUs apart by
-- (services/alerting/README.md, "Hung and idle jobs", "Silent GPUs"): the mean GR-engine and
-- SM activity, the highest per-GPU tensor, SM and GR-engine activity, and the GPUs of the job
-- that sent nothing in the window while others did, with their last sample time. One jsonb
-- written by goodput-ofu (services/ofu/ofu_store.cc, ActivityJson); NULL on per-GPU windows,
-- on windows with nothing to say, and on rows written before this migration. A nullable
-- column without a default: no rewrite of the table.
ALTER TABLE ofu_windows ADD COLUMN IF NOT EXISTS activity jsonb;
