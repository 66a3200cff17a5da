-- The work KEDA's PostgreSQL scaler sizes a worker pool by, as a function the chart calls
-- (the chart renders only the pool's arguments, so the query follows the schema it runs on):
-- the open jobs of the pool's queues due within the lead time, plus the enabled, unsuspended
-- schedules of its namespaces due within it, on the database's clock. A schedule due soon
-- counts before any job of it exists, so a pool scaled to zero wakes one worker before the
-- schedule falls due. NULL queues: every queue; NULL namespaces: the pool fires none.
CREATE FUNCTION tickwork.keda_due_work(
    queues text[], namespaces text[], lead_seconds double precision
) RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT (SELECT count(*) FROM tickwork.jobs
            WHERE status IN ('available', 'running')
              AND run_at <= now() + make_interval(secs => lead_seconds)
              AND (queues IS NULL OR queue = ANY (queues)))
         + (SELECT count(*) FROM tickwork.schedules
            WHERE enabled AND NOT suspended
              AND next_run_at <= now() + make_interval(secs => lead_seconds)
              AND namespace = ANY (coalesce(namespaces, '{}')))
$$;
