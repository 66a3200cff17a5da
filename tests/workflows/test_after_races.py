"""Races on dependents, proven on a real PostgreSQL: two parents ending at once in two
transactions release their dependent exactly once (forced interleaving, then several worker
processes); a parent whose worker is SIGKILLed mid-run is retried by lease recovery, and its
dependents run exactly once, after it succeeded; a parent ending while a dependent is being
enqueued is never missed."""

from __future__ import annotations

import os
import signal
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

import tickwork
from tests.support.helpers import (
    MP_TIMED_KIND,
    T0,
    StartWorker,
    claim,
    job_row,
    recorded_ids,
    recorded_spans,
    scalar,
    spawned_workers,
    wait_until_sync,
)
from tickwork.db import jobs as jobs_db
from tickwork.db import store
from tickwork.model import Job

KIND = "w.race"


@pytest.fixture
def start_worker(database_url: str, tmp_path: Path) -> Iterator[StartWorker]:
    yield from spawned_workers(database_url, tmp_path)


def _blocked_on_a_lock(conn: psycopg.Connection[Any], pid: int) -> bool:
    return bool(
        scalar(
            conn,
            "SELECT coalesce(wait_event_type = 'Lock', false) FROM pg_stat_activity WHERE pid = %s",
            (pid,),
        )
    )


def _complete_in_thread(database_url: str, job: Job) -> tuple[threading.Thread, int, list[Any]]:
    """Complete ``job`` in a transaction of its own on another thread; returns the thread, its
    backend's pid and a list that receives the ids completed (or the error)."""
    other = psycopg.connect(database_url)
    pid = other.info.backend_pid
    out: list[Any] = []

    def run() -> None:
        try:
            with other:
                out.append(store.run(other, jobs_db.complete_jobs([job], T0)))
        except Exception as exc:  # reported to the test
            out.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, pid, out


def test_two_parents_ending_in_two_open_transactions_release_the_dependent_once(
    app: tickwork.App, database_url: str, conn: psycopg.Connection[Any]
) -> None:
    a, b = app.enqueue(KIND), app.enqueue(KIND)
    child = app.enqueue(KIND, after=[a, b])
    jobs = {j.id: j for j in claim(conn, kinds=[KIND])}
    version = job_row(conn, child)["version"]

    with psycopg.connect(database_url) as first:
        assert store.run(first, jobs_db.complete_jobs([jobs[a]], T0)) == {a}
        # The first completion holds the child's row lock until it commits: the second,
        # which cannot see the first's decrement yet, waits for it instead of reading 2.
        thread, pid, out = _complete_in_thread(database_url, jobs[b])
        wait_until_sync(lambda: _blocked_on_a_lock(conn, pid), what="the second to wait")
        assert job_row(conn, child)["status"] == "waiting"
        first.commit()
    thread.join(30)
    assert out == [{b}]
    row = job_row(conn, child)
    assert (row["status"], row["parents_left"], row["version"]) == ("available", 0, version + 2)
    assert [j.id for j in claim(conn, kinds=[KIND])] == [child]


def test_a_parent_ending_while_its_dependent_is_enqueued_is_not_missed(
    app: tickwork.App, database_url: str, conn: psycopg.Connection[Any]
) -> None:
    parent = app.enqueue(KIND)
    (job,) = claim(conn, kinds=[KIND])
    with psycopg.connect(database_url) as tx:
        child = app.enqueue(KIND, after=[parent], conn=tx)  # parent locked FOR SHARE
        thread, pid, out = _complete_in_thread(database_url, job)
        wait_until_sync(lambda: _blocked_on_a_lock(conn, pid), what="the completion to wait")
        tx.commit()
    thread.join(30)
    assert out == [{parent}]
    assert job_row(conn, child)["status"] == "available", "the completion saw the new edge"


def _counts(conn: psycopg.Connection[Any]) -> dict[str, int]:
    return dict(conn.execute("SELECT status::text, count(*) FROM tickwork.jobs GROUP BY 1"))


