-- Counts that survive history limits and retention: tickwork.job_counts, a rollup of how jobs
-- ended (and of the attempts that failed and were retried), per minute, schedule namespace,
-- schedule, queue, kind and outcome, with their run and start-lag durations. Retention and the
-- schedules' history limits delete job rows; the console's charts and totals and
-- `tickwork schedules` count from here instead, which retention keeps for
-- --stats-retention-seconds (90 days by default).
--
-- Written by the statement-level trigger jobs_counted, in the transaction (and statement) that
-- ends the jobs, whoever ends them: a worker's batch of successes, a failure (retried or dead),
-- a stop request honoured, lease recovery, an operator's cancel, the Replace policy, a sync's
-- pruning. One upsert per statement, aggregated over the statement's jobs.
--
-- Retention merges what ages (per hour after 6 hours, per day after 7 days, under shard 0), so
-- "minute" is the start of a minute, hour or day, and a schedule's totals read a few hundred
-- rows per outcome, however often it runs.
--
-- No hot row: the key ends with shard, the backend's pid. A completion batch adds to the rows
-- of its own connection, which no other transaction writes while it runs (a backend runs one
-- transaction at a time), so concurrent batches of the fleet never wait for each other here;
-- readers sum the shards. A minute holds at most one row per group and connection that ended
-- jobs in it.
--
-- A new table and trigger only: tickwork.jobs is neither rewritten nor locked for longer than
-- the CREATE TRIGGER takes. Jobs that ended before this migration are not counted.
CREATE TABLE tickwork.job_counts (
    minute             timestamptz NOT NULL,
    schedule_namespace text        NOT NULL,  -- '' : a job enqueued outside any schedule
    schedule_name      text        NOT NULL,  -- '' : idem
    queue              text        NOT NULL,
    kind               text        NOT NULL,
    outcome            text        NOT NULL
        CHECK (outcome IN ('succeeded', 'failed', 'dead', 'cancelled')),
    shard              integer     NOT NULL,
    jobs               bigint      NOT NULL,  -- ended (failed: attempts failed and retried)
    timed              bigint      NOT NULL,  -- of them, those that ended running
    run_seconds        float8      NOT NULL,  -- their summed run time (start to end)
    lagged             bigint      NOT NULL,  -- of them, fired for an occurrence and started
    lag_seconds        float8      NOT NULL,  -- their summed start lag (occurrence to start)
    max_lag_seconds    float8,
    PRIMARY KEY (minute, schedule_namespace, schedule_name, queue, kind, outcome, shard)
) WITH (fillfactor = 70);  -- room for the upserts' new versions on their page (HOT)

-- A schedule's counts (its totals, its page's chart).
CREATE INDEX job_counts_schedule_idx
    ON tickwork.job_counts (schedule_namespace, schedule_name, minute)
    WHERE schedule_name <> '';

-- outcome: succeeded, dead or cancelled when the status became that; failed when a running job
-- became available again with its attempt counted (a retry after a failure, a lease that ran
-- out). A claimed job handed back unstarted (its attempt uncounted) and an operator's retry of
-- a dead job are no outcome. A retried attempt has no end time of its own: it is counted at the
-- statement's time (the database's clock).
CREATE FUNCTION tickwork.jobs_counted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- Claims and heartbeats leave every job running: nothing to join.
    IF NOT EXISTS (SELECT 1 FROM new_rows WHERE status::text <> 'running') THEN
        RETURN NULL;
    END IF;
    -- Grouped first, converted after: durations are summed as intervals and turned into
    -- seconds once per group (date_part on each job cost a third more; extract, numeric, more).
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
               OR (n.status = 'available' AND o.status = 'running' AND n.attempt = o.attempt))
        GROUP BY 1, 2, 3, 4, 5, 6
    ) AS g
    ON CONFLICT (minute, schedule_namespace, schedule_name, queue, kind, outcome, shard)
    DO UPDATE SET jobs = c.jobs + excluded.jobs,
                  timed = c.timed + excluded.timed,
                  run_seconds = c.run_seconds + excluded.run_seconds,
                  lagged = c.lagged + excluded.lagged,
                  lag_seconds = c.lag_seconds + excluded.lag_seconds,
                  max_lag_seconds = greatest(c.max_lag_seconds, excluded.max_lag_seconds);
    RETURN NULL;
END;
$$;

CREATE TRIGGER jobs_counted
    AFTER UPDATE ON tickwork.jobs
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT
    EXECUTE FUNCTION tickwork.jobs_counted();
