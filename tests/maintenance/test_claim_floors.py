"""Claim floors: per queue and kind, the oldest available job (never later than the refresh)
less a margin; the claim starts its scan at the lowest floor of what it serves, so the jobs
claimed while an old snapshot holds vacuum back cost it no row reads; a job older than its
floor waits for the next refresh, and a pair without a valid floor is claimed from the start.
The real claim statement on a real PostgreSQL; times are pinned (``now``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import psycopg
import pytest

from tests.support.helpers import T0, at, claim
from tickwork.db import claim_floors as claim_floors_db
from tickwork.db import jobs as jobs_db
from tickwork.db import queries, store
from tickwork.maintenance import claim_floors

A, B = "t.floor.a", "t.floor.b"
MARGIN = 10.0
INTERVAL = 5.0


def _insert(conn: psycopg.Connection[Any], kind: str, *run_ats: datetime) -> list[int]:
    return [
        conn.execute(
            "INSERT INTO tickwork.jobs (kind, run_at) VALUES (%s, %s) RETURNING id", (kind, run_at)
        ).fetchone()[0]  # type: ignore[index]
        for run_at in run_ats
    ]


def _refresh(conn: psycopg.Connection[Any], now: datetime) -> dict[tuple[str, str], datetime]:
    floors = store.run(
        conn,
        claim_floors_db.refresh_claim_floors(MARGIN, claim_floors.VALID_INTERVALS * INTERVAL, now),
    )
    return {(f.queue, f.kind): f.floor for f in floors}


def _ids(conn: psycopg.Connection[Any], kinds: Sequence[str], now: datetime) -> set[int]:
    return {job.id for job in claim(conn, kinds=kinds, now=now)}


def test_a_floor_is_the_oldest_available_job_less_the_margin_never_later_than_now(
    conn: psycopg.Connection[Any],
) -> None:
    _insert(conn, A, at(-100), at(-50), at(500))
    _insert(conn, B, at(300))  # only a future job: the refresh time bounds it
    (running,) = _insert(conn, "t.floor.running", at(-1000))
    assert [j.id for j in claim(conn, kinds=["t.floor.running"], now=at(-1))] == [running]

    assert _refresh(conn, at(0)) == {
        ("default", A): at(-100 - MARGIN),
        ("default", B): at(-MARGIN),
        ("default", "t.floor.running"): at(-MARGIN),  # running only: no job waits below now
    }
    # Its jobs gone, a pair keeps a floor that moves with the refresh time.
    conn.execute("DELETE FROM tickwork.jobs WHERE kind = %s", (A,))
    assert _refresh(conn, at(60))[("default", A)] == at(60 - MARGIN)


def test_a_job_older_than_its_floor_waits_for_the_next_refresh(
    conn: psycopg.Connection[Any],
) -> None:
    (first,) = _insert(conn, A, at(0))
    _refresh(conn, at(0))  # floor: at(-10)
    (late,) = _insert(conn, A, at(-3600))  # a past run_at, enqueued after the refresh
    (due,) = _insert(conn, A, at(-5))  # within the margin: not held back

    assert _ids(conn, [A], at(1)) == {first, due}
    _refresh(conn, at(2))
    assert _ids(conn, [A], at(3)) == {late}


def test_a_pair_without_a_valid_floor_is_claimed_from_the_start(
    conn: psycopg.Connection[Any],
) -> None:
    _insert(conn, A, at(0))
    _refresh(conn, at(0))
    claim(conn, kinds=[A], now=at(0))
    (unfloored,) = _insert(conn, B, at(-3600))  # B has no floor yet
    (old_a,) = _insert(conn, A, at(-3600))
    # One pair without a floor: the claim starts at the beginning for all it serves.
    assert _ids(conn, [A, B], at(1)) == {unfloored, old_a}

    (stale,) = _insert(conn, A, at(-7200))
    assert _ids(conn, [A], at(1)) == set(), "below a valid floor"
    valid_until = at(0 + claim_floors.VALID_INTERVALS * INTERVAL)
    assert _ids(conn, [A], valid_until) == {stale}, "a floor nothing refreshed hides nothing"


def _claim_buffers(conn: psycopg.Connection[Any], now: datetime) -> int:
    """Shared buffers the claim of one job reads (EXPLAIN ANALYZE, rolled back)."""
    op = jobs_db.claim_jobs("w", ["default"], {A: 5}, 1, 30.0, now)
    with conn.transaction(force_rollback=True):
        row = conn.execute(
            "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + queries.QUERIES[op.query], op.params
        ).fetchone()
    assert row is not None
    plan = (row[0] if isinstance(row[0], list) else json.loads(row[0]))[0]["Plan"]
    return int(plan["Shared Hit Blocks"]) + int(plan["Shared Read Blocks"])


@pytest.mark.parametrize("floored", [False, True])
def test_with_a_snapshot_held_open_the_claim_skips_what_was_claimed_since(
    database_url: str, conn: psycopg.Connection[Any], floored: bool
) -> None:
    claimed = 20_000
    conn.execute(
        "INSERT INTO tickwork.jobs (kind, run_at)"
        " SELECT %s, %s + n * interval '1 s' FROM generate_series(1, %s) AS n",
        (A, at(-30_000), claimed + 10),
    )
    conn.execute("VACUUM ANALYZE tickwork.jobs")
    with psycopg.connect(database_url) as holder:  # a transaction left open
        holder.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        holder.execute("SELECT count(*) FROM tickwork.jobs").fetchone()  # the snapshot
        assert len(claim(conn, kinds=[A], limit=claimed, now=T0)) == claimed
        if floored:
            _refresh(conn, T0)
        conn.execute("VACUUM tickwork.jobs")  # removes nothing: the snapshot is older
        buffers = _claim_buffers(conn, at(1))
        holder.rollback()
    pages = claimed // 100  # heap pages the claimed rows fill, at most ~100 rows a page
    if floored:
        assert buffers < pages, "the claimed rows below the floor were not read"
    else:
        assert buffers > pages, "without a floor the claim reads every claimed row"
