-- Queries on tickwork.jobs. Each block starts with "-- name: <name>" and is loaded by
-- tickwork.db.queries. Times come in as %(now)s: NULL means the database clock
-- (production); tests pass a fixed instant to drive time.

-- name: job_insert
-- One job; with a unique key, an open job of the same kind and key is returned instead.
WITH inserted AS (
    INSERT INTO tickwork.jobs (
        kind, queue, payload, priority, run_at, max_attempts,
        retry_base_seconds, retry_rate, retry_max_seconds, timeout_seconds,
        concurrency_key, unique_key, schedule_namespace, schedule_name, occurrence_at)
    VALUES (
        %(kind)s, %(queue)s, %(payload)s, %(priority)s,
        coalesce(%(run_at)s, %(now)s, now()), %(max_attempts)s,
        %(retry_base)s, %(retry_rate)s, %(retry_max)s, %(timeout)s,
        %(concurrency_key)s, %(unique_key)s, NULL, NULL, NULL)
    ON CONFLICT (kind, unique_key)
        WHERE unique_key IS NOT NULL AND status IN ('available', 'running')
        DO NOTHING
    RETURNING id
)
SELECT id, true AS created FROM inserted
UNION ALL
SELECT id, false FROM tickwork.jobs
WHERE %(unique_key)s::text IS NOT NULL
  AND kind = %(kind)s AND unique_key = %(unique_key)s
  AND status IN ('available', 'running')
LIMIT 1;

-- name: job_insert_many
-- Many jobs of one kind in one statement, ids returned in payload order.
INSERT INTO tickwork.jobs (
    kind, queue, payload, priority, run_at, max_attempts,
    retry_base_seconds, retry_rate, retry_max_seconds, timeout_seconds, concurrency_key)
SELECT %(kind)s, %(queue)s, p.payload, %(priority)s,
       coalesce(%(run_at)s, %(now)s, now()), %(max_attempts)s,
       %(retry_base)s, %(retry_rate)s, %(retry_max)s, %(timeout)s, %(concurrency_key)s
FROM unnest(%(payloads)s::jsonb[]) WITH ORDINALITY AS p(payload, n)
ORDER BY p.n
RETURNING id;

