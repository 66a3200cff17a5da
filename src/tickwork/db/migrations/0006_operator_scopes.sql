-- Operators own only their scope (the Kubernetes namespaces they watch; '{}' means all).
--
-- The scope of the operator that last synced a schedule namespace with Schedules in it:
-- a restarted operator prunes at start only what its own scope synced, and an operator of a
-- disjoint scope leaves the namespace alone. NULL: not synced by an operator since this
-- migration, or last synced empty (released).
ALTER TABLE tickwork.schedule_namespaces ADD COLUMN operator_scope text[];

-- The live operators, one row each, kept by a heartbeat: an operator starts only when no live
-- operator of the same owner watches a namespace of its scope. A row whose expires_at passed
-- belongs to an operator that died without removing it, and no longer counts.
CREATE TABLE tickwork.operators (
    owner        text        NOT NULL CHECK (owner <> ''),
    identity     text        NOT NULL CHECK (identity <> ''),
    -- Random per run: a heartbeat finding another token knows it was replaced.
    token        text        NOT NULL,
    scope        text[]      NOT NULL,
    host         text        NOT NULL,
    pid          integer     NOT NULL,
    started_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,
    PRIMARY KEY (owner, identity)
);
