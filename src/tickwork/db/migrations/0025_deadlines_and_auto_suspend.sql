-- Deadlines and auto-suspend (issue 34, items 1 and 2; docs/deadlines.md).
--
-- Deadlines: spec.deadline of a Schedule says by when each occurrence must have succeeded
-- (succeedWithinSeconds after it, or by a local time of day in its timeZone). The trigger
-- jobs_occurrence_deadline writes one row per fired occurrence of such a schedule into
-- tickwork.occurrence_deadlines, with its deadline (tickwork.occurrence_deadline); the
-- statement trigger jobs_ended (0028) records its success there; the duty
-- check_deadlines (any worker, no leader) deletes the rows whose deadline passed, SKIP LOCKED,
-- so each occurrence is decided once, and records the late ones on their schedule.
--
-- Auto-suspend: spec.suspendAfterFailures: N. jobs_ended (0028) counts each schedule's
-- consecutive occurrences ending dead (a success resets the count) and, at N, suspends it
-- (suspended = true, the due index leaves it out) with the time and the job. Resuming (the
-- spec's suspend toggled, `tickwork schedules resume`, the console) resets both.
--
-- All new columns are nullable or have a constant default (no rewrite); the new table and its
-- index start empty. Nothing earlier is changed.

ALTER TABLE tickwork.schedules
    -- Consecutive occurrences of the schedule that ended dead, and the first of them.
    ADD COLUMN dead_streak integer NOT NULL DEFAULT 0,
    ADD COLUMN dead_streak_job_id bigint,
    -- Set when spec.suspendAfterFailures suspended the schedule: when, and the job whose
    -- death made the count reach it. Cleared by a resume.
    ADD COLUMN failures_suspended_at timestamptz,
    ADD COLUMN failures_suspended_job_id bigint,
    -- Occurrences that missed their deadline, ever; the latest one, its deadline, its job and
    -- when it was found late. Late until a success after late_at (last_success_at).
    ADD COLUMN deadlines_missed bigint NOT NULL DEFAULT 0,
    ADD COLUMN late_occurrence_at timestamptz,
    ADD COLUMN late_deadline_at timestamptz,
    ADD COLUMN late_job_id bigint,
    ADD COLUMN late_at timestamptz;

-- The deadlines still to decide: one row per fired occurrence of a schedule with a deadline,
-- deleted by the duty once its deadline has passed. No foreign key: retention may delete the
-- job first (succeeded_at keeps what the duty needs).
CREATE TABLE tickwork.occurrence_deadlines (
    job_id         bigint      PRIMARY KEY,
    namespace      text        NOT NULL,
    name           text        NOT NULL,
    occurrence_at  timestamptz NOT NULL,
    deadline_at    timestamptz NOT NULL,
    succeeded_at   timestamptz
);

CREATE INDEX occurrence_deadlines_due_idx ON tickwork.occurrence_deadlines (deadline_at);

INSERT INTO tickwork.duties (name) VALUES ('check_deadlines');

-- The deadline of an occurrence at `occurrence` under spec.deadline `deadline` in `zone`:
-- {"succeedWithinSeconds": s} is s seconds after it; {"by": "HH:MM"} is the first instant after
-- it at which the wall clock of `zone` reaches HH:MM. A reading the clock skips (a daylight
-- saving gap) is reached when the clock jumps past it; a reading it shows twice is reached the
-- first time. NULL for any other value (the definition's validation refuses those).
CREATE FUNCTION tickwork.occurrence_deadline(occurrence timestamptz, deadline jsonb, zone text)
RETURNS timestamptz
LANGUAGE plpgsql STABLE AS $$
DECLARE
    reading timestamp;
    wall timestamp;
    utc_wall timestamptz;
    before_offset interval;
    after_offset interval;
    candidate timestamptz;
    low timestamptz;
    high timestamptz;
    middle timestamptz;
BEGIN
    IF jsonb_typeof(deadline -> 'succeedWithinSeconds') = 'number' THEN
        RETURN occurrence
            + make_interval(secs => (deadline ->> 'succeedWithinSeconds')::double precision);
    END IF;
    IF jsonb_typeof(deadline -> 'by') IS DISTINCT FROM 'string' THEN
        RETURN NULL;
    END IF;
    reading := occurrence AT TIME ZONE zone;
    wall := reading::date + (deadline ->> 'by')::time;
    IF wall <= reading THEN
        wall := wall + interval '1 day';
    END IF;
    -- The offsets a day either side of the wall time (zones change offset months apart).
    utc_wall := wall AT TIME ZONE 'UTC';
    before_offset := ((utc_wall - interval '1 day') AT TIME ZONE zone)
                     - ((utc_wall - interval '1 day') AT TIME ZONE 'UTC');
    after_offset := ((utc_wall + interval '1 day') AT TIME ZONE zone)
                    - ((utc_wall + interval '1 day') AT TIME ZONE 'UTC');
    -- The instants whose reading is the wall time, the earliest after the occurrence first.
    FOREACH candidate IN ARRAY ARRAY[least(utc_wall - before_offset, utc_wall - after_offset),
                                     greatest(utc_wall - before_offset, utc_wall - after_offset)]
    LOOP
        IF candidate > occurrence AND (candidate AT TIME ZONE zone) = wall THEN
            RETURN candidate;
        END IF;
    END LOOP;
    -- A skipped reading: the transition, the first instant under the later offset.
    low := utc_wall - after_offset;
    high := utc_wall - before_offset;
    WHILE high - low > interval '1 second' LOOP
        middle := low + (high - low) / 2;
        IF (middle AT TIME ZONE zone) - (middle AT TIME ZONE 'UTC') = after_offset THEN
            high := middle;
        ELSE
            low := middle;
        END IF;
    END LOOP;
    RETURN date_trunc('second', high);
END;
$$;

-- A fired occurrence of a schedule with a deadline: its row in tickwork.occurrence_deadlines.
-- Row-level, and only for jobs with an occurrence (the WHEN clause costs other jobs nothing).
CREATE FUNCTION tickwork.occurrence_deadline_watch() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO tickwork.occurrence_deadlines (job_id, namespace, name, occurrence_at,
                                               deadline_at)
    SELECT NEW.id, NEW.schedule_namespace, NEW.schedule_name, NEW.occurrence_at, d.at
    FROM tickwork.schedules s,
         LATERAL (SELECT tickwork.occurrence_deadline(NEW.occurrence_at, s.spec -> 'deadline',
                                                      s.spec ->> 'timeZone') AS at) d
    WHERE s.namespace = NEW.schedule_namespace AND s.name = NEW.schedule_name
      AND s.spec ? 'deadline' AND d.at IS NOT NULL
    ON CONFLICT (job_id) DO NOTHING;
    RETURN NULL;
END;
$$;

CREATE TRIGGER jobs_occurrence_deadline
    AFTER INSERT ON tickwork.jobs
    FOR EACH ROW
    WHEN (NEW.occurrence_at IS NOT NULL)
    EXECUTE FUNCTION tickwork.occurrence_deadline_watch();
