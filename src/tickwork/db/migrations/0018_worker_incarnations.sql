-- A worker process's identity is its incarnation, not its name (issue 29, item 2): a random
-- uuid made at each process start. The name stays, for people; two processes given one name
-- (two pods with the same --name, a Deployment's name passed as POD_NAME) never take each
-- other's jobs, since a claim records the claimer's incarnation and adoption, heartbeats and
-- the workers row go by it. A row of a worker that ran before this migration gets one now.
-- The workers table also keeps each worker's heartbeat interval, so that readers can tell a
-- worker that missed two heartbeats (stale) from a live one (issue 29, item 8). The defaults
-- stay for workers of an earlier version, which register without either during an upgrade.
ALTER TABLE tickwork.workers
    ADD COLUMN incarnation uuid NOT NULL DEFAULT gen_random_uuid(),
    ADD COLUMN heartbeat_seconds double precision NOT NULL DEFAULT 10
        CHECK (heartbeat_seconds > 0);
CREATE UNIQUE INDEX workers_incarnation_idx ON tickwork.workers (incarnation);

-- picked_by_incarnation: the incarnation of the worker process whose claim the job is running
-- under (NULL for a job never claimed, or claimed by a worker of an earlier version).
-- interruptions: how many times a stopping worker handed the job back unfinished when its
-- shutdown grace ran out; such a hand-back does not spend an attempt, and a job interrupted
-- more often than the worker's --max-interruptions ends dead. Columns with no default or a
-- constant one rewrite nothing, and no constraint is added (it would read the whole table
-- under the lock): only the worker's hand-back writes the counter, adding one.
ALTER TABLE tickwork.jobs
    ADD COLUMN picked_by_incarnation uuid,
    ADD COLUMN interruptions integer NOT NULL DEFAULT 0;
