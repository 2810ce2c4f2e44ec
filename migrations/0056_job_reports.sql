-- 0056: job-end reports (goodput-ofu's ReportService; services/ofu/README.md). One row per
-- ended job: its latest revision as a serialized goodput.v1.JobReport, with what listings
-- filter and sort on, and what was last written into the Slurm job's AdminComment.
CREATE TABLE job_reports (
  job                   bigint           PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
  revision              integer          NOT NULL DEFAULT 0 CHECK (revision >= 0),
  -- Hash of the report's content without its revision and times: a new revision is written
  -- only when it changes.
  content_hash          text             NOT NULL,
  report_pb             bytea            NOT NULL,
  wasted_gpu_hours      double precision NOT NULL DEFAULT 0,
  -- Every window of the job was final when the report was assembled.
  final                 boolean          NOT NULL DEFAULT false,
  -- The AdminComment last settled: written, or refused for good (the job has finished in
  -- slurmctld); '' when none.
  admin_comment_written text             NOT NULL DEFAULT '',
  -- When the first revision was written: re-checks go on for ofu.reports.revise_for_s after.
  created_at            timestamptz      NOT NULL DEFAULT now(),
  generated_at          timestamptz      NOT NULL DEFAULT now(),
  checked_at            timestamptz      NOT NULL DEFAULT now()
);

CREATE INDEX job_reports_by_wasted ON job_reports (wasted_gpu_hours DESC);
-- Ended jobs by end time: the reporter's candidates and ListJobReports' range.
CREATE INDEX jobs_by_end ON jobs (end_time, id) WHERE end_time IS NOT NULL;
