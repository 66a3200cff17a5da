-- Queries on tickwork.schedules (those that also read tickwork.jobs are in jobs.sql).
-- Times come in as %(now)s: NULL means the database clock.

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
-- definition gets a fresh start: a firing error of the old one is cleared. A schedule that
-- spec.suspendAfterFailures suspended stays suspended unless spec.suspend changed (toggling it
-- resumes, and restarts the count of dead occurrences: docs/deadlines.md).
UPDATE tickwork.schedules s
SET revision = u.revision,
    enabled = true,
    suspended = u.suspended OR (s.failures_suspended_at IS NOT NULL
                                AND (s.spec -> 'suspend') IS NOT DISTINCT FROM (u.spec -> 'suspend')),
    dead_streak = CASE WHEN (s.spec -> 'suspend') IS DISTINCT FROM (u.spec -> 'suspend')
                       THEN 0 ELSE s.dead_streak END,
    dead_streak_job_id = CASE WHEN (s.spec -> 'suspend') IS DISTINCT FROM (u.spec -> 'suspend')
                              THEN NULL ELSE s.dead_streak_job_id END,
    failures_suspended_at = CASE WHEN (s.spec -> 'suspend') IS DISTINCT FROM (u.spec -> 'suspend')
                                 THEN NULL ELSE s.failures_suspended_at END,
    failures_suspended_job_id = CASE
        WHEN (s.spec -> 'suspend') IS DISTINCT FROM (u.spec -> 'suspend') THEN NULL
        ELSE s.failures_suspended_job_id END,
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
-- Firing: lock a batch of due schedules of the offered namespaces, the earliest first,
-- skipping those another worker holds. A namespace offered with a wait of w seconds has its
-- schedules claimed once they are w seconds overdue (another worker's share, see
-- maintenance/firing/shares.py). Each namespace is read through its own index range,
-- unlocked, from its earliest due schedule on. That search starts at the namespace's floor
-- when one is offered: the earliest due schedule a recent claim found there (maintenance/
-- firing/floors.py), below which only the index entries of schedules fired since are left,
-- dead until a vacuum: without it, each claim stepped over every one of them (at a million
-- due in a minute, up to 10,000 a namespace, 2,700 buffers of a claim's 6,500 and half its
-- time). A schedule waiting to retry a failed firing counts as due for the floor, so the floor
-- never passes one. Once marked dead, an entry is passed over in the index page (migration
-- 0031). The namespaces with any due share the %(candidates)s candidates evenly, so a claim
-- reads a few batches' worth however many namespaces are busy (100: 2,000 rows, not a batch
-- from each). The earliest %(limit)s candidates not held are locked, found again by the row
-- version the read saw (ctid: one page, not an index descent; FOR UPDATE rechecks a row
-- changed since). A schedule whose firing failed waits for its retry time. A paused namespace
-- (migration 0020) is not offered: its schedules are held as if suspended. spec_key names the
-- stored spec's content (migration 0016): schedules with equal specs share one parsed
-- definition. Each row comes with its namespace's earliest due at this claim (due_floor), the
-- floor of the next.
WITH offered AS MATERIALIZED (
    SELECT o.namespace, coalesce(%(now)s, now()) - make_interval(secs => o.wait) AS until,
           coalesce(o.floor, '-infinity') AS floor
    FROM unnest(%(namespaces)b::text[], %(waits)b::float8[], %(floors)b::timestamptz[])
         AS o(namespace, wait, floor)
    WHERE NOT EXISTS (SELECT FROM tickwork.pauses p  -- a paused namespace fires nothing
                      WHERE p.scope = 'namespace' AND p.name = o.namespace)
),
busy AS MATERIALIZED (
    SELECT offered.namespace, offered.until, head.next_run_at AS head
    FROM offered
    CROSS JOIN LATERAL (
        SELECT s.next_run_at
        FROM tickwork.schedules s
        WHERE s.namespace = offered.namespace
          AND s.enabled AND NOT s.suspended
          AND s.next_run_at >= offered.floor
          AND s.next_run_at <= offered.until
        ORDER BY s.next_run_at
        LIMIT 1
    ) AS head
),
share AS MATERIALIZED (
    SELECT ceil(%(candidates)s::float8 / greatest(count(*), 1))::integer AS per_namespace
    FROM busy
),
candidate AS MATERIALIZED (
    SELECT due.namespace, due.row_id, due.next_run_at, busy.head
    FROM busy
    CROSS JOIN LATERAL (
        SELECT namespace, ctid AS row_id, next_run_at
        FROM tickwork.schedules s
        WHERE s.namespace = busy.namespace
          AND s.next_run_at >= busy.head
          AND s.enabled AND NOT s.suspended
          AND s.next_run_at <= busy.until
          AND (s.firing_retry_at IS NULL OR s.firing_retry_at <= busy.until)
        ORDER BY s.next_run_at
        LIMIT (SELECT per_namespace FROM share)
    ) AS due
)
SELECT s.namespace, s.name, s.revision, s.next_run_at, s.missed_before, s.state,
       s.firing_failures AS failures, s.spec_key,
       coalesce(%(now)s, now()) AS now, c.head AS due_floor
