-- One place records what the jobs of a schedule ended as, whoever ended them (a worker's batch
-- of successes, a failure on the last attempt, a stop request honoured, lease recovery, an
-- operator, the Replace policy): the statement-level trigger jobs_schedule_ended. Per UPDATE
-- statement on tickwork.jobs, for the schedule jobs whose status became succeeded, dead or
-- cancelled, it sets each schedule's last job status and last success, a FixedDelay
-- schedule's next run (it waits for its job), and its carried state: the newest succeeded
-- job's non-null return value, which the worker's completion write stores in jobs.result.
-- The schedule rows of a whole statement are locked in key order, so concurrent batches
-- cannot deadlock on them. Replaces the row trigger of 0002 (dead and cancelled jobs only)
-- and the worker's separate success write (query schedule_jobs_succeeded).
ALTER TABLE tickwork.jobs ADD COLUMN result jsonb;

DROP TRIGGER jobs_schedule_ended ON tickwork.jobs;
DROP FUNCTION tickwork.schedule_job_ended();

CREATE FUNCTION tickwork.schedule_jobs_ended() RETURNS trigger
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
        )
        SELECT DISTINCT namespace FROM updated WHERE fixed_delay
    LOOP
        -- Wake the firing workers of the namespace: a FixedDelay schedule may be due.
        PERFORM pg_notify('tickwork_schedules', delayed);
    END LOOP;
    RETURN NULL;
END;
$$;

CREATE TRIGGER jobs_schedule_ended
    AFTER UPDATE ON tickwork.jobs
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT
    EXECUTE FUNCTION tickwork.schedule_jobs_ended();
