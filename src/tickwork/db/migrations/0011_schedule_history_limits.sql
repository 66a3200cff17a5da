-- History limits (spec.successfulJobsHistoryLimit, spec.failedJobsHistoryLimit): retention
-- keeps the newest N succeeded and the newest M failed (dead or cancelled) finished jobs of
-- each schedule, on top of the age rule. A pass does not rank every schedule's history: it
-- trims only the schedules queued in schedule_history_pending, where a job of theirs ended
-- (the statement trigger jobs_schedule_ended, in the same transaction as the job's end) or
-- their limits changed (a sync) since the schedule was last trimmed.

-- The schedules retention has to trim. generation moves with every new reason to trim: a
-- retention statement deletes only the rows whose generation is the one its snapshot saw, so
-- a job that ended after that snapshot always leaves its schedule queued.
CREATE TABLE tickwork.schedule_history_pending (
    namespace   text   NOT NULL,
    name        text   NOT NULL,
    generation  bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (namespace, name)
);

-- Every schedule's history is trimmed once after the upgrade (to CronJob's defaults, 3 and
-- 1, where its stored spec has no limits).
INSERT INTO tickwork.schedule_history_pending (namespace, name)
SELECT namespace, name FROM tickwork.schedules;

-- A schedule's finished jobs by outcome, newest last: retention ranks a schedule's succeeded
-- and failed jobs on it, and the console's "last failure" (status = 'dead', newest
-- finished_at) reads it, replacing jobs_schedule_dead_idx (same leading columns, status one
-- more). Partial: open jobs and one-off jobs are not in it, so it costs one entry per
-- finished schedule job.
CREATE INDEX jobs_schedule_history_idx
    ON tickwork.jobs (schedule_namespace, schedule_name, status, finished_at, id)
    WHERE schedule_name IS NOT NULL AND status IN ('succeeded', 'dead', 'cancelled');

DROP INDEX tickwork.jobs_schedule_dead_idx;

-- The statement trigger of 0009, which also queues each schedule whose jobs ended. The rows
-- are queued after the schedule rows are locked in key order (the CTE locked), so two
-- statements cannot deadlock on them; a queued row a retention statement holds makes this
-- wait until that statement's transaction ends, then queue it anew.
CREATE OR REPLACE FUNCTION tickwork.schedule_jobs_ended() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    delayed text;
BEGIN
    FOR delayed IN
        WITH ended AS (
            SELECT n.id, n.schedule_namespace AS namespace, n.schedule_name AS name, n.status,
                   n.occurrence_at, coalesce(n.finished_at, now()) AS finished_at, n.result
            FROM new_rows n
            JOIN old_rows o ON o.id = n.id
            WHERE n.schedule_name IS NOT NULL
              AND n.status IN ('succeeded', 'dead', 'cancelled')
              AND o.status IS DISTINCT FROM n.status
        ),
        per_schedule AS (
            SELECT namespace, name,
                   max(finished_at) AS finished_at,
                   max(finished_at) FILTER (WHERE status = 'succeeded') AS succeeded_at,
                   bool_or(occurrence_at IS NOT NULL) AS timetable_job,
                   (array_agg(result ORDER BY id DESC)
                        FILTER (WHERE status = 'succeeded' AND result IS NOT NULL))[1] AS state,
                   max(id) FILTER (WHERE status = 'succeeded' AND result IS NOT NULL)
                       AS state_job_id
            FROM ended
            GROUP BY namespace, name
        ),
        locked AS MATERIALIZED (
            SELECT s.namespace, s.name
            FROM tickwork.schedules s
            JOIN per_schedule p ON s.namespace = p.namespace AND s.name = p.name
            ORDER BY s.namespace, s.name
            FOR UPDATE OF s
        ),
        updated AS (
            UPDATE tickwork.schedules s
            SET last_success_at = greatest(s.last_success_at, p.succeeded_at),
                last_job_status = coalesce(
                    (SELECT e.status FROM ended e WHERE e.id = s.last_job_id), s.last_job_status),
                next_run_at = CASE WHEN s.fixed_delay IS NOT NULL AND s.next_run_at IS NULL
                                        AND s.enabled AND p.timetable_job
                                   THEN p.finished_at + s.fixed_delay
                                   ELSE s.next_run_at END,
                state = CASE WHEN p.state_job_id > coalesce(s.state_job_id, 0) THEN p.state
                             ELSE s.state END,
                state_job_id = greatest(s.state_job_id, p.state_job_id)
            FROM per_schedule p
            JOIN locked l ON l.namespace = p.namespace AND l.name = p.name
            WHERE s.namespace = p.namespace AND s.name = p.name
            RETURNING s.namespace, s.fixed_delay IS NOT NULL AS fixed_delay
        ),
        queued AS (
            INSERT INTO tickwork.schedule_history_pending AS q (namespace, name)
            SELECT namespace, name FROM locked ORDER BY namespace, name
            ON CONFLICT (namespace, name) DO UPDATE SET generation = q.generation + 1
        )
        SELECT DISTINCT namespace FROM updated WHERE fixed_delay
    LOOP
        -- Wake the firing workers of the namespace: a FixedDelay schedule may be due.
        PERFORM pg_notify('tickwork_schedules', delayed);
    END LOOP;
    RETURN NULL;
END;
$$;

-- A sync that changes a schedule's limits queues it too (a smaller limit trims at once).
CREATE FUNCTION tickwork.schedule_history_limits_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO tickwork.schedule_history_pending AS q (namespace, name)
    VALUES (NEW.namespace, NEW.name)
    ON CONFLICT (namespace, name) DO UPDATE SET generation = q.generation + 1;
    RETURN NULL;
END;
$$;

CREATE TRIGGER schedules_history_limits_changed
    AFTER UPDATE OF spec ON tickwork.schedules
    FOR EACH ROW
    WHEN (OLD.spec -> 'successfulJobsHistoryLimit' IS DISTINCT FROM
              NEW.spec -> 'successfulJobsHistoryLimit'
          OR OLD.spec -> 'failedJobsHistoryLimit' IS DISTINCT FROM
              NEW.spec -> 'failedJobsHistoryLimit')
    EXECUTE FUNCTION tickwork.schedule_history_limits_changed();
