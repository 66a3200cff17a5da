-- Small workflows (docs/workflows.md, migration 0027): jobs that wait for other jobs. The
-- edges are rows of tickwork.job_dependencies; a waiting job is released or cancelled by the
-- trigger jobs_ended (migration 0028) when its parents end. Mapped by tickwork.db.workflows.

-- name: workflow_lock_parents
-- The parents a new job is to wait for, of its own tenant only (the schedule namespace; NULL:
-- jobs enqueued from code), locked FOR SHARE in id order until the enqueue commits: a parent
-- cannot end between this read and the new job's insert, so either the parent's end sees the
-- new edge (its trigger runs after this transaction commits) or this read sees the parent's
-- end (it waits for that commit, then reads the ended row). A job of another tenant is never
-- locked or reported: it is as unknown as an id that does not exist.
SELECT j.id, j.status::text AS status
FROM tickwork.jobs j
WHERE j.id = ANY(%(ids)s::bigint[])
  AND j.schedule_namespace IS NOT DISTINCT FROM %(namespace)s::text
ORDER BY j.id
FOR SHARE OF j;

-- name: workflow_insert_jobs
-- Jobs of one kind, one per payload, that wait for %(after)s: inserted with the status the
-- caller decided from their parents' (waiting, available or cancelled), with their edges, in
-- one statement. Ids in payload order.
WITH inserted AS (
    INSERT INTO tickwork.jobs (
        kind, queue, payload, priority, run_at, max_attempts,
        retry_base_seconds, retry_rate, retry_max_seconds, timeout_seconds, concurrency_key,
        concurrency_limit, schedule_namespace, schedule_name, trace_context,
        status, parents_left, finished_at, last_error)
    SELECT %(kind)s, %(queue)s, p.payload, %(priority)s,
           coalesce(%(run_at)s, %(now)s, now()), %(max_attempts)s,
           %(retry_base)s, %(retry_rate)s, %(retry_max)s, %(timeout)s, %(concurrency_key)s,
           %(concurrency_limit)s, %(schedule_namespace)s, %(schedule_name)s,
           %(trace_context)s::jsonb, %(status)s::text::tickwork.job_status, %(parents_left)s,
           CASE WHEN %(status)s::text = 'cancelled' THEN coalesce(%(now)s, now()) END,
           %(last_error)s
    FROM unnest(%(payloads)s::jsonb[]) WITH ORDINALITY AS p(payload, n)
    ORDER BY p.n
    RETURNING id
),
edges AS (
    INSERT INTO tickwork.job_dependencies (job_id, parent_id)
    SELECT i.id, a.parent_id
    FROM inserted i
    CROSS JOIN unnest(%(after)s::bigint[]) AS a(parent_id)
)
SELECT id FROM inserted ORDER BY id;

-- name: workflow_graph_jobs
-- The jobs linked to %(id)s by edges, either way and at any distance (a run's whole graph),
-- of the job's own tenant only: breadth first from the job (itself first), which the LIMIT
-- stops early (a recursive UNION is read as it is produced, each job once).
WITH RECURSIVE linked(id) AS (
    SELECT %(id)s::bigint
    UNION
    SELECT CASE WHEN d.job_id = l.id THEN d.parent_id ELSE d.job_id END
    FROM linked l
    JOIN tickwork.job_dependencies d ON d.job_id = l.id OR d.parent_id = l.id
),
nearest AS (
    SELECT id, row_number() OVER () AS n FROM (SELECT id FROM linked LIMIT %(limit)s) AS f
)
SELECT j.id, j.kind, j.status::text AS status
FROM nearest n
JOIN tickwork.jobs j ON j.id = n.id
WHERE j.schedule_namespace IS NOT DISTINCT FROM %(namespace)s::text
ORDER BY n.n;

-- name: workflow_graph_edges
-- The edges between these jobs: (dependent, parent).
SELECT d.job_id, d.parent_id
FROM tickwork.job_dependencies d
WHERE d.job_id = ANY(%(ids)s::bigint[]) AND d.parent_id = ANY(%(ids)s::bigint[])
ORDER BY d.job_id, d.parent_id;

-- name: workflow_spawn_claim
-- Record that job %(job_id)s spawns under %(key)s; no row: it did before (an earlier attempt,
-- or a concurrent call that committed first), and workflow_spawned says which jobs it made.
INSERT INTO tickwork.job_spawns (job_id, key, ids)
VALUES (%(job_id)s, %(key)s, '{}')
ON CONFLICT (job_id, key) DO NOTHING
RETURNING job_id;

-- name: workflow_spawned
SELECT ids FROM tickwork.job_spawns WHERE job_id = %(job_id)s AND key = %(key)s;

-- name: workflow_spawn_record
UPDATE tickwork.job_spawns SET ids = %(ids)s::bigint[]
WHERE job_id = %(job_id)s AND key = %(key)s;