def _started_after_parents(conn: psycopg.Connection[Any], spans: dict[int, Any]) -> None:
    edges = conn.execute("SELECT job_id, parent_id FROM tickwork.job_dependencies").fetchall()
    late = [(j, p) for j, p in edges if spans[j][0] < spans[p][1]]
    assert not late, f"dependents started before a parent ended: {late[:5]}"


def test_parents_finishing_on_different_processes_release_each_join_exactly_once(
    database_url: str, conn: psycopg.Connection[Any], tmp_path: Path, start_worker: StartWorker
) -> None:
    groups, fan = 150, 3
    names = ["race-0", "race-1", "race-2"]
    overrides = {"concurrency": 4, "claim_batch": 1, "poll_seconds": 0.2, "prefetch": 0}
    processes = [start_worker(name, overrides) for name in names]
    wait_until_sync(
        lambda: scalar(conn, "SELECT count(*) FROM tickwork.workers") == len(names),
        timeout=30,
        what="the workers to register",
    )
    app = tickwork.App(database_url)
    try:
        joins = []
        with app.connection() as tx:  # all at once: the parents start together
            for _ in range(groups):
                parents = app.enqueue_many(MP_TIMED_KIND, [{}] * fan, conn=tx)
                joins.append(app.enqueue(MP_TIMED_KIND, {"join": True}, after=parents, conn=tx))
    finally:
        app.close()
    total = groups * (fan + 1)
    wait_until_sync(
        lambda: _counts(conn).get("succeeded", 0) == total, timeout=90, what="every job to succeed"
    )
    for process in processes:
        os.kill(process.pid, signal.SIGTERM)
    for process in processes:
        process.join(15)

    assert _counts(conn) == {"succeeded": total}
    executions = Counter(i for ran in recorded_ids(tmp_path).values() for i in ran)
    assert len(executions) == total and max(executions.values()) == 1, "each job ran once"
    _started_after_parents(conn, recorded_spans(tmp_path))
    split = scalar(
        conn,
        "SELECT count(*) FROM (SELECT d.job_id FROM tickwork.job_dependencies d"
        " JOIN tickwork.jobs p ON p.id = d.parent_id GROUP BY d.job_id"
        " HAVING count(DISTINCT p.picked_by) > 1) AS s",
    )
    assert split > 0, "some joins had parents run by different processes"


def test_a_parent_killed_mid_run_is_retried_and_its_dependents_run_once_after_it(
    database_url: str, conn: psycopg.Connection[Any], tmp_path: Path, start_worker: StartWorker
) -> None:
    overrides = {
        "concurrency": 4,
        "poll_seconds": 0.2,
        "lease_seconds": 2.0,
        "heartbeat_seconds": 0.5,
        "maintenance_seconds": 0.5,
    }
    victim = start_worker("victim", overrides)
    app = tickwork.App(database_url)
    try:
        parent = app.enqueue(MP_TIMED_KIND, {"sleep": 1.5})
        wait_until_sync(
            lambda: job_row(conn, parent)["status"] == "running", timeout=30, what="the parent"
        )
        children = app.enqueue_many(MP_TIMED_KIND, [{}] * 5, after=[parent])
        grandchild = app.enqueue(MP_TIMED_KIND, {}, after=children)
    finally:
        app.close()
    os.kill(victim.pid, signal.SIGKILL)
    victim.join(10)
    assert {job_row(conn, c)["status"] for c in children} == {"waiting"}

    survivor = start_worker("survivor", overrides)
    wait_until_sync(
        lambda: job_row(conn, grandchild)["status"] == "succeeded",
        timeout=60,
        what="the whole graph to succeed",
    )
    os.kill(survivor.pid, signal.SIGTERM)
    survivor.join(15)

    row = job_row(conn, parent)
    assert (row["status"], row["attempt"], row["picked_by"]) == ("succeeded", 2, "survivor")
    recorded = recorded_ids(tmp_path)
    assert recorded["victim"] == [parent], "the victim started the parent and nothing else"
    executions = Counter(recorded["survivor"])
    assert executions[parent] == 1
    assert {c: executions[c] for c in [*children, grandchild]} == dict.fromkeys(
        [*children, grandchild], 1
    ), "each dependent ran exactly once"
    _started_after_parents(conn, recorded_spans(tmp_path))
