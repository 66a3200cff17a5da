-- Queries on tickwork.occurrence_deadlines and the deadline and auto-suspend columns of
-- tickwork.schedules (migration 0025; docs/deadlines.md). Times come in as %(now)s: NULL means
-- the database clock.

-- name: deadline_lock_due_schedules
-- The duty, first: lock the schedules of the earliest deadlines that have passed, in key order
-- (as the jobs' triggers lock them), so that a worker recording a success on one of their
-- deadline rows (after locking its schedule) never waits on this transaction while it waits on
-- that worker.
SELECT s.namespace, s.name
FROM tickwork.schedules s
WHERE (s.namespace, s.name) IN (
    SELECT d.namespace, d.name
    FROM tickwork.occurrence_deadlines d
    WHERE d.deadline_at <= coalesce(%(now)s, now())
    ORDER BY d.deadline_at
    LIMIT %(batch)s)
ORDER BY s.namespace, s.name
FOR UPDATE OF s;

-- name: deadline_check
-- The duty, then: take the passed deadlines of the locked schedules (SKIP LOCKED and deleted:
-- each is decided once, however many workers run this), and record the ones whose occurrence
-- had not succeeded by its deadline on their schedule: the count, and the latest of them.
-- Returns every deadline decided, late or not.
WITH due AS (
    DELETE FROM tickwork.occurrence_deadlines d
    WHERE d.job_id IN (
        SELECT o.job_id
        FROM tickwork.occurrence_deadlines o
        JOIN unnest(%(namespaces)s::text[], %(names)s::text[]) AS l(namespace, name)
            ON l.namespace = o.namespace AND l.name = o.name
        WHERE o.deadline_at <= coalesce(%(now)s, now())
        ORDER BY o.deadline_at
        LIMIT %(batch)s
        FOR UPDATE OF o SKIP LOCKED)
    RETURNING d.job_id, d.namespace, d.name, d.occurrence_at, d.deadline_at, d.succeeded_at
),
late AS (
    SELECT job_id, namespace, name, occurrence_at, deadline_at
    FROM due
    WHERE succeeded_at IS NULL OR succeeded_at > deadline_at
),
latest AS (
    SELECT DISTINCT ON (namespace, name)
           namespace, name, occurrence_at, deadline_at, job_id,
           count(*) OVER (PARTITION BY namespace, name) AS missed
    FROM late
    ORDER BY namespace, name, occurrence_at DESC, job_id DESC
),
recorded AS (
    UPDATE tickwork.schedules s
    SET deadlines_missed = s.deadlines_missed + l.missed,
        late_occurrence_at = l.occurrence_at,
        late_deadline_at = l.deadline_at,
        late_job_id = l.job_id,
        late_at = coalesce(%(now)s, now())
    FROM latest l
    WHERE s.namespace = l.namespace AND s.name = l.name
    RETURNING s.namespace
)
SELECT job_id, namespace, name, occurrence_at, deadline_at,
       succeeded_at IS NULL OR succeeded_at > deadline_at AS late
FROM due
ORDER BY deadline_at, job_id;

-- name: schedule_lock_for_resume
-- Resume: the schedule, locked, with what decides whether and how it resumes.
SELECT s.enabled, s.suspended, coalesce((s.spec ->> 'suspend')::boolean, false) AS spec_suspend,
       s.dead_streak, s.failures_suspended_at, s.failures_suspended_job_id,
       s.dead_streak_job_id,
       jsonb_build_object('revision', s.revision, 'enabled', s.enabled,
                          'suspended', s.suspended, 'dead_streak', s.dead_streak,
                          'failures_suspended_at', s.failures_suspended_at,
                          'failures_suspended_job_id', s.failures_suspended_job_id)
           AS snapshot
FROM tickwork.schedules s
WHERE s.namespace = %(namespace)s AND s.name = %(name)s
FOR UPDATE;

-- name: schedule_resume
-- Resume a schedule suspended by spec.suspendAfterFailures (its spec not suspending it): fire
-- again, the suspended stretch missed (its misfire policy decides), the count of dead
-- occurrences from zero. Also resets the count of a schedule that was not suspended.
UPDATE tickwork.schedules
SET suspended = false,
    missed_before = CASE WHEN suspended THEN coalesce(%(now)s, now()) ELSE missed_before END,
    dead_streak = 0,
    dead_streak_job_id = NULL,
    failures_suspended_at = NULL,
    failures_suspended_job_id = NULL,
    updated_at = coalesce(%(now)s, now())
WHERE namespace = %(namespace)s AND name = %(name)s AND enabled
  AND NOT coalesce((spec ->> 'suspend')::boolean, false)
RETURNING namespace;
