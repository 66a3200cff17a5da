-- tickwork.job_counts (migration 0017): how jobs ended, per minute, schedule namespace,
-- schedule, queue, kind, outcome and shard (the writing connection), written by the trigger
-- jobs_counted. Readers sum the shards. '' stands for "no schedule" in the key columns.
-- %(scope)s is a console reader's schedule namespaces (NULL: all).

-- name: job_counts_activity
-- The charts: per step of the window from %(since)s (slot 0 is the oldest; only steps with
-- any), the jobs that ended by outcome and the failed attempts, with the start lag (occurrence
-- to start, seconds) of the scheduled jobs that ended: mean and worst. A step holds the
-- minutes that start in it; one range of the primary key (minute first).
SELECT floor(extract(epoch FROM c.minute - %(since)s) / %(step_seconds)s)::int AS slot,
       coalesce(sum(c.jobs) FILTER (WHERE c.outcome = 'succeeded'), 0)::bigint AS succeeded,
       coalesce(sum(c.jobs) FILTER (WHERE c.outcome = 'failed'), 0)::bigint AS failed,
       coalesce(sum(c.jobs) FILTER (WHERE c.outcome = 'dead'), 0)::bigint AS dead,
       coalesce(sum(c.jobs) FILTER (WHERE c.outcome = 'cancelled'), 0)::bigint AS cancelled,
       (sum(c.lag_seconds) FILTER (WHERE c.outcome <> 'failed')
        / nullif(sum(c.lagged) FILTER (WHERE c.outcome <> 'failed'), 0))::float8 AS mean_lag,
       max(c.max_lag_seconds) FILTER (WHERE c.outcome <> 'failed')::float8 AS max_lag
FROM tickwork.job_counts c
WHERE c.minute >= %(since)s
  AND c.minute < %(since)s::timestamptz + make_interval(secs => %(window_seconds)s)
  AND (%(queue)s::text IS NULL OR c.queue = %(queue)s)
  AND (%(namespace)s::text IS NULL OR c.schedule_namespace = %(namespace)s)
  AND (%(schedule)s::text IS NULL OR c.schedule_name = %(schedule)s)
  AND (%(scope)s::text[] IS NULL OR c.schedule_namespace = ANY (%(scope)s::text[]))
GROUP BY 1
ORDER BY 1;

-- name: job_counts_of_schedules
-- The counts of some schedules (of all the table keeps: --stats-retention-seconds): jobs ended
-- by outcome, attempts failed (and retried), the run time of the ended jobs that ran, and the
-- first minute counted. Summed per schedule on job_counts_schedule_idx; a schedule with none
-- has zeros.
SELECT k.namespace, k.name,
       coalesce(sum(c.jobs) FILTER (WHERE c.outcome = 'succeeded'), 0)::bigint AS succeeded,
       coalesce(sum(c.jobs) FILTER (WHERE c.outcome = 'dead'), 0)::bigint AS dead,
       coalesce(sum(c.jobs) FILTER (WHERE c.outcome = 'cancelled'), 0)::bigint AS cancelled,
       coalesce(sum(c.jobs) FILTER (WHERE c.outcome = 'failed'), 0)::bigint AS failed_attempts,
       coalesce(sum(c.timed) FILTER (WHERE c.outcome <> 'failed'), 0)::bigint AS timed,
       coalesce(sum(c.run_seconds) FILTER (WHERE c.outcome <> 'failed'), 0)::float8
           AS run_seconds,
       min(c.minute) AS since
FROM unnest(%(namespaces)s::text[], %(names)s::text[]) AS k(namespace, name)
LEFT JOIN tickwork.job_counts c
  ON c.schedule_namespace = k.namespace AND c.schedule_name = k.name AND c.schedule_name <> ''
GROUP BY k.namespace, k.name
ORDER BY k.namespace, k.name;

-- name: job_counts_delete_old
-- Retention: delete one batch of the counts of minutes older than the stats retention, oldest
-- first (the primary key's first column is the minute).
WITH old AS (
    SELECT ctid FROM tickwork.job_counts
    WHERE minute < coalesce(%(now)s, now()) - make_interval(secs => %(age_seconds)s)
    ORDER BY minute
    LIMIT %(limit)s
)
DELETE FROM tickwork.job_counts c USING old WHERE c.ctid = old.ctid
RETURNING c.minute;

-- name: job_counts_compact
-- Retention: the counts older than %(age_seconds)s, of finer periods or of several shards, are
-- merged into one row per %(unit)s (hour, day; UTC) and group, under shard 0 (which no
-- connection writes: a pid is never 0), a batch of the oldest at a time. Writers only add to
-- the current minute, so no writer waits for this. A period split between two batches is
-- merged into its row by the second. Returns how many rows were merged away.
WITH old AS (
    SELECT ctid FROM tickwork.job_counts
    WHERE minute < coalesce(%(now)s, now()) - make_interval(secs => %(age_seconds)s)
      AND (shard <> 0 OR minute <> date_trunc(%(unit)s, minute, 'UTC'))
    ORDER BY minute
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
moved AS (
    DELETE FROM tickwork.job_counts c USING old WHERE c.ctid = old.ctid
    RETURNING c.minute, c.schedule_namespace, c.schedule_name, c.queue, c.kind, c.outcome,
              c.jobs, c.timed, c.run_seconds, c.lagged, c.lag_seconds, c.max_lag_seconds
),
merged AS (
    INSERT INTO tickwork.job_counts AS c
        (minute, schedule_namespace, schedule_name, queue, kind, outcome, shard,
         jobs, timed, run_seconds, lagged, lag_seconds, max_lag_seconds)
    SELECT date_trunc(%(unit)s, minute, 'UTC'), schedule_namespace, schedule_name, queue, kind,
           outcome, 0, sum(jobs), sum(timed), sum(run_seconds), sum(lagged), sum(lag_seconds),
           max(max_lag_seconds)
    FROM moved
    GROUP BY 1, 2, 3, 4, 5, 6
    ON CONFLICT (minute, schedule_namespace, schedule_name, queue, kind, outcome, shard)
    DO UPDATE SET jobs = c.jobs + excluded.jobs,
                  timed = c.timed + excluded.timed,
                  run_seconds = c.run_seconds + excluded.run_seconds,
                  lagged = c.lagged + excluded.lagged,
                  lag_seconds = c.lag_seconds + excluded.lag_seconds,
                  max_lag_seconds = greatest(c.max_lag_seconds, excluded.max_lag_seconds)
)
SELECT count(*) AS moved FROM moved;
