-- Queries on tickwork.schedule_namespaces: the owner of each schedule namespace (taken by a
-- sync) and the operator scope that last synced it. A scope is the array of Kubernetes
-- namespaces an operator watches; '{}' means all of them.

-- name: namespace_lock
-- Sync: create the namespace row if needed and lock it for the transaction; returns the
-- recorded owner and the instant the sync works at.
INSERT INTO tickwork.schedule_namespaces AS n (namespace, owner, created_at, updated_at)
VALUES (%(namespace)s, %(owner)s, coalesce(%(now)s, now()), coalesce(%(now)s, now()))
ON CONFLICT (namespace) DO UPDATE SET owner = n.owner
RETURNING n.owner, coalesce(%(now)s, now()) AS now;

-- name: namespace_take_over
UPDATE tickwork.schedule_namespaces
SET owner = %(owner)s, updated_at = coalesce(%(now)s, now())
WHERE namespace = %(namespace)s;

-- name: namespace_in_scope
-- At start, the namespaces whose Schedules may have been deleted while the operator was down:
-- clusterwide, all the owner owns; else the watched namespaces themselves and the namespaces
-- last synced from a scope within this one.
SELECT namespace FROM tickwork.schedule_namespaces
WHERE owner = %(owner)s
  AND (cardinality(%(scope)s::text[]) = 0
       OR namespace = ANY (%(scope)s)
       OR (cardinality(operator_scope) > 0 AND operator_scope <@ %(scope)s))
ORDER BY namespace;

-- name: namespace_lock_scope
-- Sync: the owner and recorded scope of a schedule namespace (no row: it is new), locked for
-- the sync's transaction (the same row the sync locks first).
SELECT owner, operator_scope FROM tickwork.schedule_namespaces
WHERE namespace = %(namespace)s
FOR UPDATE;

-- name: namespace_record_scope
-- Sync: the scope that synced the namespace (NULL when it synced it empty).
UPDATE tickwork.schedule_namespaces SET operator_scope = %(scope)s
WHERE namespace = %(namespace)s AND owner = %(owner)s;
