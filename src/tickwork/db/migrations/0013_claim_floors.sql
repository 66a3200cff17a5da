-- Claim floors: the claim skips the part of jobs_claim_idx that holds only jobs already claimed.
-- An index entry of a claimed job stays in jobs_claim_idx until vacuum removes it, and vacuum
-- cannot while any snapshot older than the claim is open (a long report, a forgotten
-- REPEATABLE READ session): every claim then walks past all the jobs claimed since, reading
-- each one's row, and the claim's cost grows with the length of the open transaction
-- (bench/soak.py). The duty claim_floors writes, per queue and kind, a time no available job
-- of that pair runs before (the oldest run_at of its available jobs, but never later than the
-- refresh time, less a margin): the claim reads the floor of each queue and kind it serves and
-- starts its scan there, judging older entries on the index alone. A job made available later
-- with a run_at older than its floor (enqueued with a past run_at, handed back at shutdown, an
-- occurrence fired late by more than the margin) is claimed after the next refresh. A floor
-- is used only until valid_until, so floors that nothing refreshes any more hide nothing.
CREATE TABLE tickwork.claim_floors (
    queue       text        NOT NULL,
    kind        text        NOT NULL,
    floor       timestamptz NOT NULL,
    valid_until timestamptz NOT NULL,
    PRIMARY KEY (queue, kind)
);

INSERT INTO tickwork.duties (name) VALUES ('claim_floors');