FROM (SELECT * FROM candidate ORDER BY next_run_at) AS c
JOIN tickwork.schedules s ON s.ctid = c.row_id
WHERE s.enabled AND NOT s.suspended
  AND s.next_run_at <= coalesce(%(now)s, now())
  AND (s.firing_retry_at IS NULL OR s.firing_retry_at <= coalesce(%(now)s, now()))
ORDER BY c.next_run_at
LIMIT %(limit)s
FOR UPDATE OF s SKIP LOCKED;

-- name: schedule_specs
-- The stored specs of some schedules (definitions not in the firing cache yet).
SELECT s.namespace, s.name, s.revision, s.spec
FROM tickwork.schedules s
JOIN unnest(%(namespaces)b::text[], %(names)b::text[]) AS k(namespace, name)
  ON s.namespace = k.namespace AND s.name = k.name;

-- name: schedule_fire
-- Firing: the jobs of a batch of claimed schedules and their advance, one statement. The
-- schedules come as rows (namespace, name, the revision read at claim, their outcome); an
-- outcome is shared by the schedules that fire alike (same job fields but for the schedule's
-- name, same occurrences and next run), so a batch of schedules due together sends a few
-- outcomes, not a set of columns per job. An occurrence that already has a job is left alone
-- (ON CONFLICT: any number of workers may fire it). Each schedule moves to its next run,
-- fenced by its revision; a FixedDelay one whose job was created waits for that job's end (the
-- outcome's next run when created differs from the one when not), and a firing that worked
-- clears the error of an earlier one. Returns the jobs created by outcome and occurrence, and
-- the schedules no longer at their revision (none while the batch holds their locks).
WITH claimed AS MATERIALIZED (
    SELECT *
    FROM unnest(%(namespaces)b::text[], %(names)b::text[], %(revisions)b::integer[],
                %(outcomes)b::integer[]) WITH ORDINALITY
         AS c(namespace, name, revision, outcome, position)
),
outcome AS MATERIALIZED (
    SELECT *
    FROM unnest(%(kinds)b::text[], %(queues)b::text[], %(payloads)b::jsonb[],
                %(priorities)b::smallint[], %(max_attempts)b::integer[],
                %(retry_bases)b::double precision[], %(retry_rates)b::double precision[],
                %(retry_maxes)b::double precision[], %(timeouts)b::double precision[],
                %(concurrency_keys)b::text[], %(concurrency_limits)b::integer[]) WITH ORDINALITY
         AS o(kind, queue, payload, priority, max_attempts, retry_base, retry_rate, retry_max,
              timeout, concurrency_key, concurrency_limit, outcome)
),
occurrence AS MATERIALIZED (
    SELECT *
    FROM unnest(%(occurrence_outcomes)b::integer[], %(occurrences)b::timestamptz[],
                %(run_ats)b::timestamptz[]) AS j(outcome, occurrence_at, run_at)
),
created AS (
    INSERT INTO tickwork.jobs (
        kind, queue, payload, priority, run_at, max_attempts,
        retry_base_seconds, retry_rate, retry_max_seconds, timeout_seconds, concurrency_key,
        concurrency_limit, schedule_namespace, schedule_name, occurrence_at, trace_context)
    SELECT o.kind, o.queue, o.payload, o.priority, j.run_at, o.max_attempts,
           o.retry_base, o.retry_rate, o.retry_max, o.timeout, o.concurrency_key,
           o.concurrency_limit, c.namespace, c.name, j.occurrence_at, %(trace_context)b::jsonb
    FROM claimed c
    JOIN outcome o ON o.outcome = c.outcome
    JOIN occurrence j ON j.outcome = c.outcome
    ORDER BY c.position, j.occurrence_at  -- a schedule's ids follow its occurrences
    ON CONFLICT (schedule_namespace, schedule_name, occurrence_at)
        WHERE occurrence_at IS NOT NULL
        DO NOTHING
    RETURNING id, schedule_namespace, schedule_name, occurrence_at
),
fired AS (
    -- Each claimed schedule with its newest job created (the ids follow the occurrences).
    -- Grouped, not joined: the planner takes the arrays for 10 rows each, and a nested loop
    -- over 500 rows each way costs more than the rest of the statement.
    SELECT namespace, name, max(revision) AS revision, max(outcome) AS outcome,
           max(id) AS job_id, max(occurrence_at) AS occurrence_at
    FROM (SELECT namespace, name, revision, outcome, NULL::bigint AS id,
                 NULL::timestamptz AS occurrence_at
          FROM claimed
          UNION ALL
          SELECT schedule_namespace, schedule_name, NULL, NULL, id, occurrence_at
          FROM created) AS both_sides
    GROUP BY namespace, name
),
advanced AS (
    -- An outcome's fields by subscript (fixed-width arrays: no join to misjudge).
    UPDATE tickwork.schedules s
    SET next_run_at = CASE WHEN f.job_id IS NULL
                           THEN (%(next_run_ats)b::timestamptz[])[f.outcome]
                           ELSE (%(next_run_ats_created)b::timestamptz[])[f.outcome] END,
        missed_before = CASE WHEN f.job_id IS NULL
                             THEN (%(missed_befores)b::timestamptz[])[f.outcome]
                             ELSE (%(missed_befores_created)b::timestamptz[])[f.outcome] END,
        last_occurrence_at = coalesce(f.occurrence_at, s.last_occurrence_at),
        skipped_occurrences = s.skipped_occurrences + (%(skipped)b::bigint[])[f.outcome],
        last_job_id = coalesce(f.job_id, s.last_job_id),
        last_job_status = CASE WHEN f.job_id IS NULL THEN s.last_job_status END,
        firing_error = NULL,
        firing_failures = 0,
        firing_retry_at = NULL
    FROM fired f
    WHERE s.namespace = f.namespace AND s.name = f.name AND s.revision = f.revision
      AND s.enabled
    RETURNING s.namespace, s.name
)
SELECT c.outcome, j.occurrence_at, count(*)::integer AS jobs, NULL::text AS namespace,
       NULL::text AS name
