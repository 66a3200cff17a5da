-- Firing isolation: a schedule whose firing fails (its stored spec cannot be read, planning it
-- raised, or PostgreSQL refused its job or its advance) is set aside with its error, and the
-- rest of its batch fires. The error stays on the row until the schedule fires again or a
-- sync changes its definition (a new revision).
ALTER TABLE tickwork.schedules
    -- The last firing error (`field: reason` where known), NULL when the last firing worked.
    ADD COLUMN firing_error text,
    -- Consecutive failed firings (0 when the last firing worked).
    ADD COLUMN firing_failures integer NOT NULL DEFAULT 0 CHECK (firing_failures >= 0),
    -- A failed schedule is not claimed before this instant (the backoff: maintenance/firing.py).
    ADD COLUMN firing_retry_at timestamptz;

-- The firing loop's alarm: the earliest retry of the set-aside schedules of a namespace.
CREATE INDEX schedules_retry_idx ON tickwork.schedules (namespace, firing_retry_at)
    WHERE firing_retry_at IS NOT NULL AND enabled AND NOT suspended;
