"""The firing claim's search for a namespace's first due schedule, past the schedules it fired:
their old entries in schedules_due_idx stay until a vacuum, and the search reads them from the
index alone once a scan has marked them dead (migration 0031). With B-tree deduplication the
entries of schedules due at the same time shared posting lists, which can only be marked once
every schedule in them has fired: until then each claim visited the table for each one fired
(bench/firing.py at a million: 101,000 of a claim's 113,000 buffers). Measured in buffers on a
real PostgreSQL, from the claim's EXPLAIN (ANALYZE, BUFFERS), rolled back."""

from __future__ import annotations

import time
from typing import Any

import psycopg

import tickwork
from tests.support import explain
from tests.support.schedule_helpers import every
from tickwork.db import schedules as schedules_db
from tickwork.db import store
from tickwork.schedules.options import JobTemplate

NAMESPACE = "walk"
GROUP = 1000
"""Schedules due at one and the same time, as 167 a second are in each namespace when a
million are due over a minute in 100 namespaces."""


def _scalar(conn: psycopg.Connection[Any], query: str, *params: Any) -> Any:
    row = conn.execute(query, params).fetchone()
    assert row is not None
    return row[0]


def _settled(conn: psycopg.Connection[Any], xid: Any) -> None:
    """Wait until no transaction older than ``xid`` runs, in any database of the server (the
    tests' next database being copied from the template, another test's): a snapshot counts
    those as running, so until then no scan may take ``xid``'s old rows for dead."""
    deadline = time.monotonic() + 60
    while not _scalar(conn, "SELECT pg_snapshot_xmin(pg_current_snapshot()) > %s::xid8", xid):
        assert time.monotonic() < deadline, f"a transaction older than {xid} still runs"
        time.sleep(0.01)


def test_schedules_fired_from_a_group_due_together_are_passed_over_in_the_index(
    app: tickwork.App, conn: psycopg.Connection[Any]
) -> None:
    """1,000 schedules due at one time, fired 50 a claim in the claim's order (each claim's
    schedules moved an hour on, as the firing does under the claim's locks): after each
    firing, once one claim has walked past the schedules just fired, the next reads the same
    few pages however many have fired (57 to 61 buffers here). With deduplication it read a
    table page again for each one fired in the group's posting list not yet wholly fired."""
    # A payload that makes each row about 1.7 KB, two to a page (the table's fillfactor is 50):
    # a visit to a fired schedule's old row is then a page read of its own, not shared.
    padded = JobTemplate(kind="t.walk", payload={"pad": "x" * 1200})
    app.sync_schedules(NAMESPACE, [every("s0000000", 3600, job=padded)], owner="test")
    conn.execute(
        "INSERT INTO tickwork.schedules (namespace, name, revision, spec, next_run_at,"
        " created_at, updated_at)"
        " SELECT t.namespace, 's' || lpad(i::text, 7, '0'), t.revision, t.spec,"
        "        t.next_run_at, t.created_at, t.updated_at"
        " FROM generate_series(1, %s - 1) AS i, tickwork.schedules t"
        " WHERE t.namespace = %s",
        (GROUP, NAMESPACE),
    )
    # One due time for all, written by one UPDATE: their entries side by side, as a sync or
    # the firing of the previous round leaves them.
    conn.execute(
        "UPDATE tickwork.schedules SET next_run_at = now() - interval '1 minute'"
        " WHERE namespace = %s",
        (NAMESPACE,),
    )
    conn.execute("VACUUM ANALYZE tickwork.schedules")
    after: list[int] = []
    for _ in range(12):
        with conn.transaction():
            claimed = store.run(conn, schedules_db.claim_due([NAMESPACE], 50, None))
            conn.execute(
                "UPDATE tickwork.schedules SET next_run_at = next_run_at + interval '1 hour'"
                " WHERE namespace = %s AND name = ANY(%s)",
                (NAMESPACE, [row.name for row in claimed]),
            )
            fired = _scalar(conn, "SELECT pg_current_xact_id()")
        assert len(claimed) == 50
        _settled(conn, fired)
        explain.op_buffers(
            conn, schedules_db.claim_due([NAMESPACE], 10, None)
        )  # passes the 50 just fired, and marks their entries
        after.append(explain.op_buffers(conn, schedules_db.claim_due([NAMESPACE], 10, None)))
    assert max(after) < 100, after  # with deduplication: 107 to 257, growing as a list fills
