-- Workload kinds (training, inference, interactive, other) on jobs, and the serving engines'
-- own metrics (vLLM, SGLang) that goodput-ingest attributes to jobs as it does GPU samples.
-- Adding nullable columns without a default rewrites nothing; the kind's check is added
-- NOT VALID and validated by the next file.
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS workload_kind text;
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS workload_kind_source text;
ALTER TABLE jobs ADD CONSTRAINT jobs_workload_kind_check
  CHECK (workload_kind IN ('training', 'inference', 'interactive', 'other')
         AND workload_kind_source IN ('registered', 'label', 'inferred')) NOT VALID;

-- One value of one serving-engine series at one time (long form: engines export their
-- metrics as separate series, each scraped or written on its own). `metric` is goodput's
-- name for it (prompt_tokens, generation_tokens, requests, running, waiting, flops_per_gpu;
-- the first three and flops_per_gpu are the engine's cumulative counters), `series` the
-- engine's labels that tell its series apart (model, engine index or ranks), `job` the job it
-- was attributed to (jobs.id), NULL until one is known. A retried batch stores nothing twice
-- (the primary key).
CREATE TABLE serving_samples (
  cluster      text             NOT NULL,
  host         text             NOT NULL DEFAULT '',
  pod          text             NOT NULL DEFAULT '',
  engine       text             NOT NULL,
  model        text             NOT NULL DEFAULT '',
  series       text             NOT NULL DEFAULT '',
  metric       text             NOT NULL,
  sample_time  timestamptz      NOT NULL,
  value        double precision NOT NULL,
  job          bigint,
  batch_id     text             NOT NULL,
  PRIMARY KEY (cluster, host, pod, engine, series, metric, sample_time)
);
CREATE INDEX serving_samples_job_time ON serving_samples (job, sample_time);
-- Retention deletes by time, oldest first; rows arrive in time order, so a BRIN index is
-- enough and costs next to nothing to keep.
CREATE INDEX serving_samples_time ON serving_samples USING brin (sample_time);
