-- Small workflows (issue 34, item 5; docs/workflows.md): a job may wait for other jobs.
--
-- A job enqueued with after=[ids] whose parents have not all succeeded is inserted 'waiting',
-- a status the claim never reads (it claims 'available' jobs only), with parents_left: how
-- many of its parents had not succeeded when it was enqueued. Its edges are rows of
-- tickwork.job_dependencies, kept after they are resolved (the console draws a run's graph
-- from them).
--
-- One place resolves them, whoever ends a parent (a worker's batch of successes, a failure
-- on the last attempt, lease recovery, an operator's cancel, Replace, pruning): the
-- statement-level trigger jobs_release_dependents, like jobs_schedule_ended (0009). Per UPDATE
-- statement on tickwork.jobs, for the jobs whose status became succeeded, dead or cancelled,
-- it locks their waiting dependents in id order (so concurrent completions cannot deadlock on
-- them) and, in the same transaction as the parent's end: subtracts the parents that
-- succeeded from parents_left, making a dependent 'available' when none is left; cancels a
-- dependent one of whose parents ended dead or cancelled, naming that parent in last_error.
-- Each dependent's row lock serialises two parents ending at once in two transactions: the
-- second decrement reads the first's committed value, so a dependent is released exactly once.
-- A cancelled dependent is itself a job that ended: the same trigger cancels its own
-- dependents in turn.
--
-- Expand-only: a new status value, a nullable column, new tables, a new trigger.
ALTER TYPE tickwork.job_status ADD VALUE IF NOT EXISTS 'waiting';

-- The check is NOT VALID: every existing row has NULL, and validating would scan the table
-- under the column's ACCESS EXCLUSIVE lock. New and updated rows are checked all the same.
ALTER TABLE tickwork.jobs ADD COLUMN parents_left integer;
ALTER TABLE tickwork.jobs
    ADD CONSTRAINT jobs_parents_left_check CHECK (parents_left >= 0) NOT VALID;

CREATE TABLE tickwork.job_dependencies (
    job_id     bigint NOT NULL REFERENCES tickwork.jobs (id) ON DELETE CASCADE,
    parent_id  bigint NOT NULL REFERENCES tickwork.jobs (id) ON DELETE CASCADE,
    PRIMARY KEY (job_id, parent_id),
    CHECK (job_id <> parent_id)
);

-- A parent's dependents (the trigger; retention's cascade).
CREATE INDEX job_dependencies_parent_idx ON tickwork.job_dependencies (parent_id);

-- The jobs a task spawned (job.spawn), by the spawning job and the call's key: a retried
-- attempt that spawns again under the same key gets the first attempt's jobs, not new ones.
CREATE TABLE tickwork.job_spawns (
    job_id  bigint   NOT NULL REFERENCES tickwork.jobs (id) ON DELETE CASCADE,
    key     text     NOT NULL,
    ids     bigint[] NOT NULL,
    PRIMARY KEY (job_id, key)
);

CREATE FUNCTION tickwork.release_dependents() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    q text;
BEGIN
    -- Claims and heartbeats leave every job running; most ended jobs have no dependents.
    IF NOT EXISTS (
        SELECT 1 FROM new_rows n
        WHERE n.status::text IN ('succeeded', 'dead', 'cancelled')
          AND EXISTS (SELECT 1 FROM tickwork.job_dependencies d WHERE d.parent_id = n.id)
    ) THEN
        RETURN NULL;
    END IF;
    FOR q IN
        WITH ended AS (
            SELECT n.id, n.status::text AS status, coalesce(n.finished_at, now()) AS finished_at
            FROM new_rows n
            JOIN old_rows o ON o.id = n.id
            WHERE n.status::text IN ('succeeded', 'dead', 'cancelled')
              AND o.status IS DISTINCT FROM n.status
        ),
        per_job AS (
            SELECT d.job_id,
                   count(*) FILTER (WHERE e.status = 'succeeded') AS succeeded,
                   max(e.finished_at) AS finished_at,
                   (array_agg(e.id || ' ended ' || e.status ORDER BY e.id)
                        FILTER (WHERE e.status <> 'succeeded'))[1] AS failed
            FROM ended e
            JOIN tickwork.job_dependencies d ON d.parent_id = e.id
            GROUP BY d.job_id
        ),
        locked AS MATERIALIZED (
            SELECT j.id
            FROM tickwork.jobs j
            JOIN per_job p ON p.job_id = j.id
            WHERE j.status::text = 'waiting'
            ORDER BY j.id
            FOR UPDATE OF j
        ),
        released AS (
            UPDATE tickwork.jobs j
            SET parents_left = j.parents_left - p.succeeded,
                status = CASE WHEN p.failed IS NOT NULL THEN 'cancelled'
                              WHEN j.parents_left - p.succeeded = 0 THEN 'available'
                              ELSE j.status END,
                run_at = CASE WHEN p.failed IS NULL AND j.parents_left - p.succeeded = 0
                              THEN greatest(j.run_at, p.finished_at) ELSE j.run_at END,
                finished_at = CASE WHEN p.failed IS NOT NULL THEN p.finished_at END,
                last_error = CASE WHEN p.failed IS NOT NULL
                                  THEN 'cancelled: parent job ' || p.failed ELSE j.last_error END,
                version = j.version + 1
            FROM per_job p
            JOIN locked l ON l.id = p.job_id
            WHERE j.id = p.job_id AND j.status::text = 'waiting'
            RETURNING j.queue, j.status::text AS status, j.run_at
        )
        SELECT DISTINCT r.queue FROM released r WHERE r.status = 'available' AND r.run_at <= now()
    LOOP
        -- Wake the workers of the queue: a released job is due.
        PERFORM pg_notify('tickwork_jobs', q);
    END LOOP;
    RETURN NULL;
END;
$$;

CREATE TRIGGER jobs_release_dependents
    AFTER UPDATE ON tickwork.jobs
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT
    EXECUTE FUNCTION tickwork.release_dependents();
