-- Queries on tickwork.workers.

-- name: worker_register
INSERT INTO tickwork.workers (name, queues, kinds, namespaces, concurrency, host, pid,
                              started_at, last_seen_at)
VALUES (%(name)s, %(queues)s, %(kinds)s, %(namespaces)s, %(concurrency)s, %(host)s, %(pid)s,
        coalesce(%(now)s, now()), coalesce(%(now)s, now()))
ON CONFLICT (name) DO UPDATE
SET queues = excluded.queues, kinds = excluded.kinds, namespaces = excluded.namespaces,
    concurrency = excluded.concurrency, host = excluded.host, pid = excluded.pid,
    started_at = excluded.started_at, last_seen_at = excluded.last_seen_at;

-- name: worker_touch
UPDATE tickwork.workers SET last_seen_at = coalesce(%(now)s, now()) WHERE name = %(name)s;

-- name: worker_deregister
DELETE FROM tickwork.workers WHERE name = %(name)s;

-- name: worker_expire
DELETE FROM tickwork.workers
WHERE last_seen_at < coalesce(%(now)s, now()) - make_interval(secs => %(ttl_seconds)s)
RETURNING name;

-- name: worker_list
SELECT name, queues, kinds, namespaces, concurrency, host, pid, started_at, last_seen_at
FROM tickwork.workers ORDER BY name;

-- name: worker_seen
SELECT last_seen_at FROM tickwork.workers WHERE name = %(name)s;

-- name: worker_gauge
-- Live workers (seen within %(ttl_seconds)s), and the instant of the sample.
SELECT count(*) AS live, coalesce(%(now)s, now()) AS now
FROM tickwork.workers
WHERE last_seen_at >= coalesce(%(now)s, now()) - make_interval(secs => %(ttl_seconds)s);

-- name: worker_live
-- Live workers (seen within %(ttl_seconds)s, the rule of the fleet gauges): the schedule
-- namespaces each fires, the kinds it runs and the queues it claims from.
SELECT name, namespaces, kinds, queues
FROM tickwork.workers
WHERE last_seen_at >= coalesce(%(now)s, now()) - make_interval(secs => %(ttl_seconds)s)
ORDER BY name;