FROM created j
JOIN claimed c ON c.namespace = j.schedule_namespace AND c.name = j.schedule_name
GROUP BY c.outcome, j.occurrence_at
UNION ALL
SELECT NULL, NULL, NULL, c.namespace, c.name
FROM claimed c
WHERE NOT EXISTS (SELECT FROM advanced a WHERE a.namespace = c.namespace AND a.name = c.name);

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
-- run of a schedule, or the retry of one whose firing failed: it is due no earlier). Paused
-- namespaces are left out (their resume wakes the loop).
SELECT coalesce(%(now)s, now()) AS now,
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
        ) AS first
        WHERE NOT EXISTS (SELECT FROM tickwork.pauses p
                          WHERE p.scope = 'namespace' AND p.name = offered.namespace))
           AS next_run_at;

-- name: schedule_upcoming
-- The specs of the offered namespaces' schedules due before a horizon (and after the horizon
-- of the last warming, when it covered everything up to it: the loop warms again every second
-- of a busy minute, and reading the next 30 s of a million schedules each time cost ~0.6 s
-- of the database and ~500,000 buffers), one schedule each (the
-- earliest due of those sharing a spec in a namespace), the earliest first across them all:
-- the firing loop parses them ahead of time, while it would otherwise sleep. Distinct, so
-- that a million schedules made from a few thousand specs warm every one of them, not the
-- cache's size of rows due first. A cron with hashed (H) fields is parsed per name: only the
-- schedule listed here is warmed. Set-aside ones are left out.
SELECT namespace, name, revision, spec_key
FROM (
    SELECT DISTINCT ON (soon.namespace, soon.spec_key)
           soon.namespace, soon.name, soon.revision, soon.spec_key, soon.next_run_at
    FROM unnest(%(namespaces)b::text[]) AS offered(namespace)
    CROSS JOIN LATERAL (
        SELECT namespace, name, revision, next_run_at, spec_key
        FROM tickwork.schedules s
        WHERE s.namespace = offered.namespace
          AND s.enabled AND NOT s.suspended
          AND s.next_run_at <= %(before)s
          AND s.next_run_at > coalesce(%(after)s::timestamptz, '-infinity')
          AND s.firing_retry_at IS NULL
        ORDER BY s.next_run_at
        LIMIT %(rows)s
    ) AS soon
    WHERE NOT EXISTS (SELECT FROM tickwork.pauses p
                      WHERE p.scope = 'namespace' AND p.name = offered.namespace)
    ORDER BY soon.namespace, soon.spec_key, soon.next_run_at
) AS first_of_each
ORDER BY next_run_at
LIMIT %(limit)s;

