-- The admin console (`tickwork admin`) at a million jobs: its listings are keyset pages in
-- id order under one filter, its detail pages read one target's audit records, and its
-- actions look up an earlier action by request id (a resubmitted form changes nothing twice).

-- Every index on jobs is paid for on the workers' path (each status change writes a new row
-- version into every index whose predicate it meets), so these are partial where they can be.

-- Dead and cancelled jobs, newest first (jobs page filtered by status; dead lists and
-- counts). A job reaches these statuses once, off the hot path, so this index costs the
-- workers nothing; available and running jobs are read through jobs_claim_idx and
-- jobs_lease_idx. There is deliberately no index by kind or queue: each would add a write to
-- every enqueue (measured: -17% drain rate with this and a kind index on every job), and a
-- filter matching few jobs reads the table in about 200 ms at a million jobs (bench/admin.py).
CREATE INDEX jobs_status_id_idx ON tickwork.jobs (status, id)
    WHERE status IN ('dead', 'cancelled');

-- A schedule's jobs, newest first (schedule history; jobs filtered by schedule).
CREATE INDEX jobs_schedule_id_idx ON tickwork.jobs (schedule_namespace, schedule_name, id)
    WHERE schedule_name IS NOT NULL;

-- A schedule's latest dead job (the schedules page's "last failure").
CREATE INDEX jobs_schedule_dead_idx
    ON tickwork.jobs (schedule_namespace, schedule_name, finished_at)
    WHERE status = 'dead' AND schedule_name IS NOT NULL;

-- One target's audit records, newest first.
CREATE INDEX audit_log_target_idx ON tickwork.audit_log (target, id);

-- An action already done under this request id.
CREATE INDEX audit_log_request_idx ON tickwork.audit_log (request_id)
    WHERE request_id IS NOT NULL;
