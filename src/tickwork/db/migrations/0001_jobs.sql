-- The job engine: jobs, the workers serving them, maintenance duties and the audit log.
-- Everything lives in schema tickwork (created by the migration runner).

CREATE TYPE tickwork.job_status AS ENUM ('available', 'running', 'succeeded', 'dead', 'cancelled');

CREATE TABLE tickwork.jobs (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind                text                NOT NULL CHECK (kind <> ''),
    queue               text                NOT NULL DEFAULT 'default' CHECK (queue <> ''),
    payload             jsonb               NOT NULL DEFAULT '{}',
    priority            smallint            NOT NULL DEFAULT 0 CHECK (priority >= 0),
    run_at              timestamptz         NOT NULL DEFAULT now(),
    status              tickwork.job_status NOT NULL DEFAULT 'available',
    attempt             integer             NOT NULL DEFAULT 0 CHECK (attempt >= 0),
    -- NULL: the task's own, filled in by the worker that first claims the job.
    max_attempts        integer             CHECK (max_attempts >= 1),
    -- Retry policy of this job; NULL means the task's own policy.
    retry_base_seconds  double precision    CHECK (retry_base_seconds >= 0),
    retry_rate          double precision    CHECK (retry_rate >= 1),
    retry_max_seconds   double precision    CHECK (retry_max_seconds >= 0),
    timeout_seconds     double precision    CHECK (timeout_seconds > 0),
    concurrency_key     text,
    unique_key          text,
    -- The schedule occurrence this job was fired for (NULL for plain jobs;
    -- occurrence_at is NULL for a manual trigger of a schedule).
    schedule_namespace  text,
    schedule_name       text,
    occurrence_at       timestamptz,
    picked_by           text,
    lease_expires_at    timestamptz,
    version             integer             NOT NULL DEFAULT 0,
    last_error          text,
    created_at          timestamptz         NOT NULL DEFAULT now(),
    started_at          timestamptz,
    finished_at         timestamptz,
    CONSTRAINT jobs_schedule_ref CHECK ((schedule_namespace IS NULL) = (schedule_name IS NULL)),
    CONSTRAINT jobs_occurrence_needs_schedule CHECK (occurrence_at IS NULL OR schedule_name IS NOT NULL),
    CONSTRAINT jobs_running_has_lease CHECK (status <> 'running' OR lease_expires_at IS NOT NULL)
);

-- Claiming: the next available jobs in priority order.
CREATE INDEX jobs_claim_idx ON tickwork.jobs (priority DESC, run_at, id)
    WHERE status = 'available';

-- Unique key: one pending or running job per (kind, unique_key).
CREATE UNIQUE INDEX jobs_unique_key_idx ON tickwork.jobs (kind, unique_key)
    WHERE unique_key IS NOT NULL AND status IN ('available', 'running');

-- Concurrency key: at most one running job per key across the fleet.
CREATE UNIQUE INDEX jobs_concurrency_key_idx ON tickwork.jobs (concurrency_key)
    WHERE concurrency_key IS NOT NULL AND status = 'running';

-- Schedule occurrence key: any number of workers may fire an occurrence, one job results.
CREATE UNIQUE INDEX jobs_occurrence_idx
    ON tickwork.jobs (schedule_namespace, schedule_name, occurrence_at)
    WHERE occurrence_at IS NOT NULL;

-- The open jobs of a schedule (overlap policies look these up).
CREATE INDEX jobs_schedule_open_idx ON tickwork.jobs (schedule_namespace, schedule_name)
    WHERE schedule_name IS NOT NULL AND status IN ('available', 'running');

-- Lease recovery.
CREATE INDEX jobs_lease_idx ON tickwork.jobs (lease_expires_at) WHERE status = 'running';

-- Retention.
CREATE INDEX jobs_finished_idx ON tickwork.jobs (finished_at)
    WHERE status IN ('succeeded', 'dead', 'cancelled');

-- A new job that is already due wakes the workers serving its queue.
CREATE FUNCTION tickwork.notify_jobs_inserted() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    q text;
BEGIN
    FOR q IN SELECT DISTINCT queue FROM inserted WHERE run_at <= now() LOOP
        PERFORM pg_notify('tickwork_jobs', q);
    END LOOP;
    RETURN NULL;
END;
$$;

CREATE TRIGGER jobs_notify_inserted
    AFTER INSERT ON tickwork.jobs
    REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION tickwork.notify_jobs_inserted();

-- Every running worker process, refreshed with its heartbeat; stale rows expire.
CREATE TABLE tickwork.workers (
    name          text        PRIMARY KEY,
    queues        text[]      NOT NULL,
    kinds         text[]      NOT NULL,
    namespaces    text[]      NOT NULL,
    concurrency   integer     NOT NULL,
    host          text        NOT NULL,
    pid           integer     NOT NULL,
    started_at    timestamptz NOT NULL DEFAULT now(),
    last_seen_at  timestamptz NOT NULL DEFAULT now()
);

-- Maintenance duties (lease recovery, retention, worker expiry, ...): whichever worker
-- claims a due row with SKIP LOCKED performs that duty and moves next_run_at on.
CREATE TABLE tickwork.duties (
    name          text        PRIMARY KEY,
    next_run_at   timestamptz NOT NULL DEFAULT now(),
    last_run_at   timestamptz,
    last_run_by   text
);

INSERT INTO tickwork.duties (name) VALUES ('recover_leases'), ('retention'), ('expire_workers');

-- Operator actions (run now, trigger, cancel, retry): who, why, when, what.
CREATE TABLE tickwork.audit_log (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at          timestamptz NOT NULL DEFAULT now(),
    actor       text        NOT NULL,
    action      text        NOT NULL,
    target      text        NOT NULL,
    reason      text,
    request_id  text,
    details     jsonb       NOT NULL DEFAULT '{}'
);
