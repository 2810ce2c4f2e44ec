-- The workload kind's check (20261128215000), checked on the rows already there without
-- blocking writes (VALIDATE CONSTRAINT takes a SHARE UPDATE EXCLUSIVE lock).
ALTER TABLE jobs VALIDATE CONSTRAINT jobs_workload_kind_check;
