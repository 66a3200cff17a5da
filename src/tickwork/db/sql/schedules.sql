-- Queries on tickwork.schedules and tickwork.schedule_namespaces, and the jobs they fire.
-- Times come in as %(now)s: NULL means the database clock.

-- name: schedule_namespace_lock
-- Sync: create the namespace row if needed and lock it for the transaction; returns the
-- recorded owner and the instant the sync works at.
INSERT INTO tickwork.schedule_namespaces AS n (namespace, owner, created_at, updated_at)
VALUES (%(namespace)s, %(owner)s, coalesce(%(now)s, now()), coalesce(%(now)s, now()))
ON CONFLICT (namespace) DO UPDATE SET owner = n.owner
RETURNING n.owner, coalesce(%(now)s, now());

-- name: schedule_namespace_take_over
UPDATE tickwork.schedule_namespaces
SET owner = %(owner)s, updated_at = coalesce(%(now)s, now())
WHERE namespace = %(namespace)s;

-- name: schedule_lock_namespace
-- Sync: every schedule of the namespace, locked in name order (waits for a firing pass
-- holding one of them, so the values read are current).
SELECT s.name, s.revision, s.enabled, s.suspended, s.spec, s.next_run_at, s.missed_before,
       EXISTS (SELECT 1 FROM tickwork.jobs j
               WHERE j.id = s.last_job_id AND j.status IN ('available', 'running'))
FROM tickwork.schedules s
WHERE s.namespace = %(namespace)s
ORDER BY s.name
FOR UPDATE OF s;

-- name: schedule_insert_many
INSERT INTO tickwork.schedules (
    namespace, name, revision, suspended, spec, fixed_delay, next_run_at, missed_before,
    created_at, updated_at)
SELECT %(namespace)s, u.name, u.revision, u.suspended, u.spec, u.fixed_delay, u.next_run_at,
       u.missed_before, coalesce(%(now)s, now()), coalesce(%(now)s, now())
FROM unnest(%(names)b::text[], %(revisions)b::integer[], %(suspended)b::boolean[],
            %(specs)b::jsonb[], %(fixed_delays)b::interval[], %(next_run_ats)b::timestamptz[],
            %(missed_befores)b::timestamptz[])
     AS u(name, revision, suspended, spec, fixed_delay, next_run_at, missed_before);

-- name: schedule_update_many
-- Sync: changed or re-enabled definitions, fenced by the revision read under lock. A new
-- definition gets a fresh start: a firing error of the old one is cleared.
UPDATE tickwork.schedules s
SET revision = u.revision,
    enabled = true,
    suspended = u.suspended,
    spec = u.spec,
    fixed_delay = u.fixed_delay,
    next_run_at = u.next_run_at,
    missed_before = u.missed_before,
    state = CASE WHEN u.reset_state THEN NULL ELSE s.state END,
    state_job_id = CASE WHEN u.reset_state THEN NULL ELSE s.state_job_id END,
    firing_error = NULL,
    firing_failures = 0,
    firing_retry_at = NULL,
    updated_at = coalesce(%(now)s, now())
FROM unnest(%(names)b::text[], %(revisions)b::integer[], %(suspended)b::boolean[],
            %(specs)b::jsonb[], %(fixed_delays)b::interval[], %(next_run_ats)b::timestamptz[],
            %(missed_befores)b::timestamptz[], %(reset_states)b::boolean[])
     AS u(name, revision, suspended, spec, fixed_delay, next_run_at, missed_before, reset_state)
WHERE s.namespace = %(namespace)s AND s.name = u.name AND s.revision = u.revision - 1
RETURNING s.name;

-- name: schedule_disable_many
-- Sync with pruning: definitions no longer listed stop firing; the rows stay.
UPDATE tickwork.schedules
SET enabled = false,
    next_run_at = NULL,
    revision = revision + 1,
    updated_at = coalesce(%(now)s, now())
WHERE namespace = %(namespace)s AND name = ANY(%(names)b::text[]) AND enabled
RETURNING name;

-- name: schedule_analyze
-- Sync after creating many schedules: fresh statistics keep the firing claim an ordered
-- scan of schedules_due_idx (with none, the planner may sort every due row per batch).
ANALYZE tickwork.schedules;

-- name: schedule_notify
-- Wake the workers firing this namespace (delivered at commit).
SELECT pg_notify('tickwork_schedules', %(namespace)s);

