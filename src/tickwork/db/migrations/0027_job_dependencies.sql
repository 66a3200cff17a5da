-- Small workflows (issue 34, item 5; docs/workflows.md): a job may wait for other jobs.
--
-- A job enqueued with after=[ids] whose parents have not all succeeded is inserted 'waiting',
-- a status the claim never reads (it claims 'available' jobs only), with parents_left: how
-- many of its parents had not succeeded when it was enqueued. Its edges are rows of
-- tickwork.job_dependencies, kept after they are resolved (the console draws a run's graph
-- from them).
--
-- One place resolves them, whoever ends a parent (a worker's batch of successes, a failure
-- on the last attempt, lease recovery, an operator's cancel, Replace, pruning): the
-- statement-level trigger jobs_ended (0028), which also counts the jobs that end. Per UPDATE
-- statement on tickwork.jobs, for the jobs whose status became succeeded, dead or cancelled,
-- it locks their waiting dependents in id order (so concurrent completions cannot deadlock on
-- them) and, in the same transaction as the parent's end: subtracts the parents that
-- succeeded from parents_left, making a dependent 'available' when none is left; cancels a
-- dependent one of whose parents ended dead or cancelled, naming that parent in last_error.
-- Each dependent's row lock serialises two parents ending at once in two transactions: the
-- second decrement reads the first's committed value, so a dependent is released exactly once.
-- A cancelled dependent is itself a job that ended: the same trigger cancels its own
-- dependents in turn.
--
-- Expand-only: a new status value, a nullable column, new tables.
ALTER TYPE tickwork.job_status ADD VALUE IF NOT EXISTS 'waiting';

-- The check is NOT VALID: every existing row has NULL, and validating would scan the table
-- under the column's ACCESS EXCLUSIVE lock. New and updated rows are checked all the same.
ALTER TABLE tickwork.jobs ADD COLUMN parents_left integer;
ALTER TABLE tickwork.jobs
    ADD CONSTRAINT jobs_parents_left_check CHECK (parents_left >= 0) NOT VALID;

CREATE TABLE tickwork.job_dependencies (
    job_id     bigint NOT NULL REFERENCES tickwork.jobs (id) ON DELETE CASCADE,
    parent_id  bigint NOT NULL REFERENCES tickwork.jobs (id) ON DELETE CASCADE,
    PRIMARY KEY (job_id, parent_id),
    CHECK (job_id <> parent_id)
);

-- A parent's dependents (the trigger; retention's cascade).
CREATE INDEX job_dependencies_parent_idx ON tickwork.job_dependencies (parent_id);

-- The jobs a task spawned (job.spawn), by the spawning job and the call's key: a retried
-- attempt that spawns again under the same key gets the first attempt's jobs, not new ones.
CREATE TABLE tickwork.job_spawns (
    job_id  bigint   NOT NULL REFERENCES tickwork.jobs (id) ON DELETE CASCADE,
    key     text     NOT NULL,
    ids     bigint[] NOT NULL,
    PRIMARY KEY (job_id, key)
);
