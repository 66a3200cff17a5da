-- The console's jobs page filtered by kind for a reader scoped to some schedule namespaces
-- (issue 33, item 4): a walk per namespace of the scope through this index, newest first,
-- stopping at a page (job_page_by_kind). Without it the page walked every job newest first
-- looking for the scope's jobs of that kind: a whole-table read when it has few or none
-- (python bench/admin.py: ~480 ms at 1,000,000 jobs).
-- Partial: jobs enqueued outside any schedule (the bulk of most queues' jobs, and those the
-- drain benchmarks count) write nothing here; a scheduled job adds one entry per row version,
-- at the right end of its (namespace, kind) range.
-- Built inside the migration's transaction: writes to tickwork.jobs wait for it while it reads
-- the table and sorts the scheduled jobs (1.3-3.4 s at 1,000,000 jobs, 300,000 of them
-- scheduled, on a loaded 2-core machine).
CREATE INDEX jobs_namespace_kind_idx ON tickwork.jobs (schedule_namespace, kind, id)
    WHERE schedule_namespace IS NOT NULL;
