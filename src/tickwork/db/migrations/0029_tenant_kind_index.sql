-- Claiming by kind (issue 33, item 2): the waiting jobs of priority 0 by queue, kind and tenant
-- (the schedule namespace; '' for jobs enqueued from code). The claim finds the tenants with
-- waiting jobs of the kinds it serves by skipping through this index, one descent each per
-- queue and kind, and takes a tenant's share of a kind from its own range. Through
-- jobs_tenant_idx (no kind) a claim read every waiting job of the kinds it does not serve:
-- 1,000,000 fired occurrences of a kind no worker runs, beside the workflow steps every worker
-- serves, made each claim read them all (python bench/firing.py --schedules 1000000
-- --namespaces 100: 19,500 buffers and 195 ms a claim, its top statement).
-- The predicate says "status <= 'available'" ('available' is the enum's first label), which
-- the claim repeats: it implies neither jobs_tenant_idx's predicate nor jobs_claim_idx's, so a
-- planner whose statistics predate a bulk enqueue (every scan estimated at one row, all
-- indexes alike) cannot take either of them for these scans (it did: 10,000 waiting jobs read
-- twice per claim, bench/peers.py).
-- Built inside the migration's transaction: writes to tickwork.jobs wait while it reads the
-- table and sorts the waiting jobs.
CREATE INDEX jobs_tenant_kind_idx
    ON tickwork.jobs (queue, kind, (coalesce(schedule_namespace, '')), run_at, id)
    WHERE status <= 'available' AND priority = 0;