-- name: job_claim
-- Claim up to %(limit)s due jobs of the given kinds and queues in one statement. A job
-- enqueued without max_attempts takes the claiming worker's task setting for its kind.
-- Jobs whose concurrency key is busy (a job with that key is running, cancel requested or
-- not) are passed over inside the scan, so they never hold back the jobs behind them; of the
-- rest, one job per key per batch. The advisory lock keeps two claimers from taking the same
-- key at once, and the unique index jobs_concurrency_key_idx is the final guard.
WITH busy AS MATERIALIZED (
    SELECT concurrency_key FROM tickwork.jobs
    WHERE status = 'running' AND concurrency_key IS NOT NULL
),
locked AS (
    SELECT id, priority, run_at, concurrency_key
    FROM tickwork.jobs
    WHERE status = 'available'
      AND run_at <= coalesce(%(now)s, now())
      AND queue = ANY(%(queues)s::text[])
      AND kind = ANY(%(kinds)s::text[])
      AND (concurrency_key IS NULL OR concurrency_key NOT IN (SELECT concurrency_key FROM busy))
    ORDER BY priority DESC, run_at, id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
keyed AS (
    SELECT id, concurrency_key,
           row_number() OVER (PARTITION BY concurrency_key ORDER BY priority DESC, run_at, id) AS rank
    FROM locked
    WHERE concurrency_key IS NOT NULL
),
chosen AS (
    SELECT id FROM locked WHERE concurrency_key IS NULL
    UNION ALL
    SELECT id FROM keyed k
    WHERE k.rank = 1
      AND pg_try_advisory_xact_lock(hashtextextended('tickwork:' || k.concurrency_key, 0))
),
claimed AS (
    UPDATE tickwork.jobs j
    SET status = 'running',
        attempt = j.attempt + 1,
        max_attempts = coalesce(j.max_attempts, (
            SELECT task.max_attempts
            FROM unnest(%(kinds)s::text[], %(max_attempts)s::integer[]) AS task(kind, max_attempts)
            WHERE task.kind = j.kind)),
        picked_by = %(worker)s,
        started_at = coalesce(%(now)s, now()),
        lease_expires_at = coalesce(%(now)s, now()) + make_interval(secs => %(lease_seconds)s),
        version = j.version + 1
    WHERE j.id = ANY(ARRAY(SELECT id FROM chosen))
    RETURNING j.id, j.kind, j.queue, j.payload, j.priority, j.run_at, j.attempt, j.max_attempts,
              j.version, j.retry_base_seconds, j.retry_rate, j.retry_max_seconds,
              j.timeout_seconds, j.concurrency_key, j.unique_key, j.schedule_namespace,
              j.schedule_name, j.occurrence_at, j.lease_expires_at, j.started_at
)
-- Handed over in claim order (UPDATE ... RETURNING has none): the worker starts its batch
-- highest priority first.
SELECT * FROM claimed ORDER BY priority DESC, run_at, id;

-- name: job_adopt
-- Jobs running under this worker's name that it does not hold: a claim committed whose answer
-- a cut connection lost. Same columns as job_claim; the worker runs them (versions fence it).
SELECT j.id, j.kind, j.queue, j.payload, j.priority, j.run_at, j.attempt, j.max_attempts,
       j.version, j.retry_base_seconds, j.retry_rate, j.retry_max_seconds,
       j.timeout_seconds, j.concurrency_key, j.unique_key, j.schedule_namespace,
       j.schedule_name, j.occurrence_at, j.lease_expires_at, j.started_at
FROM tickwork.jobs j
WHERE j.picked_by = %(worker)s AND j.status = 'running' AND j.id <> ALL(%(held)s::bigint[])
ORDER BY j.priority DESC, j.run_at, j.id;

-- name: job_extend_leases
-- Heartbeat: extend the leases of the jobs this worker still owns, and say which of them were
-- asked to stop. A job missing from the result was recovered by another worker.
UPDATE tickwork.jobs j
SET lease_expires_at = coalesce(%(now)s, now()) + make_interval(secs => %(lease_seconds)s)
FROM unnest(%(ids)s::bigint[], %(versions)s::integer[]) AS owned(id, version)
WHERE j.id = owned.id AND j.version = owned.version AND j.status = 'running'
RETURNING j.id, j.cancel_requested_at IS NOT NULL;

-- name: job_complete_many
-- Mark jobs succeeded, fenced by version; returns the ids that were updated.
UPDATE tickwork.jobs j
SET status = 'succeeded',
    finished_at = coalesce(%(now)s, now()),
    lease_expires_at = NULL,
    version = j.version + 1
FROM unnest(%(ids)s::bigint[], %(versions)s::integer[]) AS done(id, version)
WHERE j.id = done.id AND j.version = done.version AND j.status = 'running'
RETURNING j.id;

-- name: job_retry_later
-- A failed attempt with attempts left: available again after the retry delay, or cancelled
-- when a cancellation was requested meanwhile (a job asked to stop never runs again).
UPDATE tickwork.jobs
SET status = CASE WHEN cancel_requested_at IS NULL THEN 'available'
                  ELSE 'cancelled' END::tickwork.job_status,
    run_at = CASE WHEN cancel_requested_at IS NULL
                  THEN coalesce(%(now)s, now()) + make_interval(secs => %(delay_seconds)s)
                  ELSE run_at END,
    finished_at = CASE WHEN cancel_requested_at IS NULL THEN NULL
                       ELSE coalesce(%(now)s, now()) END,
    lease_expires_at = NULL,
    last_error = %(error)s,
    version = version + 1
WHERE id = %(id)s AND version = %(version)s AND status = 'running'
RETURNING status;

-- name: job_mark_dead
-- A failed attempt with none left.
UPDATE tickwork.jobs
SET status = 'dead',
    finished_at = coalesce(%(now)s, now()),
    lease_expires_at = NULL,
    last_error = %(error)s,
    version = version + 1
WHERE id = %(id)s AND version = %(version)s AND status = 'running'
RETURNING id;

-- name: job_hand_back
-- Claimed but never started (shutdown): available again, the attempt not counted; cancelled
-- instead when a cancellation was requested.
UPDATE tickwork.jobs j
SET status = CASE WHEN j.cancel_requested_at IS NULL THEN 'available'
                  ELSE 'cancelled' END::tickwork.job_status,
    attempt = j.attempt - 1,
    picked_by = NULL,
    started_at = NULL,
    finished_at = CASE WHEN j.cancel_requested_at IS NULL THEN NULL
                       ELSE coalesce(%(now)s, now()) END,
    lease_expires_at = NULL,
    version = j.version + 1
FROM unnest(%(ids)s::bigint[], %(versions)s::integer[]) AS held(id, version)
WHERE j.id = held.id AND j.version = held.version AND j.status = 'running'
RETURNING j.id;

-- name: job_recover_expired
-- Leases that ran out (the worker died or hung), whatever the job's kind: cancelled when a
-- cancellation was requested; otherwise available again with attempts left (the attempt
-- counted), or dead on the last attempt with its on_dead hook pending (run later by a worker
-- that registers the kind). Divided between workers by SKIP LOCKED.
WITH expired AS (
    SELECT id,
           CASE WHEN cancel_requested_at IS NOT NULL THEN 'cancelled'
                WHEN attempt < max_attempts THEN 'available'
                ELSE 'dead' END::tickwork.job_status AS outcome
    FROM tickwork.jobs
    WHERE status = 'running'
      AND lease_expires_at < coalesce(%(now)s, now())
    ORDER BY lease_expires_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE tickwork.jobs j
SET status = e.outcome,
    run_at = CASE WHEN e.outcome = 'available' THEN coalesce(%(now)s, now()) ELSE j.run_at END,
    finished_at = CASE WHEN e.outcome = 'available' THEN NULL ELSE coalesce(%(now)s, now()) END,
    on_dead_pending = e.outcome = 'dead',
    last_error = CASE e.outcome
        WHEN 'cancelled' THEN 'cancelled: the lease expired before worker '
                              || coalesce(j.picked_by, '?') || ' recorded the cancellation'
        WHEN 'available' THEN 'lease expired: worker ' || coalesce(j.picked_by, '?')
                              || ' stopped heartbeating'
        ELSE 'lease expired on the last attempt: worker ' || coalesce(j.picked_by, '?')
             || ' stopped heartbeating' END,
    lease_expires_at = NULL,
    version = j.version + 1
FROM expired e
WHERE j.id = e.id
RETURNING j.id, j.queue, j.kind, j.picked_by, j.status, j.schedule_namespace;

-- name: job_lock_dead_hooks_pending
-- Dead jobs of kinds this worker registers whose on_dead hook has not run (lease recovery made
-- them dead, maybe in a worker that does not know the kind).
SELECT id, kind, queue, payload, priority, run_at, status, attempt, max_attempts, version,
       retry_base_seconds, retry_rate, retry_max_seconds, timeout_seconds, concurrency_key,
       unique_key, schedule_namespace, schedule_name, occurrence_at, picked_by,
       lease_expires_at, last_error, created_at, started_at, finished_at
FROM tickwork.jobs
WHERE on_dead_pending AND kind = ANY(%(kinds)s::text[])
ORDER BY id
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;

-- name: job_dead_hook_ran
-- The on_dead hook of a dead job ran (its error, if it failed, appended to last_error).
UPDATE tickwork.jobs
SET on_dead_pending = false,
    last_error = %(error)s
WHERE id = %(id)s AND on_dead_pending
RETURNING id;

-- name: job_cancel
-- Cancel a job. An available one is cancelled at once. A running one is asked to stop: it
-- stays running, holding its concurrency key, until its worker has stopped the task and
-- records the outcome, or its lease expires (then lease recovery cancels it). The trigger
-- jobs_notify_cancel_requested tells its worker; the request is not a state change and
-- leaves the version alone.
UPDATE tickwork.jobs
SET status = CASE WHEN status = 'available' THEN 'cancelled'
                  ELSE status END::tickwork.job_status,
    finished_at = CASE WHEN status = 'available' THEN coalesce(%(now)s, now()) END,
    cancel_requested_at = CASE WHEN status = 'running'
                               THEN coalesce(cancel_requested_at, %(now)s, now()) END,
    version = CASE WHEN status = 'available' THEN version + 1 ELSE version END
WHERE id = %(id)s AND status IN ('available', 'running')
RETURNING id;

-- name: job_record_cancelled
-- The worker stopped a job that was asked to stop (or never started it).
UPDATE tickwork.jobs
SET status = 'cancelled',
    finished_at = coalesce(%(now)s, now()),
    lease_expires_at = NULL,
    version = version + 1
WHERE id = %(id)s AND version = %(version)s AND status = 'running'
  AND cancel_requested_at IS NOT NULL
RETURNING id;

-- name: job_retry_dead
-- An operator sends a dead (or cancelled) job back to available with fresh attempts.
UPDATE tickwork.jobs
SET status = 'available',
    attempt = 0,
    run_at = coalesce(%(now)s, now()),
    finished_at = NULL,
    picked_by = NULL,
    cancel_requested_at = NULL,
    on_dead_pending = false,
    version = version + 1
WHERE id = %(id)s AND status IN ('dead', 'cancelled')
RETURNING id;

-- name: job_run_now
-- Release a delayed job immediately and wake the workers of its queue.
UPDATE tickwork.jobs
SET run_at = coalesce(%(now)s, now()),
    version = version + 1
WHERE id = %(id)s AND status = 'available'
RETURNING id, pg_notify('tickwork_jobs', queue);

-- name: job_get
SELECT id, kind, queue, payload, priority, run_at, status, attempt, max_attempts, version,
       retry_base_seconds, retry_rate, retry_max_seconds, timeout_seconds, concurrency_key,
       unique_key, schedule_namespace, schedule_name, occurrence_at, picked_by,
       lease_expires_at, last_error, created_at, started_at, finished_at
FROM tickwork.jobs
WHERE id = %(id)s;

-- name: job_list
SELECT id, kind, queue, payload, priority, run_at, status, attempt, max_attempts, version,
       retry_base_seconds, retry_rate, retry_max_seconds, timeout_seconds, concurrency_key,
       unique_key, schedule_namespace, schedule_name, occurrence_at, picked_by,
       lease_expires_at, last_error, created_at, started_at, finished_at
FROM tickwork.jobs
WHERE (%(status)s::tickwork.job_status IS NULL OR status = %(status)s::tickwork.job_status)
  AND (%(kind)s::text IS NULL OR kind = %(kind)s)
  AND (%(queue)s::text IS NULL OR queue = %(queue)s)
ORDER BY id DESC
LIMIT %(limit)s;

-- name: job_delete_finished
-- Retention: delete one batch of jobs that finished before the cutoff.
WITH old AS (
    SELECT id FROM tickwork.jobs
    WHERE status IN ('succeeded', 'dead', 'cancelled')
      AND finished_at < coalesce(%(now)s, now()) - make_interval(secs => %(age_seconds)s)
    ORDER BY finished_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
DELETE FROM tickwork.jobs j USING old WHERE j.id = old.id
RETURNING j.id;

-- name: clock_now
SELECT coalesce(%(now)s, now());