-- name: schedule_lock_one
-- One schedule, locked (fire_schedule, backfill, trigger).
SELECT revision, enabled, spec, state
FROM tickwork.schedules
WHERE namespace = %(namespace)s AND name = %(name)s
FOR UPDATE;

-- name: schedule_lock_snapshot
-- A schedule before an action, locked: its snapshot (the same fields as the "after" snapshot
-- of admin_audit_schedule).
SELECT jsonb_build_object('revision', revision, 'enabled', enabled, 'suspended', suspended,
                          'next_run_at', next_run_at, 'last_occurrence_at', last_occurrence_at,
                          'last_job_id', last_job_id, 'last_job_status', last_job_status)
           AS snapshot
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

-- name: schedule_gauge
-- Per namespace: schedules by state, those more than %(overdue_seconds)s late (none while the
-- namespace is paused), and the live workers offering it (seen within %(ttl_seconds)s).
WITH counts AS (
    SELECT namespace,
           count(*) FILTER (WHERE enabled AND NOT suspended) AS enabled,
           count(*) FILTER (WHERE enabled AND suspended) AS suspended,
           count(*) FILTER (WHERE NOT enabled) AS disabled,
           count(*) FILTER (
               WHERE enabled AND NOT suspended
                 AND next_run_at < coalesce(%(now)s, now())
                                   - make_interval(secs => %(overdue_seconds)s)) AS overdue
    FROM tickwork.schedules
    GROUP BY namespace
)
SELECT c.namespace, c.enabled, c.suspended, c.disabled,
       CASE WHEN EXISTS (SELECT FROM tickwork.pauses p  -- held on purpose: not overdue
                         WHERE p.scope = 'namespace' AND p.name = c.namespace)
            THEN 0 ELSE c.overdue END AS overdue,
       (SELECT count(*) FROM tickwork.workers w
        WHERE c.namespace = ANY(w.namespaces)
          AND w.last_seen_at >= coalesce(%(now)s, now()) - make_interval(secs => %(ttl_seconds)s))
           AS workers
FROM counts c;

-- name: schedule_resume_namespace
-- A schedule namespace resumed from a pause: as for a resumed suspend (schedules/sync.py),
-- every occurrence of its enabled, unsuspended schedules before now is a miss, which each
-- schedule's misfire policy decides about at its next firing. Only the schedules already due
-- change (the others missed nothing).
UPDATE tickwork.schedules
SET missed_before = coalesce(%(now)s, now())
WHERE namespace = %(namespace)s AND enabled AND NOT suspended
  AND next_run_at <= coalesce(%(now)s, now())
RETURNING name;
