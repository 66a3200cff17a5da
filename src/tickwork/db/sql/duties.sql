-- Queries on tickwork.duties: maintenance duties taken in turn by the workers.

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

-- name: duty_add
-- A duty whose rows are made as they are needed (one per Kubernetes namespace for the
-- container-jobs reconciler), due at once; nothing when it exists.
INSERT INTO tickwork.duties (name, next_run_at) VALUES (%(duty)s, coalesce(%(now)s, now()))
ON CONFLICT (name) DO NOTHING;
