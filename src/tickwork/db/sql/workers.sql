-- Queries on tickwork.workers, tickwork.duties and tickwork.audit_log.

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

-- name: duty_claim
-- Take a maintenance duty when it is due; a worker that gets no row leaves it to the others.
UPDATE tickwork.duties d
SET next_run_at = coalesce(%(now)s, now()) + make_interval(secs => %(interval_seconds)s),
    last_run_at = coalesce(%(now)s, now()),
    last_run_by = %(worker)s
FROM (
    SELECT name FROM tickwork.duties
    WHERE name = %(duty)s AND next_run_at <= coalesce(%(now)s, now())
    FOR UPDATE SKIP LOCKED
) due
WHERE d.name = due.name
RETURNING d.name;

-- name: audit_insert
INSERT INTO tickwork.audit_log (at, actor, action, target, reason, request_id, details)
VALUES (coalesce(%(now)s, now()), %(actor)s, %(action)s, %(target)s, %(reason)s,
        %(request_id)s, %(details)s)
RETURNING id;
