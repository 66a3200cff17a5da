-- One statement trigger for the jobs that end (issue 33, item 1).
--
-- Every UPDATE of tickwork.jobs ran two statement-level AFTER UPDATE triggers with transition
-- tables, claims and heartbeats included, though only a statement that moves a job out of
-- 'running' (or out of 'waiting') has anything for them: jobs_counted (0017) and
-- jobs_schedule_ended (0009, 0011). Issue 34 needed two more parts on the same rows: releasing
-- the dependents of jobs that end (0027's job_dependencies) and counting the schedules' dead
-- streaks and deadlines' successes (0025's columns). All four are one trigger, jobs_ended,
-- whose function does them in this order: the counts, the dependents (whose cancellation is
-- itself an UPDATE of tickwork.jobs: this trigger runs for it, nested, before the parents'
-- schedules are written), the schedules' last status, then the dead streaks and the deadlines.
--
-- A statement that leaves every job running (a claim, a heartbeat) costs one scan of its new
-- rows and nothing else; one that ends jobs of no schedule, with no occurrence and no
-- dependent (the common batch of successes) costs that scan, one more that says which parts
-- have work, and the counts' upsert.
--
-- The functions of the two replaced triggers stay (expand-only: the previous release's schema
-- has them; no trigger calls them now): a later release drops them.
-- DROP TRIGGER takes an ACCESS EXCLUSIVE lock on tickwork.jobs, CREATE TRIGGER a SHARE ROW
-- EXCLUSIVE one, each without a scan: the migration waits for the statements running on the
-- table (at most the runner's lock time-out, then it is retried) and holds them up for the
-- moment it takes to commit. The two are dropped and the one created in one transaction, so
-- no statement runs with neither.

DROP TRIGGER jobs_counted ON tickwork.jobs;
DROP TRIGGER jobs_schedule_ended ON tickwork.jobs;

CREATE FUNCTION tickwork.jobs_ended() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    ended boolean;       -- a job became succeeded, dead or cancelled
    retried boolean;     -- a job became available (a failed attempt may be counted)
    scheduled boolean;   -- one of those that ended is a schedule's job
    occurrences boolean; -- one of those that succeeded or died has an occurrence
    q text;
    delayed text;
    streaks record;
    streak integer;
    threshold integer;
BEGIN
    -- Claims and heartbeats leave every job running: one scan, no join, nothing else.
    IF NOT EXISTS (SELECT 1 FROM new_rows WHERE status <> 'running') THEN
        RETURN NULL;
    END IF;
    SELECT coalesce(bool_or(status IN ('succeeded', 'dead', 'cancelled')), false),
           coalesce(bool_or(status = 'available'), false),
           coalesce(bool_or(schedule_name IS NOT NULL
                            AND status IN ('succeeded', 'dead', 'cancelled')), false),
           coalesce(bool_or(occurrence_at IS NOT NULL AND status IN ('succeeded', 'dead')),
                    false)
    INTO ended, retried, scheduled, occurrences
    FROM new_rows;

    -- 1. The counts (0017's jobs_counted). outcome: succeeded, dead or cancelled when the
    -- status became that; failed when a running job became available again with its attempt
    -- counted. Grouped first, converted after.
    IF ended OR retried THEN
        INSERT INTO tickwork.job_counts AS c
            (minute, schedule_namespace, schedule_name, queue, kind, outcome, shard,
             jobs, timed, run_seconds, lagged, lag_seconds, max_lag_seconds)
        SELECT g.minute, coalesce(g.namespace, ''), coalesce(g.name, ''), g.queue, g.kind,
               CASE WHEN g.status = 'available' THEN 'failed' ELSE g.status::text END,
               pg_backend_pid(), g.jobs, g.timed, coalesce(date_part('epoch', g.run), 0),
               g.lagged, coalesce(date_part('epoch', g.lag), 0), date_part('epoch', g.max_lag)
        FROM (
            SELECT date_trunc('minute', coalesce(n.finished_at, now())) AS minute,
                   n.schedule_namespace AS namespace, n.schedule_name AS name, n.queue, n.kind,
                   n.status, count(*) AS jobs,
                   count(*) FILTER (WHERE o.status = 'running') AS timed,
                   sum(coalesce(n.finished_at, now()) - n.started_at)
                       FILTER (WHERE o.status = 'running') AS run,
                   count(n.started_at - n.occurrence_at) AS lagged,
                   sum(n.started_at - n.occurrence_at) AS lag,
                   max(n.started_at - n.occurrence_at) AS max_lag
            FROM new_rows n
            JOIN old_rows o ON o.id = n.id
            WHERE o.status IS DISTINCT FROM n.status
              AND (n.status IN ('succeeded', 'dead', 'cancelled')
                   OR (n.status = 'available' AND o.status = 'running'
                       AND n.attempt = o.attempt))
            GROUP BY 1, 2, 3, 4, 5, 6
        ) AS g
        ON CONFLICT (minute, schedule_namespace, schedule_name, queue, kind, outcome, shard)
        DO UPDATE SET jobs = c.jobs + excluded.jobs,
                      timed = c.timed + excluded.timed,
                      run_seconds = c.run_seconds + excluded.run_seconds,
                      lagged = c.lagged + excluded.lagged,
                      lag_seconds = c.lag_seconds + excluded.lag_seconds,
                      max_lag_seconds = greatest(c.max_lag_seconds, excluded.max_lag_seconds);
    END IF;
    IF NOT ended THEN
        RETURN NULL;
    END IF;

    -- 2. The dependents (0027's job_dependencies): locked in id order, released when no
    -- parent is left, cancelled when a parent ended dead or cancelled (an UPDATE of
    -- tickwork.jobs: this trigger runs for it in turn). Most ended jobs have none.
    IF EXISTS (
        SELECT 1 FROM new_rows n
        WHERE n.status IN ('succeeded', 'dead', 'cancelled')
          AND EXISTS (SELECT 1 FROM tickwork.job_dependencies d WHERE d.parent_id = n.id)
    ) THEN
        FOR q IN
            WITH ended AS (
                SELECT n.id, n.status::text AS status,
                       coalesce(n.finished_at, now()) AS finished_at
                FROM new_rows n
                JOIN old_rows o ON o.id = n.id
                WHERE n.status IN ('succeeded', 'dead', 'cancelled')
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
                WHERE j.status = 'waiting'
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
                                      THEN 'cancelled: parent job ' || p.failed
                                      ELSE j.last_error END,
                    version = j.version + 1
                FROM per_job p
                JOIN locked l ON l.id = p.job_id
                WHERE j.id = p.job_id AND j.status = 'waiting'
                RETURNING j.queue, j.status, j.run_at
            )
            SELECT DISTINCT r.queue FROM released r
            WHERE r.status = 'available' AND r.run_at <= now()
        LOOP
            -- Wake the workers of the queue: a released job is due.
            PERFORM pg_notify('tickwork_jobs', q);
        END LOOP;
    END IF;

    -- 3. The schedules' last status, last success, state and FixedDelay's next run (0011's
    -- schedule_jobs_ended): the schedule rows locked in key order, each queued for its
    -- history limits.
    IF scheduled THEN
        FOR delayed IN
            WITH ended AS (
                SELECT n.id, n.schedule_namespace AS namespace, n.schedule_name AS name,
                       n.status, n.occurrence_at, coalesce(n.finished_at, now()) AS finished_at,
                       n.result
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
                            FILTER (WHERE status = 'succeeded' AND result IS NOT NULL))[1]
                           AS state,
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
                        (SELECT e.status FROM ended e WHERE e.id = s.last_job_id),
                        s.last_job_status),
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
                INSERT INTO tickwork.schedule_history_pending AS h (namespace, name)
                SELECT namespace, name FROM locked ORDER BY namespace, name
                ON CONFLICT (namespace, name) DO UPDATE SET generation = h.generation + 1
            )
            SELECT DISTINCT namespace FROM updated WHERE fixed_delay
        LOOP
            -- Wake the firing workers of the namespace: a FixedDelay schedule may be due.
            PERFORM pg_notify('tickwork_schedules', delayed);
        END LOOP;
    END IF;
    IF NOT occurrences THEN
        RETURN NULL;
    END IF;

    -- 4. The deadlines and the dead streaks (0025's columns): a success recorded
    -- on its occurrence's deadline row; each schedule's consecutive dead occurrences counted in
    -- job id order (a success resets the count), the schedule suspended once at
    -- spec.suspendAfterFailures. The schedule rows are updated in key order, as step 3 locked
    -- them.
    UPDATE tickwork.occurrence_deadlines d
    SET succeeded_at = coalesce(n.finished_at, now())
    FROM new_rows n
    JOIN old_rows o ON o.id = n.id
    WHERE d.job_id = n.id AND n.status = 'succeeded' AND o.status IS DISTINCT FROM n.status
      AND n.occurrence_at IS NOT NULL;
    IF NOT scheduled THEN
        RETURN NULL;
    END IF;
    FOR streaks IN
        WITH occurrences AS (
            SELECT n.id, n.schedule_namespace AS namespace, n.schedule_name AS name, n.status,
                   coalesce(n.finished_at, now()) AS finished_at
            FROM new_rows n
            JOIN old_rows o ON o.id = n.id
            WHERE n.occurrence_at IS NOT NULL AND n.schedule_name IS NOT NULL
              AND n.status IN ('succeeded', 'dead') AND o.status IS DISTINCT FROM n.status
        ),
        per_schedule AS (
            SELECT namespace, name, max(id) FILTER (WHERE status = 'succeeded') AS success_id
            FROM occurrences
            GROUP BY namespace, name
        )
        SELECT p.namespace, p.name, p.success_id IS NOT NULL AS succeeded,
               count(e.id)::integer AS dead, min(e.id) AS first_dead, max(e.id) AS last_dead,
               max(e.finished_at) AS dead_at
        FROM per_schedule p
        LEFT JOIN occurrences e
            ON e.namespace = p.namespace AND e.name = p.name AND e.status = 'dead'
               AND e.id > coalesce(p.success_id, 0)
        GROUP BY p.namespace, p.name, p.success_id
        ORDER BY p.namespace, p.name
    LOOP
        UPDATE tickwork.schedules s
        SET dead_streak = CASE WHEN streaks.succeeded THEN streaks.dead
                               ELSE s.dead_streak + streaks.dead END,
            dead_streak_job_id = CASE WHEN streaks.dead = 0 THEN NULL
                                      WHEN streaks.succeeded OR s.dead_streak = 0
                                          THEN streaks.first_dead
                                      ELSE s.dead_streak_job_id END
        WHERE s.namespace = streaks.namespace AND s.name = streaks.name
          AND (streaks.dead > 0 OR s.dead_streak > 0)
        RETURNING s.dead_streak, (s.spec ->> 'suspendAfterFailures')::integer
            INTO streak, threshold;
        IF streaks.dead > 0 AND streak >= threshold THEN
            UPDATE tickwork.schedules s
            SET suspended = true,
                failures_suspended_at = streaks.dead_at,
                failures_suspended_job_id = streaks.last_dead
            WHERE s.namespace = streaks.namespace AND s.name = streaks.name
              AND s.enabled AND s.failures_suspended_at IS NULL;
        END IF;
    END LOOP;
    RETURN NULL;
END;
$$;

CREATE TRIGGER jobs_ended
    AFTER UPDATE ON tickwork.jobs
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT
    EXECUTE FUNCTION tickwork.jobs_ended();
