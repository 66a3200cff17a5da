-- The operators' registry (tickwork.operators) and the scope each schedule namespace was
-- synced from (tickwork.schedule_namespaces.operator_scope). A scope is the array of
-- Kubernetes namespaces an operator watches; '{}' means all of them, which overlaps any scope.

-- name: operator_lock_owner
-- Joining: one operator of an owner at a time decides whether it may start.
SELECT pg_advisory_xact_lock(hashtextextended('tickwork.operators/' || %(owner)s, 0));

-- name: operator_clear
-- Joining: forget the expired entries of the owner, and this identity's previous run (a pod
-- restarted under the same name replaces its own entry).
DELETE FROM tickwork.operators
WHERE owner = %(owner)s AND (expires_at < now() OR identity = %(identity)s);

-- name: operator_overlapping
-- Joining: the live operators of the owner whose scope overlaps this one's.
SELECT identity, scope, host, pid, extract(epoch FROM now() - started_at)::float8,
       extract(epoch FROM expires_at - now())::float8
FROM tickwork.operators
WHERE owner = %(owner)s
  AND (cardinality(scope) = 0 OR cardinality(%(scope)s::text[]) = 0 OR scope && %(scope)s)
ORDER BY identity;

-- name: operator_insert
INSERT INTO tickwork.operators (owner, identity, token, scope, host, pid, started_at, expires_at)
VALUES (%(owner)s, %(identity)s, %(token)s, %(scope)s, %(host)s, %(pid)s, now(),
        now() + make_interval(secs => %(ttl_seconds)s));

-- name: operator_heartbeat
-- 'renewed'; 'replaced' when a run of the same identity took the entry over; 'gone' when it
-- expired and was cleared.
WITH renewed AS (
    UPDATE tickwork.operators SET expires_at = now() + make_interval(secs => %(ttl_seconds)s)
    WHERE owner = %(owner)s AND identity = %(identity)s AND token = %(token)s
    RETURNING identity
)
SELECT CASE WHEN EXISTS (SELECT 1 FROM renewed) THEN 'renewed'
            WHEN EXISTS (SELECT 1 FROM tickwork.operators
                         WHERE owner = %(owner)s AND identity = %(identity)s) THEN 'replaced'
            ELSE 'gone' END;

-- name: operator_leave
DELETE FROM tickwork.operators
WHERE owner = %(owner)s AND identity = %(identity)s AND token = %(token)s;

-- name: operator_namespaces_in_scope
-- At start, the namespaces whose Schedules may have been deleted while the operator was down:
-- clusterwide, all the owner owns; else the watched namespaces themselves and the namespaces
-- last synced from a scope within this one.
SELECT namespace FROM tickwork.schedule_namespaces
WHERE owner = %(owner)s
  AND (cardinality(%(scope)s::text[]) = 0
       OR namespace = ANY (%(scope)s)
       OR (cardinality(operator_scope) > 0 AND operator_scope <@ %(scope)s))
ORDER BY namespace;

-- name: operator_namespace_lock
-- Sync: the owner and recorded scope of a schedule namespace (no row: it is new), locked for
-- the sync's transaction (the same row the sync locks first).
SELECT owner, operator_scope FROM tickwork.schedule_namespaces
WHERE namespace = %(namespace)s
FOR UPDATE;

-- name: operator_namespace_record
-- Sync: the scope that synced the namespace (NULL when it synced it empty).
UPDATE tickwork.schedule_namespaces SET operator_scope = %(scope)s
WHERE namespace = %(namespace)s AND owner = %(owner)s;
