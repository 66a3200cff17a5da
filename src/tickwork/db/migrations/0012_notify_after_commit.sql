-- PostgreSQL serializes the commits of every transaction that sent a NOTIFY behind one
-- cluster-wide lock, held through the commit's WAL flush: concurrent producers whose inserts
-- notify lose group commit and commit one after another. So the App's own enqueues no longer
-- notify inside the inserting transaction: they turn this trigger off for that transaction
-- (SET LOCAL tickwork.notify_jobs = 'off', query job_inserts_quiet), commit, then notify in a
-- transaction of their own that only notifies and commits without waiting for the flush
-- (query job_notify_queue), so the lock is held for microseconds. Inserts made in a caller's
-- transaction (enqueue(conn=...), firing, backfill, plain SQL) notify from this trigger as
-- before, once per queue per statement (and PostgreSQL sends one per transaction), unless
-- tickwork.notify_jobs is 'off' for the session, role or database.
CREATE OR REPLACE FUNCTION tickwork.notify_jobs_inserted() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    q text;
BEGIN
    IF current_setting('tickwork.notify_jobs', true) = 'off' THEN
        RETURN NULL;
    END IF;
    FOR q IN SELECT DISTINCT queue FROM inserted WHERE run_at <= now() LOOP
        PERFORM pg_notify('tickwork_jobs', q);
    END LOOP;
    RETURN NULL;
END;
$$;
