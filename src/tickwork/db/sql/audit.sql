-- Queries on tickwork.audit_log (the record of a job action, whose snapshots read the job,
-- is admin_audit_job in jobs.sql).

-- name: audit_insert
INSERT INTO tickwork.audit_log (at, actor, action, target, reason, request_id, details)
VALUES (coalesce(%(now)s, now()), %(actor)s, %(action)s, %(target)s, %(reason)s,
        %(request_id)s, %(details)s)
RETURNING id;

-- name: audit_replay
-- The record of an action already done under this request id, if any.
SELECT id, details
FROM tickwork.audit_log
WHERE request_id = %(request_id)s AND action = %(action)s AND target = %(target)s
ORDER BY id
LIMIT 1;

-- name: audit_schedule
-- The audit record of an action on a schedule: its details, its snapshot before and after.
INSERT INTO tickwork.audit_log (at, actor, action, target, reason, request_id, details)
SELECT coalesce(%(now)s, now()), %(actor)s, %(action)s, %(target)s, %(reason)s,
       %(request_id)s,
       %(details)s::jsonb || jsonb_build_object(
           'before', %(before)s::jsonb,
           'after', jsonb_build_object('revision', revision, 'enabled', enabled,
                                       'suspended', suspended, 'next_run_at', next_run_at,
                                       'last_occurrence_at', last_occurrence_at,
                                       'last_job_id', last_job_id,
                                       'last_job_status', last_job_status))
FROM tickwork.schedules
WHERE namespace = %(namespace)s AND name = %(name)s
RETURNING id;

-- name: audit_schedules_disabled
-- Sync with pruning: one record per schedule it disabled, each with its own details (what
-- became of its pending jobs).
INSERT INTO tickwork.audit_log (at, actor, action, target, reason, request_id, details)
SELECT coalesce(%(now)s, now()), %(actor)s, %(action)s,
       'schedule:' || %(namespace)s || '/' || d.name, %(reason)s, %(request_id)s, d.details
FROM unnest(%(names)b::text[], %(details)b::jsonb[]) AS d(name, details)
RETURNING id;

-- name: audit_session_ended
-- A logout ended this session (its handle is the target).
SELECT EXISTS (SELECT 1 FROM tickwork.audit_log
               WHERE target = %(target)s AND action = 'logout') AS ended;

-- name: audit_end_session
INSERT INTO tickwork.audit_log (at, actor, action, target, reason, request_id, details)
VALUES (coalesce(%(now)s, now()), %(actor)s, %(action)s, %(target)s, %(reason)s,
        %(request_id)s, '{}'::jsonb)
RETURNING id;
