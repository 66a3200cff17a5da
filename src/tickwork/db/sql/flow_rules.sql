-- Queries on tickwork.flow_rules and tickwork.flow_starts (migration 0021): the concurrency
-- and rate limits of queues, kinds and schedule namespaces, and namespaces' weights. The claim
-- (job_claim_rules and job_claim in jobs.sql) reads them inside its own statements.

-- name: rule_upsert
-- Set a rule, replacing what the group had; returns it. A rule whose rate changed keeps its
-- starts (they are what the window counts).
INSERT INTO tickwork.flow_rules AS r
    (scope, name, max_running, rate, period_seconds, rate_key, weight, set_by, set_at)
VALUES (%(scope)s, %(name)s, %(max_running)s, %(rate)s, %(period_seconds)s, %(rate_key)s,
        %(weight)s, %(actor)s, coalesce(%(now)s, now()))
ON CONFLICT (scope, name) DO UPDATE
SET max_running = excluded.max_running, rate = excluded.rate,
    period_seconds = excluded.period_seconds, rate_key = excluded.rate_key,
    weight = excluded.weight, set_by = excluded.set_by, set_at = excluded.set_at
RETURNING r.scope, r.name, r.max_running, r.rate, r.period_seconds, r.rate_key, r.weight,
          r.set_by, r.set_at;

-- name: rule_delete
-- Remove a group's rule; returns it (no row: it had none).
DELETE FROM tickwork.flow_rules
WHERE scope = %(scope)s AND name = %(name)s
RETURNING scope, name, max_running, rate, period_seconds, rate_key, weight, set_by, set_at;

-- name: rule_get
-- One group's rule, by its key (no row: it has none).
SELECT scope, name, max_running, rate, period_seconds, rate_key, weight, set_by, set_at
FROM tickwork.flow_rules
WHERE scope = %(scope)s AND name = %(name)s;

-- name: rule_list
-- The rules of one scope (NULL: all), with the running jobs of each group and, for a rate,
-- the starts of its last period (all keys together).
SELECT r.scope, r.name, r.max_running, r.rate, r.period_seconds, r.rate_key, r.weight,
       r.set_by, r.set_at,
       (SELECT count(*) FROM tickwork.jobs j
        WHERE j.status = 'running'
          AND r.name = CASE r.scope WHEN 'queue' THEN j.queue WHEN 'kind' THEN j.kind
                                    ELSE j.schedule_namespace END) AS running,
       (SELECT coalesce(sum(s.starts), 0) FROM tickwork.flow_starts s
        WHERE s.rule_id = r.id
          AND s.started_at > coalesce(%(now)s, now()) - make_interval(secs => r.period_seconds))
           AS recent_starts
FROM tickwork.flow_rules r
WHERE %(scope)s::text IS NULL OR r.scope = %(scope)s
ORDER BY r.scope, r.name;

-- name: rule_lock_task_rules
-- Workers starting together write their tasks' kind rules one at a time (until the commit),
-- so a change is recorded once.
SELECT pg_advisory_xact_lock(hashtextextended('tickwork:task-rules', 0)) AS locked;

