-- 0061: fleet figures per job and hour, so a fleet summary reads one row per job and hour
-- instead of every job-level window (at 100,000 GPUs and 60 s windows a day is about 18
-- million windows; the dashboard asks for it on every page and live poll).
--
-- One row per (job, UTC hour, window GPU model): the sums over the job-level windows
-- (ofu_windows.gpu = '') starting in that hour, each added in window order so the figures do
-- not depend on the order rows were written. goodput-ofu rewrites a job's hours in the
-- transaction that writes their windows (ofu_fleet_sums below), so the two never disagree.
-- Low-efficiency GPU-hours are those of windows with OFU below 0.2, the fleet summary's
-- default threshold (services/ofu/ofu_queries.h, kFleetHoursLowEfficiencyOfu); a summary asked
-- for at another threshold reads the windows themselves.
CREATE TABLE ofu_fleet_hours (
  job                      bigint           NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  hour                     bigint           NOT NULL,  -- hours since the Unix epoch (UTC)
  gpu_model                text             NOT NULL,  -- the windows' (a job's may be empty)
  windows                  integer          NOT NULL CHECK (windows > 0),
  gpu_hours                double precision NOT NULL,
  effective_gpu_hours      double precision NOT NULL,  -- GPU-hours × OFU
  idle_gpu_hours           double precision NOT NULL,
  low_efficiency_gpu_hours double precision NOT NULL,  -- windows with OFU < 0.2
  gpu_hours_by_ofu_decile  double precision[] NOT NULL CHECK (cardinality(gpu_hours_by_ofu_decile) = 10),
  PRIMARY KEY (job, hour, gpu_model)
);
CREATE INDEX ofu_fleet_hours_by_hour ON ofu_fleet_hours (hour);

-- Fleet figures of job-level windows starting in [from_time, to_time), per job, UTC hour and
-- window GPU model, of the jobs in only_jobs (NULL: all; give it as a literal so that the
-- planner reads the jobs' windows by their key). A window stands for gpu_equivalents GPUs
-- (gpus_allocated in rows older than 0052) over window_s; its GPU-hours are low-efficiency ones
-- when its OFU is below low_threshold. Sums run in window order, so they do not depend on the
-- order rows were written. The same arithmetic as FleetPieceOf (services/ofu/ofu_queries.cc);
-- goodput-ofu fills ofu_fleet_hours from it (OfuStore::Commit) and reads the partial hours at
-- a range's ends with it (OfuStore::FleetPieces).
CREATE FUNCTION ofu_fleet_sums(only_jobs bigint[], from_time timestamptz, to_time timestamptz,
                               low_threshold double precision)
RETURNS TABLE (job bigint, hour bigint, gpu_model text, windows integer,
               gpu_hours double precision, effective_gpu_hours double precision,
               idle_gpu_hours double precision, low_efficiency_gpu_hours double precision,
               gpu_hours_by_ofu_decile double precision[])
LANGUAGE sql STABLE AS $$
  SELECT x.job, x.hour, x.gpu_model, count(*)::integer,
         sum(x.gh ORDER BY x.start_time),
         coalesce(sum(x.gh * x.ofu ORDER BY x.start_time) FILTER (WHERE x.ofu IS NOT NULL), 0),
         sum(x.idle_h ORDER BY x.start_time),
         coalesce(sum(x.gh ORDER BY x.start_time) FILTER (WHERE x.ofu < low_threshold), 0),
         ARRAY[coalesce(sum(x.gh ORDER BY x.start_time) FILTER (WHERE x.decile = 0), 0),
               coalesce(sum(x.gh ORDER BY x.start_time) FILTER (WHERE x.decile = 1), 0),
               coalesce(sum(x.gh ORDER BY x.start_time) FILTER (WHERE x.decile = 2), 0),
               coalesce(sum(x.gh ORDER BY x.start_time) FILTER (WHERE x.decile = 3), 0),
               coalesce(sum(x.gh ORDER BY x.start_time) FILTER (WHERE x.decile = 4), 0),
               coalesce(sum(x.gh ORDER BY x.start_time) FILTER (WHERE x.decile = 5), 0),
               coalesce(sum(x.gh ORDER BY x.start_time) FILTER (WHERE x.decile = 6), 0),
               coalesce(sum(x.gh ORDER BY x.start_time) FILTER (WHERE x.decile = 7), 0),
               coalesce(sum(x.gh ORDER BY x.start_time) FILTER (WHERE x.decile = 8), 0),
               coalesce(sum(x.gh ORDER BY x.start_time) FILTER (WHERE x.decile = 9), 0)]
    FROM (SELECT w.job, floor(extract(epoch FROM w.start_time) / 3600)::bigint AS hour,
                 w.gpu_model, w.start_time, w.ofu,
                 coalesce(w.gpu_equivalents, w.gpus_allocated::float8) *
                   (w.window_s::float8 / 3600::float8) AS gh,
                 cardinality(w.idle_gpus)::float8 * (w.window_s::float8 / 3600::float8) AS idle_h,
                 -- (greatest() skips NULL: a window without OFU has no decile)
                 CASE WHEN w.ofu IS NOT NULL
                      THEN least(greatest(floor(w.ofu * 10::float8), 0), 9) END AS decile
            FROM ofu_windows w
           WHERE w.gpu = '' AND w.start_time >= from_time AND w.start_time < to_time
             AND (only_jobs IS NULL OR w.job = ANY (only_jobs))) x
   GROUP BY x.job, x.hour, x.gpu_model
$$;

-- The hours of the windows already written.
INSERT INTO ofu_fleet_hours
SELECT * FROM ofu_fleet_sums(NULL, '-infinity', 'infinity', 0.2::float8);
