-- Queries on tickwork.workers.

-- name: worker_register
-- Register a worker process under its name, unless another live process holds the name: a
-- row of this incarnation, or one whose heartbeat is older than %(ttl_seconds)s (its process
-- is gone; expiry would delete it), is taken over. Returns the row under the name: this
-- incarnation's when registered, else the live holder's (none: a holder that committed after
-- this statement's snapshot; the caller tries again).
WITH registered AS (
    INSERT INTO tickwork.workers AS w (name, incarnation, queues, kinds, namespaces, concurrency,
                                       host, pid, heartbeat_seconds, connections, started_at,
                                       last_seen_at)
    VALUES (%(name)s, %(incarnation)s, %(queues)s, %(kinds)s, %(namespaces)s, %(concurrency)s,
            %(host)s, %(pid)s, %(heartbeat_seconds)s, %(connections)s, coalesce(%(now)s, now()),
            coalesce(%(now)s, now()))
    ON CONFLICT (name) DO UPDATE
    SET incarnation = excluded.incarnation, queues = excluded.queues, kinds = excluded.kinds,
        namespaces = excluded.namespaces, concurrency = excluded.concurrency,
        host = excluded.host, pid = excluded.pid, heartbeat_seconds = excluded.heartbeat_seconds,
        connections = excluded.connections, started_at = excluded.started_at, last_seen_at = excluded.last_seen_at
    WHERE w.incarnation = excluded.incarnation
       OR w.last_seen_at < coalesce(%(now)s, now()) - make_interval(secs => %(ttl_seconds)s)
    RETURNING w.incarnation, w.host, w.pid, w.last_seen_at
)
SELECT incarnation, host, pid, last_seen_at FROM registered
UNION ALL
SELECT incarnation, host, pid, last_seen_at FROM tickwork.workers
WHERE name = %(name)s AND NOT EXISTS (SELECT 1 FROM registered);

-- name: worker_touch
-- The heartbeat of a worker process, by its incarnation: a row expired meanwhile (or taken
-- over by a process of the same name) is not brought back.
UPDATE tickwork.workers SET last_seen_at = coalesce(%(now)s, now())
WHERE incarnation = %(incarnation)s;

-- name: worker_deregister
DELETE FROM tickwork.workers WHERE incarnation = %(incarnation)s;

-- name: worker_expire
DELETE FROM tickwork.workers
WHERE last_seen_at < coalesce(%(now)s, now()) - make_interval(secs => %(ttl_seconds)s)
RETURNING name;

-- name: worker_list
-- Every registered worker, with whether it is stale: its last heartbeat is older than two of
-- its heartbeat intervals (a process stopped or cut off; its row expires after the TTL).
SELECT name, incarnation, queues, kinds, namespaces, concurrency, host, pid, heartbeat_seconds,
       started_at, last_seen_at,
       last_seen_at < coalesce(%(now)s, now()) - make_interval(secs => 2 * heartbeat_seconds)
           AS stale
FROM tickwork.workers ORDER BY name;

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
