"""The one statement trigger on UPDATE of tickwork.jobs, jobs_ended (migration 0028): the only
one that reads transition tables; a claim and a heartbeat, which end no job, write nothing
through it; a statement that ends jobs counts them, releases or cancels their dependents
(whose cancellation is counted and recorded on their own schedules in that same statement),
updates the schedules' last status and dead streaks."""

from __future__ import annotations

from typing import Any

import psycopg

import tickwork
from tests.support.helpers import claim, scalar
from tests.support.schedule_helpers import KIND, NS, at, every, fire, schedule
from tickwork.clock import SettableClock
from tickwork.db import jobs as jobs_db
from tickwork.db import store


def _counts(conn: psycopg.Connection[Any]) -> dict[tuple[str, str], int]:
    rows = conn.execute(
        "SELECT schedule_name, outcome, sum(jobs) FROM tickwork.job_counts GROUP BY 1, 2"
    ).fetchall()
    return {(str(r[0]), str(r[1])): int(r[2]) for r in rows}


def _version(conn: psycopg.Connection[Any], name: str) -> str:
    """The schedule row's version (its xmin): changes with every write of the row."""
    return str(
        scalar(
            conn,
            "SELECT xmin::text FROM tickwork.schedules WHERE namespace = %s AND name = %s",
            (NS, name),
        )
    )


def test_jobs_ended_is_the_only_update_trigger_reading_transition_tables(
    conn: psycopg.Connection[Any],
) -> None:
    rows = conn.execute(
        "SELECT tgname FROM pg_trigger"
        " WHERE tgrelid = 'tickwork.jobs'::regclass AND tgnewtable IS NOT NULL"
        " AND tgtype & 16 <> 0"  # TRIGGER_TYPE_UPDATE
    ).fetchall()
    assert [r[0] for r in rows] == ["jobs_ended"]


async def test_a_claim_and_a_heartbeat_write_neither_counts_nor_schedules(
    app: tickwork.App,
    conn: psycopg.Connection[Any],
    aconn: psycopg.AsyncConnection[Any],
    clock: SettableClock,
) -> None:
    clock.set(at(0))
    app.sync_schedules(NS, [every("often", 60, suspend_after_failures=1)])
    assert (await fire(aconn, at(60))).fired == 1
    before = _version(conn, "often")

    jobs = claim(conn, kinds=[KIND], now=at(61))
    assert len(jobs) == 1
    held = store.run(conn, jobs_db.extend_leases(jobs, 30.0, at(62)))
    assert list(held) == [jobs[0].id]
    assert _counts(conn) == {}
    assert _version(conn, "often") == before, "a claim and a heartbeat leave the schedule alone"

    job = jobs[0]
    assert store.run(conn, jobs_db.mark_job_dead(job, "boom", at(63)))
    assert _counts(conn) == {("often", "dead"): 1}
    row = schedule(conn, "often")
    assert row["last_job_status"] == "dead"
    assert row["dead_streak"] == 1
    assert row["suspended"], "suspendAfterFailures: 1 suspends at the first dead occurrence"
    assert row["failures_suspended_job_id"] == job.id


async def test_a_parent_that_dies_cancels_a_schedules_job_counted_and_recorded_at_once(
    app: tickwork.App,
    conn: psycopg.Connection[Any],
    aconn: psycopg.AsyncConnection[Any],
    clock: SettableClock,
) -> None:
    """The dependent's cancellation is an UPDATE made inside the parent's statement: the
    trigger runs for it in turn, so it is counted, its schedule records it (and queues the
    schedule for its history limits), and a cancelled occurrence leaves the dead streak."""
    clock.set(at(0))
    app.sync_schedules(NS, [every("child", 60)])
    assert (await fire(aconn, at(60))).fired == 1
    child = int(scalar(conn, "SELECT id FROM tickwork.jobs WHERE schedule_name = 'child'"))
    parent = app.enqueue("p.job")
    conn.execute(
        "UPDATE tickwork.jobs SET status = 'waiting', parents_left = 1 WHERE id = %s", (child,)
    )
    conn.execute(
        "INSERT INTO tickwork.job_dependencies (job_id, parent_id) VALUES (%s, %s)",
        (child, parent),
    )
    conn.execute("DELETE FROM tickwork.schedule_history_pending")

    [job] = claim(conn, kinds=["p.job"], now=at(61))
    assert store.run(conn, jobs_db.mark_job_dead(job, "boom", at(62)))

    assert scalar(conn, "SELECT status::text FROM tickwork.jobs WHERE id = %s", (child,)) == (
        "cancelled"
    )
    assert _counts(conn) == {("", "dead"): 1, ("child", "cancelled"): 1}
    row = schedule(conn, "child")
    assert row["last_job_status"] == "cancelled"
    assert row["dead_streak"] == 0
    queued = conn.execute("SELECT namespace, name FROM tickwork.schedule_history_pending")
    assert queued.fetchall() == [(NS, "child")]