-- name: schedule_claim_due
-- Firing: lock a batch of due schedules of the offered namespaces; others skip them. Each
-- namespace is read through its own index range; with several namespaces, rows locked
-- beyond the batch stay due and are fired by the next batch (or another worker). A schedule
-- whose firing failed waits for its retry time.
SELECT due.namespace, due.name, due.revision, due.next_run_at, due.missed_before, due.state,
       due.firing_failures, coalesce(%(now)s, now())
FROM unnest(%(namespaces)b::text[]) AS offered(namespace)
CROSS JOIN LATERAL (
    SELECT namespace, name, revision, next_run_at, missed_before, state, firing_failures
    FROM tickwork.schedules s
    WHERE s.namespace = offered.namespace
      AND s.enabled AND NOT s.suspended
      AND s.next_run_at <= coalesce(%(now)s, now())
      AND (s.firing_retry_at IS NULL OR s.firing_retry_at <= coalesce(%(now)s, now()))
    ORDER BY s.next_run_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
) AS due
ORDER BY due.next_run_at
LIMIT %(limit)s;

-- name: schedule_specs
-- The stored specs of some schedules (definitions not in the firing cache yet).
SELECT s.namespace, s.name, s.revision, s.spec
FROM tickwork.schedules s
JOIN unnest(%(namespaces)b::text[], %(names)b::text[]) AS k(namespace, name)
  ON s.namespace = k.namespace AND s.name = k.name;

-- name: schedule_open_jobs
-- Overlap policies: the pending and running jobs of some schedules.
SELECT j.schedule_namespace, j.schedule_name,
       count(*) FILTER (WHERE j.status = 'available'),
       count(*) FILTER (WHERE j.status = 'running')
FROM tickwork.jobs j
JOIN unnest(%(namespaces)b::text[], %(names)b::text[]) AS k(namespace, name)
  ON j.schedule_namespace = k.namespace AND j.schedule_name = k.name
WHERE j.status IN ('available', 'running')
GROUP BY j.schedule_namespace, j.schedule_name;

-- name: schedule_cancel_open_jobs
-- Replace: cancel the open jobs of some schedules, as job_cancel does: an available one at
-- once; a running one is asked to stop and keeps its concurrency key until its worker records
-- the outcome (so a new job sharing the key cannot start alongside it). Jobs locked by
-- someone else are left alone; the caller compares counts.
WITH open AS (
    SELECT j.id
    FROM tickwork.jobs j
    JOIN unnest(%(namespaces)b::text[], %(names)b::text[]) AS k(namespace, name)
      ON j.schedule_namespace = k.namespace AND j.schedule_name = k.name
    WHERE j.status IN ('available', 'running')
    FOR UPDATE OF j SKIP LOCKED
)
UPDATE tickwork.jobs j
SET status = CASE WHEN j.status = 'available' THEN 'cancelled'
                  ELSE j.status END::tickwork.job_status,
    finished_at = CASE WHEN j.status = 'available' THEN coalesce(%(now)s, now()) END,
    cancel_requested_at = CASE WHEN j.status = 'running'
                               THEN coalesce(j.cancel_requested_at, %(now)s, now()) END,
    last_error = 'cancelled: replaced by a newer occurrence of its schedule',
    version = CASE WHEN j.status = 'available' THEN j.version + 1 ELSE j.version END
FROM open
WHERE j.id = open.id
RETURNING j.schedule_namespace, j.schedule_name;

-- name: schedule_insert_jobs
-- The jobs of schedule occurrences (occurrence_at NULL: a manual trigger). An occurrence
-- that already has a job is left alone; the rows returned are the jobs created.
INSERT INTO tickwork.jobs (
    kind, queue, payload, priority, run_at, max_attempts,
    retry_base_seconds, retry_rate, retry_max_seconds, timeout_seconds, concurrency_key,
    schedule_namespace, schedule_name, occurrence_at)
SELECT u.kind, u.queue, u.payload, u.priority, coalesce(u.run_at, %(now)s, now()),
       u.max_attempts, u.retry_base, u.retry_rate, u.retry_max, u.timeout, u.concurrency_key,
       u.namespace, u.name, u.occurrence_at
FROM unnest(%(kinds)b::text[], %(queues)b::text[], %(payloads)b::jsonb[],
            %(priorities)b::smallint[], %(run_ats)b::timestamptz[], %(max_attempts)b::integer[],
            %(retry_bases)b::double precision[], %(retry_rates)b::double precision[],
            %(retry_maxes)b::double precision[], %(timeouts)b::double precision[],
            %(concurrency_keys)b::text[], %(namespaces)b::text[], %(names)b::text[],
            %(occurrences)b::timestamptz[])
     AS u(kind, queue, payload, priority, run_at, max_attempts, retry_base, retry_rate,
          retry_max, timeout, concurrency_key, namespace, name, occurrence_at)
