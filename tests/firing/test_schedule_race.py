"""Several processes firing one namespace: a process killed inside its firing transaction
leaves nothing behind and another fires the occurrence; three workers racing on every-second
schedules make exactly one job per occurrence and miss none; two workers sharing out four
namespaces through a backlog at every due instant do too."""

from __future__ import annotations

import os
import signal
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest

import tickwork
from tests.support.forking import process_context
from tests.support.helpers import stop_processes, wait_until_sync
from tests.support.schedule_helpers import (
    NS,
    T0,
    at,
    every,
    fire,
    fire_in_process,
    jobs,
    occurrences,
    schedule,
    serve_schedules,
)
from tickwork.clock import SettableClock
from tickwork.db.queries import QUERIES
from tickwork.schedules.options import JobTemplate

Start = Any

FREEZE_LOCK = 4242
"""Advisory lock the test holds; the test-only trigger below waits for it."""

# Installed in the test's own database only: an update of tickwork.schedules (the firing
# pass's last statement, after its jobs were inserted) waits until the test lets go.
FREEZE = f"""
CREATE FUNCTION public.freeze_schedule_updates() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock({FREEZE_LOCK});
    RETURN NEW;
END;
$$;
CREATE TRIGGER freeze_updates BEFORE UPDATE ON tickwork.schedules
    FOR EACH ROW EXECUTE FUNCTION public.freeze_schedule_updates();
"""


@pytest.fixture
def start(database_url: str) -> Iterator[Start]:
    """Start a spawned process; those still alive at the end are stopped by their own pid."""
    ctx = process_context()
    started: list[Any] = []

    def launch(target: Any, *args: Any) -> Any:
        process = ctx.Process(target=target, args=(database_url, *args), daemon=True)
        process.start()
        started.append(process)
        return process

    yield launch
    stop_processes(started)


def _rows(conn: psycopg.Connection[Any], query: str, *params: Any) -> list[tuple[Any, ...]]:
    return conn.execute(query, params).fetchall()


async def test_a_process_killed_inside_its_firing_transaction_leaves_no_partial_state(
    database_url: str, conn: psycopg.Connection[Any], start: Start
) -> None:
    app = tickwork.App(database_url, clock=SettableClock(T0))
    app.sync_schedules(NS, [every("a", 60), every("b", 60)])
    app.close()
    conn.execute(FREEZE)
    conn.execute("SELECT pg_advisory_lock(%s)", (FREEZE_LOCK,))

    process = start(fire_in_process, at(60).isoformat())
    frozen: list[tuple[Any, ...]] = []

    def blocked_in_the_advance() -> bool:
        frozen[:] = _rows(
            conn,
            "SELECT a.pid, a.query FROM pg_locks l JOIN pg_stat_activity a USING (pid)"
            " WHERE l.locktype = 'advisory' AND l.objid = %s AND NOT l.granted",
            FREEZE_LOCK,
        )
        return bool(frozen)

    wait_until_sync(blocked_in_the_advance, what="the firing pass to reach its last statement")
    (pid, query) = frozen[0]
    # Blocked in the advance, which follows the insert of the jobs in the same statement:
    assert QUERIES["schedule_fire"].startswith(query[:500])
    assert _rows(
        conn,
        "SELECT 1 FROM pg_locks WHERE pid = %s AND relation = 'tickwork.jobs'::regclass"
        " AND mode = 'RowExclusiveLock'",
        pid,
    )

    os.kill(process.pid, signal.SIGKILL)
    process.join(10)
    conn.execute("SELECT pg_advisory_unlock(%s)", (FREEZE_LOCK,))
    # Its server process finds the client gone and rolls back: nothing was committed.
    wait_until_sync(
        lambda: not _rows(conn, "SELECT 1 FROM pg_stat_activity WHERE pid = %s", pid),
        what="the killed process's transaction to end",
    )
    assert jobs(conn) == []
    for name in ("a", "b"):
        row = schedule(conn, name)
        assert (row["next_run_at"], row["last_job_id"]) == (at(60), None)

    conn.execute("DROP TRIGGER freeze_updates ON tickwork.schedules")
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as aconn:
        report = await fire(aconn, at(60))
    assert report.fired == 2
    assert occurrences(conn, "a") == occurrences(conn, "b") == [at(60)]


