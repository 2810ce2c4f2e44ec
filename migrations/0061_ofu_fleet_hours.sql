-- 0061: fleet figures per job and hour, so a fleet summary reads one row per job and hour
-- instead of every job-level window (at 100,000 GPUs and 60 s windows a day is about 18
-- million windows; the dashboard asks for it on every page and live poll).
--
-- One row per (job, UTC hour, window GPU model): the sums over the job-level windows
-- (ofu_windows.gpu = '') starting in that hour, each added in window order so the figures do
-- not depend on the order rows were written. goodput-ofu rewrites a job's hours in the
-- transaction that writes their windows (ofu_fleet_hours_refresh), so the two never disagree.
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

-- Recomputes the rows of the given (job, hour) pairs from their job-level windows: the
-- pairs' old rows go (a window's GPU model may have changed), one row per GPU model comes.
-- A window stands for gpu_equivalents GPUs (gpus_allocated in rows older than 0052).
CREATE FUNCTION ofu_fleet_hours_refresh(jobs bigint[], hours bigint[]) RETURNS void
LANGUAGE sql AS $$
  DELETE FROM ofu_fleet_hours f
   USING unnest(jobs, hours) AS t(job, hour)
   WHERE f.job = t.job AND f.hour = t.hour;
  INSERT INTO ofu_fleet_hours (job, hour, gpu_model, windows, gpu_hours, effective_gpu_hours,
                               idle_gpu_hours, low_efficiency_gpu_hours, gpu_hours_by_ofu_decile)
  SELECT job, hour, gpu_model, count(*),
         sum(gh ORDER BY start_time),
         coalesce(sum(gh * ofu ORDER BY start_time) FILTER (WHERE ofu IS NOT NULL), 0),
         sum(idle_h ORDER BY start_time),
         coalesce(sum(gh ORDER BY start_time) FILTER (WHERE ofu < 0.2::float8), 0),
         ARRAY[coalesce(sum(gh ORDER BY start_time) FILTER (WHERE decile = 0), 0),
               coalesce(sum(gh ORDER BY start_time) FILTER (WHERE decile = 1), 0),
               coalesce(sum(gh ORDER BY start_time) FILTER (WHERE decile = 2), 0),
               coalesce(sum(gh ORDER BY start_time) FILTER (WHERE decile = 3), 0),
               coalesce(sum(gh ORDER BY start_time) FILTER (WHERE decile = 4), 0),
               coalesce(sum(gh ORDER BY start_time) FILTER (WHERE decile = 5), 0),
               coalesce(sum(gh ORDER BY start_time) FILTER (WHERE decile = 6), 0),
               coalesce(sum(gh ORDER BY start_time) FILTER (WHERE decile = 7), 0),
               coalesce(sum(gh ORDER BY start_time) FILTER (WHERE decile = 8), 0),
               coalesce(sum(gh ORDER BY start_time) FILTER (WHERE decile = 9), 0)]
    FROM (SELECT w.job, t.hour, w.gpu_model, w.start_time, w.ofu,
                 coalesce(w.gpu_equivalents, w.gpus_allocated::float8) *
                   (w.window_s::float8 / 3600::float8) AS gh,
                 cardinality(w.idle_gpus)::float8 * (w.window_s::float8 / 3600::float8) AS idle_h,
                 -- (greatest() skips NULL: a window without OFU has no decile)
                 CASE WHEN w.ofu IS NOT NULL
                      THEN least(greatest(floor(w.ofu * 10::float8), 0), 9) END AS decile
            FROM (SELECT DISTINCT * FROM unnest(jobs, hours)) AS t(job, hour)
            JOIN ofu_windows w
              ON w.job = t.job AND w.gpu = ''
             AND w.start_time >= to_timestamp(t.hour * 3600)
             AND w.start_time < to_timestamp((t.hour + 1) * 3600)) x
   GROUP BY job, hour, gpu_model;
$$;

-- The hours of the windows already written.
SELECT ofu_fleet_hours_refresh(array_agg(job), array_agg(hour))
  FROM (SELECT DISTINCT job, floor(extract(epoch FROM start_time) / 3600)::bigint AS hour
          FROM ofu_windows WHERE gpu = '') h;