ON CONFLICT (schedule_namespace, schedule_name, occurrence_at)
    WHERE occurrence_at IS NOT NULL
    DO NOTHING
RETURNING id, schedule_namespace, schedule_name, occurrence_at;

-- name: schedule_advance
-- Firing: move each schedule past the occurrences it settled, fenced by the revision read
-- at claim; a firing that worked clears the error of an earlier one. Returns the schedules
-- updated.
UPDATE tickwork.schedules s
SET next_run_at = a.next_run_at,
    missed_before = a.missed_before,
    last_occurrence_at = coalesce(a.last_occurrence_at, s.last_occurrence_at),
    skipped_occurrences = s.skipped_occurrences + a.skipped,
    last_job_id = coalesce(a.last_job_id, s.last_job_id),
    last_job_status = CASE WHEN a.last_job_id IS NULL THEN s.last_job_status END,
    firing_error = NULL,
    firing_failures = 0,
    firing_retry_at = NULL
FROM unnest(%(namespaces)b::text[], %(names)b::text[], %(revisions)b::integer[],
            %(next_run_ats)b::timestamptz[], %(missed_befores)b::timestamptz[],
            %(last_occurrences)b::timestamptz[], %(skipped)b::bigint[],
            %(last_job_ids)b::bigint[])
     AS a(namespace, name, revision, next_run_at, missed_before, last_occurrence_at, skipped,
          last_job_id)
WHERE s.namespace = a.namespace AND s.name = a.name AND s.revision = a.revision AND s.enabled
RETURNING s.namespace, s.name;

-- name: schedule_record_failures
-- Firing: schedules whose firing failed keep their next run and wait for a retry, after
-- first_seconds doubling with each consecutive failure up to max_seconds; the error is
-- stored for the listings and the operator's status. Fenced by the revision read at claim.
UPDATE tickwork.schedules s
SET firing_error = f.error,
    firing_failures = s.firing_failures + 1,
    firing_retry_at = coalesce(%(now)s, now()) + make_interval(secs => least(
        %(first_seconds)s::double precision * power(2, least(s.firing_failures, 30)),
        %(max_seconds)s::double precision))
FROM unnest(%(namespaces)b::text[], %(names)b::text[], %(revisions)b::integer[],
            %(errors)b::text[])
     AS f(namespace, name, revision, error)
WHERE s.namespace = f.namespace AND s.name = f.name AND s.revision = f.revision
RETURNING s.namespace, s.name, s.firing_failures, s.firing_retry_at;

-- name: schedule_next_due
-- The firing loop's alarm: the database's now and the earliest due time it fires (the next
-- run of a schedule, or the retry of one whose firing failed: it is due no earlier).
SELECT coalesce(%(now)s, now()),
       (SELECT min(least(first.next_run_at, first.retry_at))
        FROM unnest(%(namespaces)b::text[]) AS offered(namespace)
        CROSS JOIN LATERAL (
            SELECT (SELECT min(s.next_run_at) FROM tickwork.schedules s
                    WHERE s.namespace = offered.namespace AND s.enabled AND NOT s.suspended
                      AND s.firing_retry_at IS NULL) AS next_run_at,
                   (SELECT min(greatest(s.firing_retry_at, s.next_run_at))
                    FROM tickwork.schedules s
                    WHERE s.namespace = offered.namespace AND s.enabled AND NOT s.suspended
                      AND s.firing_retry_at IS NOT NULL) AS retry_at
        ) AS first);

-- name: schedule_upcoming
-- Schedules of the offered namespaces due before a horizon (the firing loop parses their
-- definitions ahead of time, while it would otherwise sleep); set-aside ones are left out.
SELECT soon.namespace, soon.name, soon.revision
FROM unnest(%(namespaces)b::text[]) AS offered(namespace)
CROSS JOIN LATERAL (
    SELECT namespace, name, revision
    FROM tickwork.schedules s
    WHERE s.namespace = offered.namespace
      AND s.enabled AND NOT s.suspended
      AND s.next_run_at <= %(before)s
      AND s.firing_retry_at IS NULL
    ORDER BY s.next_run_at
    LIMIT %(limit)s
) AS soon;