-- name: rule_held_jobs
-- The fleet gauge tickwork_fleet_jobs_held: per queue, the due waiting jobs that no claim
-- would take now, by the first reason that holds each: its queue is paused ('paused'), or a
-- concurrency limit has no room ('queue_limit', 'kind_limit', 'namespace_limit': max_running
-- of its queue, kind or schedule namespace reached, fleet-wide), or a rate does
-- ('rate_limit': a rate of its queue, kind or namespace used up for the last period; for a
-- keyed rate, for the job's value of the payload field). The rules' room is read without
-- their locks (a snapshot). Nothing held anywhere: no scan of the jobs at all (the one-time
-- filter); else one pass over the due waiting jobs, as tickwork_fleet_jobs counts them.
WITH rules AS MATERIALIZED (
    SELECT r.id, r.scope, r.name, r.max_running, r.rate, r.period_seconds, r.rate_key,
           CASE WHEN r.max_running IS NOT NULL THEN
               (SELECT count(*) FROM tickwork.jobs j
                WHERE j.status = 'running'
                  AND r.name = CASE r.scope WHEN 'queue' THEN j.queue WHEN 'kind' THEN j.kind
                                            ELSE j.schedule_namespace END) END AS running,
           CASE WHEN r.rate IS NOT NULL AND r.rate_key IS NULL THEN
               (SELECT coalesce(sum(s.starts), 0) FROM tickwork.flow_starts s
                WHERE s.rule_id = r.id
                  AND s.started_at > coalesce(%(now)s, now())
                                     - make_interval(secs => r.period_seconds)) END AS recent
    FROM tickwork.flow_rules r
    WHERE r.max_running IS NOT NULL OR r.rate IS NOT NULL
),
full_keys AS MATERIALIZED (  -- the values of keyed rates with no room left
    SELECT r.scope, r.name, r.rate_key, s.key
    FROM rules r
    JOIN tickwork.flow_starts s ON s.rule_id = r.id
    WHERE r.rate_key IS NOT NULL
      AND s.started_at > coalesce(%(now)s, now()) - make_interval(secs => r.period_seconds)
    GROUP BY r.id, r.scope, r.name, r.rate_key, r.rate, s.key
    HAVING sum(s.starts) >= r.rate
),
shut AS MATERIALIZED (  -- per scope: the groups at max_running, and all groups holding
    SELECT coalesce((SELECT array_agg(name) FROM tickwork.pauses WHERE scope = 'queue'), '{}')
               AS paused,
           coalesce(array_agg(name) FILTER (WHERE scope = 'queue' AND running >= max_running),
                    '{}') AS full_queues,
           coalesce(array_agg(name) FILTER (WHERE scope = 'kind' AND running >= max_running),
                    '{}') AS full_kinds,
           coalesce(array_agg(name) FILTER (WHERE scope = 'namespace'
                                              AND running >= max_running), '{}') AS full_namespaces,
           coalesce(array_agg(name) FILTER (WHERE scope = 'queue'
                                              AND (running >= max_running OR recent >= rate)),
                    '{}') AS queues,
           coalesce(array_agg(name) FILTER (WHERE scope = 'kind'
                                              AND (running >= max_running OR recent >= rate)),
                    '{}') AS kinds,
           coalesce(array_agg(name) FILTER (WHERE scope = 'namespace'
                                              AND (running >= max_running OR recent >= rate)),
                    '{}') AS namespaces,
           (SELECT coalesce(array_agg(name) FILTER (WHERE scope = 'queue'), '{}') FROM full_keys)
               AS keyed_queues,
           (SELECT coalesce(array_agg(name) FILTER (WHERE scope = 'kind'), '{}') FROM full_keys)
               AS keyed_kinds,
           (SELECT coalesce(array_agg(name) FILTER (WHERE scope = 'namespace'), '{}')
            FROM full_keys) AS keyed_namespaces
    FROM rules
),
held AS (
    SELECT j.queue,
           CASE WHEN j.queue = ANY (s.paused) THEN 'paused'
                WHEN j.queue = ANY (s.full_queues) THEN 'queue_limit'
                WHEN j.kind = ANY (s.full_kinds) THEN 'kind_limit'
                WHEN j.schedule_namespace = ANY (s.full_namespaces) THEN 'namespace_limit'
                ELSE 'rate_limit' END AS reason
    FROM shut s
    JOIN tickwork.jobs j
      ON j.status = 'available'
     AND j.run_at <= coalesce(%(now)s, now())
     AND (j.queue = ANY (s.paused)
          OR j.queue = ANY (s.queues)
          OR j.kind = ANY (s.kinds)
          OR j.schedule_namespace = ANY (s.namespaces)
          OR ((j.queue = ANY (s.keyed_queues) OR j.kind = ANY (s.keyed_kinds)
               OR j.schedule_namespace = ANY (s.keyed_namespaces))
              AND EXISTS (
                  SELECT FROM full_keys k
                  WHERE k.name = CASE k.scope WHEN 'queue' THEN j.queue WHEN 'kind' THEN j.kind
                                              ELSE j.schedule_namespace END
                    AND k.key = left(coalesce(j.payload ->> k.rate_key, ''), 200))))
    WHERE cardinality(s.paused) + cardinality(s.queues) + cardinality(s.kinds)
          + cardinality(s.namespaces) + cardinality(s.keyed_queues) + cardinality(s.keyed_kinds)
          + cardinality(s.keyed_namespaces) > 0
)
SELECT queue, reason, count(*) AS count
FROM held
GROUP BY queue, reason
ORDER BY queue, reason;
