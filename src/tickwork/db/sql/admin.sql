-- The admin console's read models that join several tables and touch no job (those that
-- read tickwork.jobs are in jobs.sql). Every listing has a LIMIT. %(scope)s is the reader's
-- schedule namespaces (NULL: all).

-- name: admin_read_limit
-- Bound every statement of a console request's transaction.
SELECT set_config('statement_timeout', %(milliseconds)s::text, true);

-- name: admin_namespaces
-- Every schedule namespace with its owner and counts; served: a live worker offers it.
SELECT n.namespace, n.owner,
       count(s.name) AS schedules,
       count(*) FILTER (WHERE s.enabled) AS enabled,
       count(*) FILTER (WHERE s.enabled AND s.suspended) AS suspended,
       coalesce(sum(s.skipped_occurrences), 0) AS skipped_occurrences,
       count(*) FILTER (WHERE s.enabled AND s.firing_error IS NOT NULL) AS failing,
       EXISTS (SELECT 1 FROM tickwork.workers w
               WHERE n.namespace = ANY (w.namespaces)
                 AND w.last_seen_at >= coalesce(%(now)s, now())
                                       - make_interval(secs => %(ttl_seconds)s)) AS served
FROM tickwork.schedule_namespaces n
LEFT JOIN tickwork.schedules s ON s.namespace = n.namespace
WHERE (%(namespace)s::text IS NULL OR n.namespace = %(namespace)s)
  AND (%(scope)s::text[] IS NULL OR n.namespace = ANY (%(scope)s::text[]))
GROUP BY n.namespace, n.owner
ORDER BY n.namespace
LIMIT %(limit)s;
