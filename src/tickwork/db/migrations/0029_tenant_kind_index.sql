-- Fair claiming by kind (issue 33, item 2): the waiting jobs of priority 0 by queue, kind and
-- tenant (the schedule namespace; '' for jobs enqueued from code). The claim finds the tenants
-- with waiting jobs of the kinds it serves by skipping through this index, one descent each
-- per queue and kind, and takes a tenant's share of one kind from its own range. Through
-- jobs_tenant_idx (no kind) the claim of a worker read every waiting job of the kinds it does
-- not serve: 1,000,000 fired occurrences of a kind no worker runs beside the workflow steps
-- every worker serves made each claim read them all (python bench/firing.py --schedules
-- 1000000 --namespaces 100: 20,800 buffers and 228 ms a claim, its top statement).
-- Partial, like jobs_tenant_idx: a job has entries only while it waits at priority 0. The
-- tenant in the collation "C", which the claim compares it in: a plan cannot take
-- jobs_tenant_idx for this walk (a generic plan did, seeing all kinds alike: 11,557 buffers
-- a claim), and a comparison is a memcmp.
-- Built inside the migration's transaction: writes to tickwork.jobs wait while it reads the
-- table and sorts the waiting jobs.
CREATE INDEX jobs_tenant_kind_idx
    ON tickwork.jobs (queue, kind, (coalesce(schedule_namespace, '') COLLATE "C"), run_at, id)
    WHERE status = 'available' AND priority = 0;