-- name: schedule_lock_one
-- One schedule, locked (fire_schedule, backfill, trigger).
SELECT revision, enabled, spec, state
FROM tickwork.schedules
WHERE namespace = %(namespace)s AND name = %(name)s
FOR UPDATE;

-- name: schedule_record_job
-- A job was created for this schedule outside a firing pass (fire_schedule, trigger).
UPDATE tickwork.schedules
SET last_job_id = %(job_id)s,
    last_job_status = NULL,
    last_occurrence_at = CASE
        WHEN %(occurrence_at)s::timestamptz IS NULL THEN last_occurrence_at
        ELSE greatest(last_occurrence_at, %(occurrence_at)s::timestamptz) END
WHERE namespace = %(namespace)s AND name = %(name)s;

-- name: schedule_jobs_succeeded
-- The worker's completion write, for the succeeded jobs among those given: each schedule's last
-- success and status, its FixedDelay next run, and its carried state (the newest job's
-- non-null return value). Schedule rows are locked in key order, so concurrent completions
-- cannot deadlock on them.
WITH finished AS (
    SELECT j.id, j.schedule_namespace AS namespace, j.schedule_name AS name,
           j.occurrence_at, j.finished_at, r.state
    FROM tickwork.jobs j
    JOIN unnest(%(ids)b::bigint[], %(states)b::jsonb[]) AS r(id, state) ON r.id = j.id
    WHERE j.status = 'succeeded' AND j.schedule_name IS NOT NULL
),
per_schedule AS (
    SELECT namespace, name,
           max(finished_at) AS finished_at,
           array_agg(id) AS ids,
           bool_or(occurrence_at IS NOT NULL) AS timetable_job,
           (array_agg(state ORDER BY id DESC) FILTER (WHERE state IS NOT NULL))[1] AS state,
           max(id) FILTER (WHERE state IS NOT NULL) AS state_job_id
    FROM finished
    GROUP BY namespace, name
),
locked AS MATERIALIZED (
    SELECT s.namespace, s.name
    FROM tickwork.schedules s
    JOIN per_schedule p ON s.namespace = p.namespace AND s.name = p.name
    ORDER BY s.namespace, s.name
    FOR UPDATE OF s
)
UPDATE tickwork.schedules s
SET last_success_at = greatest(s.last_success_at, p.finished_at),
    last_job_status = CASE WHEN s.last_job_id = ANY(p.ids) THEN 'succeeded'
                           ELSE s.last_job_status END,
    next_run_at = CASE WHEN s.fixed_delay IS NOT NULL AND s.next_run_at IS NULL AND s.enabled
                            AND p.timetable_job
                       THEN p.finished_at + s.fixed_delay
                       ELSE s.next_run_at END,
    state = CASE WHEN p.state_job_id > coalesce(s.state_job_id, 0) THEN p.state
                 ELSE s.state END,
    state_job_id = greatest(s.state_job_id, p.state_job_id)
FROM per_schedule p
JOIN locked l ON l.namespace = p.namespace AND l.name = p.name
WHERE s.namespace = p.namespace AND s.name = p.name
RETURNING CASE WHEN s.fixed_delay IS NOT NULL
               THEN pg_notify('tickwork_schedules', s.namespace) END;

-- name: schedule_list
SELECT s.namespace, s.name, s.revision, s.enabled, s.suspended,
       s.spec ->> 'schedule', s.spec ->> 'every', s.spec ->> 'timeZone',
       s.next_run_at, s.last_occurrence_at, s.last_job_id,
       coalesce(j.status, s.last_job_status), s.last_success_at, s.skipped_occurrences,
       n.owner, s.spec, s.state, s.created_at, s.updated_at,
       s.firing_error, s.firing_failures, s.firing_retry_at
FROM tickwork.schedules s
JOIN tickwork.schedule_namespaces n ON n.namespace = s.namespace
LEFT JOIN tickwork.jobs j ON j.id = s.last_job_id
WHERE (%(namespace)s::text IS NULL OR s.namespace = %(namespace)s)
  AND (%(name)s::text IS NULL OR s.name = %(name)s)
ORDER BY s.namespace, s.name;

-- name: schedule_open_job_list
-- The operator's status: pending and running jobs of the schedules of some namespaces.
SELECT j.schedule_namespace, j.schedule_name, j.id, j.status, j.occurrence_at
FROM tickwork.jobs j
WHERE j.status IN ('available', 'running')
  AND j.schedule_namespace = ANY(%(namespaces)b::text[])
ORDER BY j.schedule_namespace, j.schedule_name, j.id
LIMIT %(limit)s;
