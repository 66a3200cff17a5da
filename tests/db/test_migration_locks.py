"""Migrations against long locks on the two big tables, ``tickwork.jobs`` and
``tickwork.schedules``: a statement on either, in a migration after the one that created it,
must not rewrite the table (a column's type changed, a column added with a volatile default),
build an index under the migration's lock (without CONCURRENTLY: every migration runs in a
transaction, so today each index is such a build), validate a constraint by scanning it (a
CHECK or FOREIGN KEY added without NOT VALID, a CHECK on an added column), nor UPDATE or DELETE
the whole table. Each one that does is named below with why it was accepted; a new one fails
this test until it is rewritten or reviewed and named here.

The lint reads the SQL text (statements split at semicolons outside dollar quotes and comments);
it is a reviewer's checklist, not a parser: it errs towards flagging.
"""

from __future__ import annotations

import re

import pytest

from tests.support import migration_sql

BIG = ("tickwork.jobs", "tickwork.schedules")

REVIEWED: dict[tuple[str, str], str] = {
    ("0005_schedule_firing_errors.sql", "check"): "firing_failures NOT NULL DEFAULT 0 with a"
    " CHECK: one pass over the schedules that refuses nothing (1.0 s at 1,000,000)",
    ("0005_schedule_firing_errors.sql", "index"): "schedules_retry_idx: partial, empty at the"
    " upgrade (no schedule had a firing error yet)",
    ("0004_admin_indexes.sql", "index"): "console indexes, built when the jobs table was young"
    " (28 s of claims held up at 10,000,000 jobs)",
    ("0007_cancel_requests_and_orphaned_leases.sql", "index"): "a partial index (on_dead_pending)"
    " that holds no row at the upgrade: its build reads the table once (2.6 s)",
    ("0011_schedule_history_limits.sql", "index"): "jobs_schedule_history_idx replaces"
    " jobs_schedule_dead_idx; built once under the lock (21 s of claims held up)",
    ("0015_dead_jobs_by_queue.sql", "index"): "jobs_status_id_idx rebuilt with queue included"
    " (2 s)",
    ("0016_schedule_spec_key.sql", "rewrite"): "the schedules table rewritten for its stored"
    " generated spec key (21 s at 1,000,000 schedules, claims held up too: their trigger"
    " updates the schedules)",
    ("0019_concurrency_key_order.sql", "index"): "jobs_concurrency_key_order_idx: only waiting"
    " jobs that carry a key (3 s)",
    ("0021_flow_rules.sql", "index"): "jobs_concurrency_slot_idx (running jobs with a key) and"
    " jobs_tenant_idx (waiting jobs of priority 0): partial, built under the lock (9 s with"
    " the check)",
    ("0021_flow_rules.sql", "check"): "the new concurrency_limit column is NULL everywhere:"
    " one pass that refuses nothing",
    ("0024_scoped_kind_index.sql", "index"): "jobs_namespace_kind_idx (jobs of a schedule"
    " namespace, by kind): partial, built under the lock; reads the table once and sorts the"
    " scheduled jobs (1.3-3.4 s at 1,000,000 jobs of which 300,000 scheduled, on a loaded"
    " machine; about ten times that at 10,000,000)",
    ("0029_tenant_kind_index.sql", "index"): "jobs_tenant_kind_idx (waiting jobs of priority 0"
    " by queue, kind and tenant): partial, built under the lock; reads the table once and sorts"
    " the waiting jobs (4.5 s with 1,000,000 of them waiting, load 7 on 2 cores; a table of"
    " finished jobs adds only its read). Without it a claim read every waiting job of the"
    " kinds it does not serve: 1,100,000 buffers and 5.2 s a claim at 1,000,000 such jobs",
}
"""(migration, kind of lock) -> why it was accepted, with the migration's lock time at
1,000,000 schedules and 10,000,000 jobs (bench/migration_locks.py, docs/deployment.md). Issue
31 asks for migrations that never take such locks (an index built CONCURRENTLY outside the
migration's transaction); until the runner can, each is named here."""

_VOLATILE = re.compile(r"\b(now|clock_timestamp|random|gen_random_uuid|uuid_generate_v4)\s*\(")


