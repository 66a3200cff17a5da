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
