-- The fleet gauges, sampled by the worker that claims the sample_gauges duty. Each branch
-- reads one status through its own index (jobs_claim_idx, jobs_lease_idx, jobs_status_id_idx),
-- so the cost follows the open and dead jobs, never the finished ones kept for retention.

-- name: gauge_jobs
-- Per queue and status: how many jobs, and for available ones the age of the oldest due one.
SELECT queue, 'available' AS status, count(*),
       coalesce(extract(epoch FROM coalesce(%(now)s, now())
                      - min(run_at) FILTER (WHERE run_at <= coalesce(%(now)s, now()))), 0)::float8
FROM tickwork.jobs
WHERE status = 'available'
GROUP BY queue
UNION ALL
SELECT queue, 'running', count(*), 0
FROM tickwork.jobs
WHERE status = 'running'
GROUP BY queue
UNION ALL
SELECT queue, 'dead', count(*), 0
FROM tickwork.jobs
WHERE status = 'dead'
GROUP BY queue;

-- name: gauge_schedules
-- Per namespace: schedules by state, those more than %(overdue_seconds)s late, and the live
-- workers offering it (seen within %(ttl_seconds)s).
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
SELECT c.namespace, c.enabled, c.suspended, c.disabled, c.overdue,
       (SELECT count(*) FROM tickwork.workers w
        WHERE c.namespace = ANY(w.namespaces)
          AND w.last_seen_at >= coalesce(%(now)s, now()) - make_interval(secs => %(ttl_seconds)s))
FROM counts c;

-- name: gauge_workers
-- Live workers (seen within %(ttl_seconds)s), and the instant of the sample.
SELECT count(*), coalesce(%(now)s, now())
FROM tickwork.workers
WHERE last_seen_at >= coalesce(%(now)s, now()) - make_interval(secs => %(ttl_seconds)s);

-- name: gauge_orphaned_jobs
-- Jobs of kinds no live worker registers (seen within %(ttl_seconds)s): available, running,
-- and dead with their on_dead hook pending, per kind and status.
SELECT kind, status, count(*)
FROM tickwork.jobs
WHERE status IN ('available', 'running') OR on_dead_pending
GROUP BY kind, status
HAVING kind NOT IN (
    SELECT unnest(kinds) FROM tickwork.workers
    WHERE last_seen_at >= coalesce(%(now)s, now()) - make_interval(secs => %(ttl_seconds)s));