def _locks(statement: str) -> set[str]:
    """The kinds of long lock a statement on a big table takes: index, rewrite, check, update."""
    s = statement.lower()
    if s.startswith("create or replace function") or s.startswith("create function"):
        return set()
    target = next((t for t in BIG if re.search(rf"\b{re.escape(t)}\b(?!_)", s)), None)
    if target is None:
        return set()
    found = set()
    if re.match(r"create (unique )?index (?!concurrently)", s) and re.search(
        rf"\bon {re.escape(target)}\b", s
    ):
        found.add("index")
    if s.startswith(f"alter table {target}") or s.startswith(f"alter table only {target}"):
        if re.search(r"\balter column \w+ (set data )?type\b", s):
            found.add("rewrite")
        if re.search(r"\badd column\b[^,]*\bdefault\b", s) and _VOLATILE.search(s):
            found.add("rewrite")
        if re.search(r"\badd (constraint \w+ )?(check|foreign key)\b", s) and "not valid" not in s:
            found.add("check")
        if re.search(r"\badd column\b[^,]*\bcheck\b", s):
            found.add("check")
        if re.search(r"\bset (logged|unlogged|tablespace)\b", s):
            found.add("rewrite")
        if re.search(r"\bgenerated always as\b.*\bstored\b", s):
            found.add("rewrite")
    if re.match(rf"(update|delete from) {re.escape(target)}\b", s) and " where " not in s:
        found.add("update")
    return found


def _created_in(text: str) -> set[str]:
    return {t for t in BIG if re.search(rf"create table {re.escape(t)}\b", text.lower())}


def _found() -> dict[tuple[str, str], list[str]]:
    found: dict[tuple[str, str], list[str]] = {}
    for name, text in migration_sql.shipped():
        fresh = _created_in(text)
        for statement in migration_sql.statements(text):
            if any(t in statement.lower() for t in fresh):
                continue  # the table is created in this same migration: empty, no one waits
            for kind in _locks(statement):
                found.setdefault((name, kind), []).append(statement[:120])
    return found


def test_every_long_lock_on_the_big_tables_is_a_reviewed_one() -> None:
    unreviewed = {key: s for key, s in _found().items() if key not in REVIEWED}
    assert not unreviewed, "long locks on tickwork.jobs or tickwork.schedules:\n" + "\n".join(
        f"{name} ({kind}): {statements}" for (name, kind), statements in unreviewed.items()
    )


def test_every_reviewed_lock_is_still_there() -> None:
    """An exception for a lock no migration takes is a stale one: remove it."""
    stale = set(REVIEWED) - set(_found())
    assert not stale, f"reviewed but not found: {sorted(stale)}"


@pytest.mark.parametrize(
    ("statement", "kinds"),
    [
        ("CREATE INDEX x ON tickwork.jobs (queue)", {"index"}),
        ("CREATE INDEX CONCURRENTLY x ON tickwork.jobs (queue)", set()),
        ("CREATE UNIQUE INDEX x ON tickwork.schedules (name) WHERE enabled", {"index"}),
        ("ALTER TABLE tickwork.jobs ALTER COLUMN kind TYPE varchar(10)", {"rewrite"}),
        ("ALTER TABLE tickwork.jobs ADD COLUMN a timestamptz DEFAULT now()", {"rewrite"}),
        ("ALTER TABLE tickwork.jobs ADD COLUMN a integer DEFAULT 0", set()),
        (
            "ALTER TABLE tickwork.schedules ADD COLUMN k text GENERATED ALWAYS AS (md5(n)) STORED",
            {"rewrite"},
        ),
        ("ALTER TABLE tickwork.jobs ADD COLUMN a integer CHECK (a > 0)", {"check"}),
        ("ALTER TABLE tickwork.jobs ADD CONSTRAINT c CHECK (a > 0)", {"check"}),
        ("ALTER TABLE tickwork.jobs ADD CONSTRAINT c CHECK (a > 0) NOT VALID", set()),
        ("UPDATE tickwork.schedules SET spec = spec", {"update"}),
        ("UPDATE tickwork.schedules SET spec = spec WHERE name = 'x'", set()),
        ("DELETE FROM tickwork.jobs", {"update"}),
        ("CREATE INDEX x ON tickwork.jobs_archive (queue)", set()),
        ("CREATE INDEX x ON tickwork.flow_starts (rule_id)", set()),
    ],
)
def test_the_lint_flags_what_takes_a_long_lock(statement: str, kinds: set[str]) -> None:
    assert _locks(statement) == kinds


def test_statements_split_outside_dollar_quotes_and_comments() -> None:
    text = "CREATE FUNCTION f() AS $$ SELECT 1; SELECT 2; $$; -- a comment; here\nSELECT 3;"
    assert migration_sql.statements(text) == [
        "CREATE FUNCTION f() AS $$ SELECT 1; SELECT 2; $$",
        "SELECT 3",
    ]
