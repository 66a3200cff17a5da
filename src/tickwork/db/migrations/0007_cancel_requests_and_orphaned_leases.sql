-- Cancelling a running job is a request, and every expired lease is recovered whatever the
-- job's kind.

-- A running job asked to stop (by an operator or the Replace policy) keeps its status and
-- its concurrency key until its worker has stopped the task and records 'cancelled', or its
-- lease expires (lease recovery then records it cancelled). Not a state change: it does not
-- move the version, so the worker's fenced writes still apply.
ALTER TABLE tickwork.jobs ADD COLUMN cancel_requested_at timestamptz;

-- A job made dead by lease recovery, whose task's on_dead hook has not run yet: the recovering
-- worker may not register the kind, so the first worker that does runs the hook and clears
-- this flag in one transaction.
ALTER TABLE tickwork.jobs ADD COLUMN on_dead_pending boolean NOT NULL DEFAULT false;

CREATE INDEX jobs_on_dead_pending_idx ON tickwork.jobs (kind) WHERE on_dead_pending;

-- A cancellation request reaches the job's worker at once (payload: the job id); the
-- worker's heartbeat is the fallback when the notification is lost.
CREATE FUNCTION tickwork.notify_cancel_requested() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('tickwork_cancel', NEW.id::text);
    RETURN NULL;
END;
$$;

CREATE TRIGGER jobs_notify_cancel_requested
    AFTER UPDATE OF cancel_requested_at ON tickwork.jobs
    FOR EACH ROW
    WHEN (OLD.cancel_requested_at IS NULL AND NEW.cancel_requested_at IS NOT NULL)
    EXECUTE FUNCTION tickwork.notify_cancel_requested();
