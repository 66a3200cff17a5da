-- Fair claiming, concurrency limits and rate limits (docs/flow-control.md).
--
-- tickwork.flow_rules: one row per queue, kind or schedule namespace with a rule: at most
-- max_running of its jobs running fleet-wide; at most `rate` starts per period_seconds (per
-- value of the payload field rate_key, when given); a namespace's weight in fair claiming.
-- The id is the advisory lock a claim takes (job_claim_rules) before it counts what the rule
-- allows, so two claimers never both take the last room.
CREATE TABLE tickwork.flow_rules (
    id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    scope           text        NOT NULL CHECK (scope IN ('queue', 'kind', 'namespace')),
    name            text        NOT NULL CHECK (name <> ''),
    max_running     integer     CHECK (max_running BETWEEN 1 AND 100000),
    rate            integer     CHECK (rate BETWEEN 1 AND 1000000),
    period_seconds  double precision CHECK (period_seconds > 0 AND period_seconds <= 86400),
    rate_key        text        CHECK (rate_key <> ''),
    weight          integer     CHECK (weight BETWEEN 1 AND 1000),
    set_by          text        NOT NULL,
    set_at          timestamptz NOT NULL,
    UNIQUE (scope, name),
    CHECK ((rate IS NULL) = (period_seconds IS NULL)),
    CHECK (rate_key IS NULL OR rate IS NOT NULL),
    CHECK (weight IS NULL OR scope = 'namespace'),
    CHECK (max_running IS NOT NULL OR rate IS NOT NULL OR weight IS NOT NULL)
);

-- The starts of rate-limited jobs, one row per claim statement and key, kept one period: a
-- claim counts the rows of the last period before it takes more (a sliding window, so at most
-- `rate` starts fall in any period).
CREATE TABLE tickwork.flow_starts (
    rule_id     bigint      NOT NULL REFERENCES tickwork.flow_rules (id) ON DELETE CASCADE,
    key         text        NOT NULL,
    started_at  timestamptz NOT NULL,
    starts      integer     NOT NULL CHECK (starts > 0)
);
CREATE INDEX flow_starts_rule_idx ON tickwork.flow_starts (rule_id, started_at);

-- A concurrency key may let more than one job run at once: concurrency_limit (NULL: 1). Each
-- running job of a key holds one of its slots 0 .. limit - 1, and the unique index on
-- (key, slot) is the final guard, as the one on the key alone was for a limit of 1.
ALTER TABLE tickwork.jobs
    ADD COLUMN concurrency_limit integer CHECK (concurrency_limit BETWEEN 1 AND 10000),
    ADD COLUMN concurrency_slot integer;
CREATE UNIQUE INDEX jobs_concurrency_slot_idx
    ON tickwork.jobs (concurrency_key, (coalesce(concurrency_slot, 0)))
    WHERE concurrency_key IS NOT NULL AND status = 'running';
DROP INDEX tickwork.jobs_concurrency_key_idx;

-- Fair claiming: the waiting jobs of priority 0 by queue and tenant (the schedule namespace;
-- '' for jobs enqueued from code), so that a claim finds each tenant's due jobs in one descent
-- and the tenants themselves by skipping from one to the next.
CREATE INDEX jobs_tenant_idx
    ON tickwork.jobs (queue, (coalesce(schedule_namespace, '')), run_at, id)
    WHERE status = 'available' AND priority = 0;
