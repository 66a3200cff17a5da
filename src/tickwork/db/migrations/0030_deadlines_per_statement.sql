-- Occurrence deadlines noted once per statement (issue 33, item 2).
--
-- 0025's row trigger jobs_occurrence_deadline ran a PL/pgSQL function for every job inserted
-- with an occurrence, and that function looked up the job's schedule for a spec.deadline: one
-- call and one primary-key descent per fired occurrence, 6.3 µs a job even when the schedule
-- has no deadline (EXPLAIN ANALYZE of 2,000 fired jobs: 12.6 of 40 ms), about 6 s of a
-- million-occurrence minute. The statement trigger jobs_occurrence_deadlines does the same in
-- one INSERT ... SELECT over the statement's new rows (the transition table jobs_notify_inserted
-- already has captured: nothing more is stored per row), joined to their schedules: the rows of
-- schedules with a spec.deadline get their deadline, as before; a statement with no occurrence
-- reads no schedule.
--
-- The row trigger's function is dropped with it (no code ever called it, only the trigger; 0025
-- is in no release). Both triggers are replaced in one transaction, so no insert runs with
-- neither. DROP TRIGGER takes an ACCESS EXCLUSIVE lock on tickwork.jobs and CREATE TRIGGER a
-- SHARE ROW EXCLUSIVE one, each without a scan.

CREATE FUNCTION tickwork.occurrence_deadlines_noted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO tickwork.occurrence_deadlines (job_id, namespace, name, occurrence_at,
                                               deadline_at)
    SELECT n.id, n.schedule_namespace, n.schedule_name, n.occurrence_at, d.at
    FROM inserted n
    JOIN tickwork.schedules s
      ON s.namespace = n.schedule_namespace AND s.name = n.schedule_name
    CROSS JOIN LATERAL (SELECT tickwork.occurrence_deadline(n.occurrence_at,
                                                            s.spec -> 'deadline',
                                                            s.spec ->> 'timeZone') AS at) d
    WHERE n.occurrence_at IS NOT NULL AND s.spec ? 'deadline' AND d.at IS NOT NULL
    ON CONFLICT (job_id) DO NOTHING;
    RETURN NULL;
END;
$$;

CREATE TRIGGER jobs_occurrence_deadlines
    AFTER INSERT ON tickwork.jobs
    REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT
    EXECUTE FUNCTION tickwork.occurrence_deadlines_noted();

DROP TRIGGER jobs_occurrence_deadline ON tickwork.jobs;
DROP FUNCTION tickwork.occurrence_deadline_watch();
