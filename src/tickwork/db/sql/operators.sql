-- The operators' registry (tickwork.operators). A scope is the array of Kubernetes namespaces
-- an operator watches; '{}' means all of them, which overlaps any scope.

-- name: operator_lock_owner
-- Joining: one operator of an owner at a time decides whether it may start.
SELECT pg_advisory_xact_lock(hashtextextended('tickwork.operators/' || %(owner)s, 0));

-- name: operator_clear
-- Joining: forget the expired entries of the owner, and this identity's previous run (a pod
-- restarted under the same name replaces its own entry).
DELETE FROM tickwork.operators
WHERE owner = %(owner)s AND (expires_at < now() OR identity = %(identity)s);

-- name: operator_overlapping
-- Joining: the live operators of the owner whose scope overlaps this one's, but for the
-- replicas of the same kopf peering object watching the same scope (their token ends in
-- '/<peering>'; a standalone operator's has no '/'): kopf keeps one of them active.
SELECT identity, scope, host, pid, extract(epoch FROM now() - started_at)::float8 AS age_seconds,
       extract(epoch FROM expires_at - now())::float8 AS expires_in_seconds
FROM tickwork.operators
WHERE owner = %(owner)s
  AND (cardinality(scope) = 0 OR cardinality(%(scope)s::text[]) = 0 OR scope && %(scope)s)
  AND NOT (%(peering)s <> ''
           AND split_part(token, '/', 2) = %(peering)s
           AND scope @> %(scope)s::text[] AND scope <@ %(scope)s::text[])
ORDER BY identity;

-- name: operator_insert
INSERT INTO tickwork.operators (owner, identity, token, scope, host, pid, connections,
                                started_at, expires_at)
VALUES (%(owner)s, %(identity)s, %(token)s, %(scope)s, %(host)s, %(pid)s, %(connections)s, now(),
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
            ELSE 'gone' END AS outcome;

-- name: operator_leave
DELETE FROM tickwork.operators
WHERE owner = %(owner)s AND identity = %(identity)s AND token = %(token)s;
