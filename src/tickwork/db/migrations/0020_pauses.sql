-- Pause and resume (docs/flow-control.md): a paused queue's jobs are passed over by the claim
-- (job_claim reads this table inside the statement, so the rule is fleet-wide and exact); a
-- paused schedule namespace's schedules are held as if suspended by the firing claim. One row
-- per paused target; resuming deletes it (the audit log keeps the history). A new, small
-- table: nothing here rewrites or locks tickwork.jobs or tickwork.schedules.
CREATE TABLE tickwork.pauses (
    scope      text        NOT NULL CHECK (scope IN ('queue', 'namespace')),
    name       text        NOT NULL CHECK (name <> ''),
    paused_by  text        NOT NULL,
    paused_at  timestamptz NOT NULL,
    reason     text,
    PRIMARY KEY (scope, name)
);

-- KEDA's count (migration 0008) leaves out what a pause holds: the waiting jobs of a paused
-- queue (its running jobs still count: they finish) and the schedules of a paused namespace.
CREATE OR REPLACE FUNCTION tickwork.keda_due_work(
    queues text[], namespaces text[], lead_seconds double precision
) RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT (SELECT count(*) FROM tickwork.jobs j
            WHERE j.status IN ('available', 'running')
              AND j.run_at <= now() + make_interval(secs => lead_seconds)
              AND (queues IS NULL OR j.queue = ANY (queues))
              AND (j.status = 'running'
                   OR NOT EXISTS (SELECT FROM tickwork.pauses p
                                  WHERE p.scope = 'queue' AND p.name = j.queue)))
         + (SELECT count(*) FROM tickwork.schedules s
            WHERE s.enabled AND NOT s.suspended
              AND s.next_run_at <= now() + make_interval(secs => lead_seconds)
              AND s.namespace = ANY (coalesce(namespaces, '{}'))
              AND NOT EXISTS (SELECT FROM tickwork.pauses p
                              WHERE p.scope = 'namespace' AND p.name = s.namespace))
$$;
