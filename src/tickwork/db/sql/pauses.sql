-- Queries on tickwork.pauses (migration 0020): the paused queues and schedule namespaces. The
-- claim (job_claim in jobs.sql) and the firing claim (schedule_claim_due, schedule_next_due,
-- schedule_upcoming in schedules.sql) read the table inside their own statements.

-- name: pause_insert
-- Pause a target; nothing when it is paused already (no row returned then).
INSERT INTO tickwork.pauses (scope, name, paused_by, paused_at, reason)
VALUES (%(scope)s, %(name)s, %(actor)s, coalesce(%(now)s, now()), %(reason)s)
ON CONFLICT (scope, name) DO NOTHING
RETURNING scope, name, paused_by, paused_at, reason;

-- name: pause_delete
-- Resume a target; nothing when it is not paused (no row returned then).
DELETE FROM tickwork.pauses
WHERE scope = %(scope)s AND name = %(name)s
RETURNING scope, name, paused_by, paused_at, reason;

-- name: pause_list
-- The paused targets of one scope (NULL: both), by scope and name.
SELECT scope, name, paused_by, paused_at, reason
FROM tickwork.pauses
WHERE %(scope)s::text IS NULL OR scope = %(scope)s
ORDER BY scope, name;

-- name: pause_queues_known
-- The queues with waiting or running jobs, or paused, with their waiting and running jobs:
-- the listing of `tickwork queues`. Each status counted apart, through its partial index
-- (the claim's, the leases'), never the history.
WITH counts AS (
    SELECT queue, count(*) AS available, 0::bigint AS running
    FROM tickwork.jobs WHERE status = 'available' GROUP BY queue
    UNION ALL
    SELECT queue, 0, count(*)
    FROM tickwork.jobs WHERE status = 'running' GROUP BY queue
    UNION ALL
    SELECT name, 0, 0 FROM tickwork.pauses WHERE scope = 'queue'
)
SELECT c.queue AS name, sum(c.available)::bigint AS available, sum(c.running)::bigint AS running,
       p.paused_by, p.paused_at, p.reason
FROM counts c
LEFT JOIN tickwork.pauses p ON p.scope = 'queue' AND p.name = c.queue
GROUP BY c.queue, p.paused_by, p.paused_at, p.reason
ORDER BY c.queue;

-- name: pause_namespaces_known
-- The schedule namespaces with their enabled schedules and paused state: the listing of
-- `tickwork namespaces`.
SELECT n.namespace AS name,
       (SELECT count(*) FROM tickwork.schedules s
        WHERE s.namespace = n.namespace AND s.enabled) AS schedules,
       p.paused_by, p.paused_at, p.reason
FROM tickwork.schedule_namespaces n
LEFT JOIN tickwork.pauses p ON p.scope = 'namespace' AND p.name = n.namespace
ORDER BY n.namespace;

-- name: pause_namespace_exists
SELECT EXISTS (SELECT FROM tickwork.schedule_namespaces
               WHERE namespace = %(name)s) AS found;
