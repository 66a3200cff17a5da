-- Results and progress (issue 34, item 4). A task's return value already lands in
-- tickwork.jobs.result (0009; now every job's, not only a schedule job's). Two nullable
-- columns beside it, no default, nothing rewritten:
-- * result_error: why a succeeded job's return value was not kept (larger than the payload
--   limit, not JSON, NaN, NUL, nested too deep); the job still succeeded and result is NULL.
-- * progress: what the running task last reported through job.progress(), as
--   {"fraction": 0.4 or null, "message": "..." or null, "attempt": 1, "at": timestamptz},
--   written by its worker at most once per interval and with the job's outcome.
-- A worker of the previous release never writes either: its jobs show no progress and no
-- result error.
ALTER TABLE tickwork.jobs ADD COLUMN result_error text;
ALTER TABLE tickwork.jobs ADD COLUMN progress jsonb;
