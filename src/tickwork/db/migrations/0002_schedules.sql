-- Schedules: definitions synced per namespace (desired state), fired by the workers that offer
-- the namespace. A fired occurrence is an ordinary job carrying (schedule_namespace,
-- schedule_name, occurrence_at); the unique index jobs_occurrence_idx makes it one job however
-- many workers fire it.

-- A namespace remembers its owner (a file deployment, the operator of a named cluster), so one
-- owner cannot prune another's schedules by accident. Sync locks this row for its transaction.
CREATE TABLE tickwork.schedule_namespaces (
    namespace   text        PRIMARY KEY CHECK (namespace <> ''),
    owner       text        NOT NULL CHECK (owner <> ''),
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE tickwork.schedules (
    namespace            text        NOT NULL REFERENCES tickwork.schedule_namespaces,
    name                 text        NOT NULL CHECK (name <> ''),
    -- Bumped by every real change (including disable and re-enable); firing is fenced by it.
    revision             integer     NOT NULL DEFAULT 1 CHECK (revision >= 1),
    -- false: pruned by a sync (kept, so fired jobs still have something to point at).
    enabled              boolean     NOT NULL DEFAULT true,
    -- spec.suspend, as a column for the due index; next_run_at keeps its place meanwhile.
    suspended            boolean     NOT NULL DEFAULT false,
    -- The canonical camelCase spec of the definition (ScheduleDefinition.to_spec()).
    spec                 jsonb       NOT NULL,
    -- spec.every of a FixedDelay schedule: its next run is this long after its job finished.
    fixed_delay          interval,
    -- The next occurrence to fire. NULL when disabled, or while a FixedDelay job is open.
    next_run_at          timestamptz,
    -- Occurrences before this instant are misses whatever the deadline (set on resume).
    missed_before        timestamptz,
    -- The latest occurrence that produced a job.
    last_occurrence_at   timestamptz,
    -- Occurrences thrown away by the misfire or overlap policy, ever.
    skipped_occurrences  bigint      NOT NULL DEFAULT 0,
    -- The latest job created for this schedule (fired or triggered) and its final status
    -- (NULL while it is open; the job row has the live one).
    last_job_id          bigint,
    last_job_status      tickwork.job_status,
    last_success_at      timestamptz,
    -- The last non-null return value of a job of this schedule, the payload of its next
    -- occurrences; state_job_id is that job, so an older job finishing late cannot win.
    state                jsonb,
    state_job_id         bigint,
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, name),
    CONSTRAINT schedules_disabled_not_due CHECK (enabled OR next_run_at IS NULL)
);

-- Firing: the due rows of a namespace, earliest first. Per namespace, so that due rows of a
-- namespace no worker offers never sit in front of the ones a worker is looking for.
CREATE INDEX schedules_due_idx ON tickwork.schedules (namespace, next_run_at)
    WHERE enabled AND NOT suspended;

-- A job of a schedule became dead or cancelled (lease recovery, an operator, Replace): record
-- it as the schedule's last status and, for FixedDelay, schedule the next run. Successes are
-- recorded by the worker's completion write (query schedule_jobs_succeeded), which locks the
-- schedule rows of a whole batch in key order; this trigger fires on single-job changes.
CREATE FUNCTION tickwork.schedule_job_ended() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    delayed boolean;
BEGIN
    UPDATE tickwork.schedules s
    SET last_job_status = CASE WHEN s.last_job_id = NEW.id THEN NEW.status
                               ELSE s.last_job_status END,
        next_run_at = CASE WHEN s.fixed_delay IS NOT NULL AND s.next_run_at IS NULL AND s.enabled
                                AND NEW.occurrence_at IS NOT NULL
                           THEN coalesce(NEW.finished_at, now()) + s.fixed_delay
                           ELSE s.next_run_at END
    WHERE s.namespace = NEW.schedule_namespace AND s.name = NEW.schedule_name
      AND (s.last_job_id = NEW.id
           OR (s.fixed_delay IS NOT NULL AND s.next_run_at IS NULL AND s.enabled
               AND NEW.occurrence_at IS NOT NULL))
    RETURNING s.fixed_delay IS NOT NULL INTO delayed;
    IF delayed THEN
        PERFORM pg_notify('tickwork_schedules', NEW.schedule_namespace);
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER jobs_schedule_ended
    AFTER UPDATE OF status ON tickwork.jobs
    FOR EACH ROW
    WHEN (NEW.schedule_name IS NOT NULL
          AND NEW.status IN ('dead', 'cancelled')
          AND OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION tickwork.schedule_job_ended();