def test_three_workers_racing_make_exactly_one_job_per_occurrence(
    database_url: str, conn: psycopg.Connection[Any], start: Start
) -> None:
    names = ["w1", "w2", "w3"]
    for name in names:
        start(serve_schedules, name)
    wait_until_sync(
        lambda: len(_rows(conn, "SELECT 1 FROM tickwork.workers")) == len(names),
        timeout=30,
        what="the workers to start",
    )
    app = tickwork.App(database_url)  # the database clock, like the workers
    app.sync_schedules(NS, [every(f"s{i:02}", 1) for i in range(20)])
    app.close()

    # Every check reads one snapshot, taken when it holds: the workers go on firing and running
    # meanwhile, and retention deletes each schedule's succeeded jobs beyond its newest 3
    # (successfulJobsHistoryLimit), so a later read may find fewer.
    seen: list[tuple[Any, ...]] = []

    def fired_six_each_and_ran_them() -> bool:
        seen[:] = _rows(
            conn,
            "SELECT schedule_name, occurrence_at, status = 'succeeded' FROM tickwork.jobs"
            " ORDER BY schedule_name, occurrence_at",
        )
        counts = Counter(name for name, _, _ in seen)
        succeeded = sum(1 for _, _, done in seen if done)
        ran = succeeded >= len(seen) - 20 * 2  # the workers run them as they come
        return len(counts) == 20 and min(counts.values()) >= 6 and ran

    wait_until_sync(
        fired_six_each_and_ran_them, timeout=120, what="six occurrences of each schedule, run"
    )
    assert len(seen) == len({(name, when) for name, when, _ in seen})
    assert len(seen) >= 20 * 6
    for i in range(20):
        fired = [when for name, when, _ in seen if name == f"s{i:02}"]
        assert len(fired) >= 6
        expected = [fired[0] + timedelta(seconds=k) for k in range(len(fired))]
        assert fired == expected, f"s{i:02} missed an occurrence"
    lags = sorted(
        r[0]
        for r in _rows(
            conn, "SELECT extract(epoch FROM created_at - occurrence_at) FROM tickwork.jobs"
        )
    )
    assert lags[int(len(lags) * 0.99)] < 1.0, f"p99 firing lag {lags[int(len(lags) * 0.99)]}s"


def test_two_workers_sharing_four_namespaces_through_backlogs_make_one_job_per_occurrence(
    database_url: str, conn: psycopg.Connection[Any], start: Start
) -> None:
    """Each due instant puts 1,600 schedules in the claim, more than a batch: the workers
    fire their shares with two passes at once each, and steal from each other once short."""
    namespaces = tuple(f"shared-{i}" for i in range(4))
    for name in ("w1", "w2"):
        start(serve_schedules, name, namespaces)
    wait_until_sync(
        lambda: len(_rows(conn, "SELECT 1 FROM tickwork.workers")) == 2,
        timeout=30,
        what="the workers to start",
    )
    app = tickwork.App(database_url)
    unserved = JobTemplate(kind="s.unserved")  # left queued: the test is about firing
    for ns in namespaces:
        app.sync_schedules(ns, [every(f"s{i:03}", 3, job=unserved) for i in range(400)])
    app.close()
    wait_until_sync(
        lambda: _rows(conn, "SELECT count(*) FROM tickwork.jobs")[0][0] >= 1_600 * 2,
        timeout=120,
        what="two due instants' jobs",
    )

    (total, distinct) = _rows(
        conn,
        "SELECT count(*), count(DISTINCT (schedule_namespace, schedule_name, occurrence_at))"
        " FROM tickwork.jobs",
    )[0]
    assert total == distinct, "an occurrence fired twice"
    assert total >= 1_600 * 2
    gaps = _rows(
        conn,
        "SELECT schedule_namespace, schedule_name FROM tickwork.jobs"
        " GROUP BY 1, 2"
        " HAVING count(*) <> 1 + extract(epoch FROM max(occurrence_at) - min(occurrence_at)) / 3",
    )
    assert gaps == [], "occurrences missed"
