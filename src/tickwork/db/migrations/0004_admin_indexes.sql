-- The admin console (`tickwork admin`) at a million jobs: its listings are keyset pages in
-- id order under one filter, its detail pages read one target's audit records, and its
-- actions look up an earlier action by request id (a resubmitted form changes nothing twice).

-- Every index on jobs is paid for on the workers' path (each status change writes a new row
-- version into every index whose predicate it meets), so these are partial where they can be.

-- Jobs of one status but succeeded, newest first (jobs page filtered by status; dead, failing
-- and running lists; dead counts). Succeeded jobs, the bulk of the table, are listed from the
-- primary key, where most rows match; their final row version costs this index nothing.
CREATE INDEX jobs_status_id_idx ON tickwork.jobs (status, id) WHERE status <> 'succeeded';

-- Jobs of one kind, newest first: a rare kind must not mean a scan of the whole table.
CREATE INDEX jobs_kind_id_idx ON tickwork.jobs (kind, id);

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
