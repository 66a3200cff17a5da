"""Several worker processes on one database: every job runs exactly once when all stay up,
at least once (and ends succeeded) when one of them is killed mid-run, and once or not at all
(cancelled) when its schedule is pruned mid-drain; backfilled jobs keep their schedule's
overlap policy (one at a time, or side by side under Allow)."""

from __future__ import annotations

import os
import signal
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

import tickwork
from tests.support.helpers import (
    MP_KIND,
    MP_TIMED_KIND,
    StartWorker,
    recorded_ids,
    recorded_spans,
    scalar,
    spawned_workers,
    wait_until_sync,
)
from tickwork.schedules.definition import ScheduleDefinition
from tickwork.schedules.options import ConcurrencyPolicy, JobTemplate


@pytest.fixture
def start_worker(database_url: str, tmp_path: Path) -> Iterator[StartWorker]:
    yield from spawned_workers(database_url, tmp_path)


def _counts(conn: psycopg.Connection) -> dict[str, int]:
    return dict(conn.execute("SELECT status::text, count(*) FROM tickwork.jobs GROUP BY 1"))


def _wait_registered(conn: psycopg.Connection, names: list[str]) -> None:
    wait_until_sync(
        lambda: (
            sorted(r[0] for r in conn.execute("SELECT name FROM tickwork.workers")) == sorted(names)
        ),
        timeout=30,
        what=f"workers {names} to register",
    )


def _stop(processes: list[Any]) -> None:
    for process in processes:
        os.kill(process.pid, signal.SIGTERM)
    for process in processes:
        process.join(15)
        assert process.exitcode == 0, f"{process.name} exited with {process.exitcode}"


def test_three_processes_drain_5000_jobs_each_run_exactly_once(
    database_url: str, conn: psycopg.Connection, tmp_path: Path, start_worker: StartWorker
) -> None:
    jobs = 5000
    names = ["mp-0", "mp-1", "mp-2"]
    overrides = {"concurrency": 10, "claim_batch": 50, "poll_seconds": 0.5}
    processes = [start_worker(name, overrides) for name in names]
    _wait_registered(conn, names)

    app = tickwork.App(database_url)
    try:
        ids = app.enqueue_many(MP_KIND, [{}] * jobs)
    finally:
        app.close()

    wait_until_sync(
        lambda: _counts(conn).get("succeeded", 0) == jobs, timeout=45, what="all jobs to succeed"
    )
    _stop(processes)

    assert _counts(conn) == {"succeeded": jobs}
    assert scalar(conn, "SELECT count(*) FROM tickwork.jobs WHERE attempt <> 1") == 0
    recorded = recorded_ids(tmp_path)
    executions = Counter(job_id for ran in recorded.values() for job_id in ran)
    assert len(executions) == jobs
    assert set(executions) == set(ids)
    assert max(executions.values()) == 1, "no job ran twice"
    assert sorted(recorded) == names
    assert all(recorded[name] for name in names), "every process did some of the work"
    # The process that ran a job is the one the row says picked it.
    picked = dict(conn.execute("SELECT id, picked_by FROM tickwork.jobs"))
    assert all(picked[job_id] == name for name, ran in recorded.items() for job_id in ran)


def test_jobs_of_a_killed_process_are_recovered_and_all_end_succeeded(
    database_url: str, conn: psycopg.Connection, tmp_path: Path, start_worker: StartWorker
) -> None:
    jobs = 2000
    names = ["mp-victim", "mp-a", "mp-b"]
    overrides = {
        "concurrency": 5,
        "claim_batch": 20,
        "poll_seconds": 0.2,
        "lease_seconds": 3.0,
        "heartbeat_seconds": 0.5,
        "maintenance_seconds": 0.5,
    }
    victim, *survivors = [start_worker(name, overrides) for name in names]
    _wait_registered(conn, names)

    app = tickwork.App(database_url)
    try:
        ids = app.enqueue_many(MP_KIND, [{"sleep": 0.01}] * jobs)
    finally:
        app.close()

    def victim_busy() -> bool:
        return bool(
            scalar(
                conn,
                "SELECT count(*) FILTER (WHERE picked_by = 'mp-victim' AND status = 'running') > 0"
                " AND count(*) FILTER (WHERE status = 'succeeded') >= 100 FROM tickwork.jobs",
            )
        )

    wait_until_sync(victim_busy, timeout=30, what="the victim to be running jobs")
    os.kill(victim.pid, signal.SIGKILL)
    victim.join(10)
    assert victim.exitcode == -signal.SIGKILL
    orphaned = scalar(
        conn,
        "SELECT count(*) FROM tickwork.jobs WHERE picked_by = 'mp-victim' AND status = 'running'",
    )
    assert orphaned > 0, "the victim died holding jobs"

    wait_until_sync(
        lambda: _counts(conn) == {"succeeded": jobs},
        timeout=45,
        what="every job to succeed after lease recovery",
    )
    _stop(survivors)

    assert _counts(conn) == {"succeeded": jobs}, "none left running"
    recovered = {
        row[0]
        for row in conn.execute(
            "SELECT id FROM tickwork.jobs"
            " WHERE last_error LIKE 'lease expired: worker mp-victim %%'"
        )
    }
    assert len(recovered) >= orphaned
    assert (
        scalar(
            conn, "SELECT min(attempt) FROM tickwork.jobs WHERE id = ANY(%s)", (list(recovered),)
        )
        == 2
    ), "a recovered job's lost attempt counts"
    assert (
        scalar(
            conn,
            "SELECT count(*) FROM tickwork.jobs WHERE id = ANY(%s) AND picked_by = 'mp-victim'",
            (list(recovered),),
        )
        == 0
    ), "recovered jobs were finished by the survivors"

    recorded = recorded_ids(tmp_path)
    executions = Counter(job_id for ran in recorded.values() for job_id in ran)
    assert set(executions) == set(ids), "every job ran at least once"
    twice = {job_id for job_id, n in executions.items() if n > 1}
    assert twice <= recovered, "only jobs taken from the dead worker ran again"
    assert max(executions.values()) <= 2


def test_pruning_while_processes_claim_each_job_runs_once_or_is_cancelled(
    database_url: str, conn: psycopg.Connection, tmp_path: Path, start_worker: StartWorker
) -> None:
    """A schedule's backlog drained by three worker processes is pruned mid-drain: every job
    ends either succeeded, run exactly once, or cancelled, never run; none is left pending."""
    jobs = 3000
    names = ["del-0", "del-1", "del-2"]
    overrides = {"concurrency": 10, "claim_batch": 20, "poll_seconds": 0.2}
    processes = [start_worker(name, overrides) for name in names]
    _wait_registered(conn, names)

    app = tickwork.App(database_url)
    try:
        job = JobTemplate(kind=MP_KIND, payload={"sleep": 0.05})
        app.sync_schedules("ns", [ScheduleDefinition("backlog", job, every=timedelta(seconds=1))])
        end = scalar(conn, "SELECT date_trunc('second', now())") - timedelta(seconds=1)
        first = end - timedelta(seconds=jobs - 1)
        chunks = [first + timedelta(seconds=k) for k in range(0, jobs, 1000)]  # 1,000 a call
        created = sum(
            app.backfill("ns", "backlog", c, c + timedelta(seconds=999)).created for c in chunks
        )
        assert created == jobs
        wait_until_sync(
            lambda: _counts(conn).get("succeeded", 0) >= 50, timeout=30, what="the drain to start"
        )
        report = app.sync_schedules("ns", [])
    finally:
        app.close()
    wait_until_sync(
        lambda: set(_counts(conn)) <= {"succeeded", "cancelled"},
        timeout=30,
        what="the running jobs to finish",
    )
    _stop(processes)

    statuses = dict(conn.execute("SELECT id, status::text FROM tickwork.jobs"))
    executions = Counter(job_id for ran in recorded_ids(tmp_path).values() for job_id in ran)
    succeeded = {i for i, s in statuses.items() if s == "succeeded"}
    cancelled = {i for i, s in statuses.items() if s == "cancelled"}
    assert len(succeeded) + len(cancelled) == jobs
    assert set(executions) == succeeded, "a job ran iff it succeeded"
    assert max(executions.values()) == 1, "no job ran twice"
    assert report.cancelled == {"backlog": len(cancelled)}
    assert succeeded and cancelled, "the prune landed mid-drain"


def _picked_by(conn: psycopg.Connection, ids: list[int]) -> Counter[str]:
    rows = conn.execute("SELECT picked_by FROM tickwork.jobs WHERE id = ANY(%s)", (ids,))
    return Counter(str(row[0]) for row in rows)


def test_three_default_workers_share_one_second_jobs_none_hoards(
    database_url: str, conn: psycopg.Connection, tmp_path: Path, start_worker: StartWorker
) -> None:
    """Default settings (concurrency 10, adaptive prefetch): 30 one-second jobs enqueued at
    once run on all three workers, about 10 each. Before it, a burst of no-op jobs gives the
    workers a deep prefetch (fast jobs), which must not make the first claimer of the slow
    burst take it all: a worker that ran dry measures afresh. (The old default, as many
    ahead as concurrency, let the first claimer take 20 and left one worker idle.)"""
    names = ["fair-0", "fair-1", "fair-2"]
    processes = [start_worker(name, {}) for name in names]
    _wait_registered(conn, names)

    app = tickwork.App(database_url)
    try:
        fast = app.enqueue_many(MP_KIND, [{}] * 3000)
        wait_until_sync(
            lambda: _counts(conn) == {"succeeded": len(fast)}, timeout=60, what="the fast burst"
        )
        slow = app.enqueue_many(MP_KIND, [{"sleep": 1.0}] * 30)
    finally:
        app.close()
    wait_until_sync(
        lambda: _counts(conn) == {"succeeded": len(fast) + len(slow)},
        timeout=60,
        what="the one-second jobs",
    )
    _stop(processes)

    picked = _picked_by(conn, slow)
    assert sum(picked.values()) == 30
    assert set(picked) == set(names), f"every worker ran some: {picked}"
    assert min(picked.values()) >= 5, f"no worker hoards: {picked}"


def _most_at_once(spans: list[tuple[float, float]]) -> int:
    """The most of these [start, end) spans open at one instant."""
    events = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    most = running = 0
    for _, change in events:  # at a tie an end sorts first: touching spans do not overlap
        running += change
        most = max(most, running)
    return most


def test_backfilled_jobs_keep_their_schedules_overlap_policy_across_processes(
    database_url: str, conn: psycopg.Connection, tmp_path: Path, start_worker: StartWorker
) -> None:
    """8 past minutes of per-minute schedules of 0.5 s jobs, backfilled, drained by three
    worker processes (room for 30 jobs at once): those of the Forbid, BufferOne and Replace
    schedules never two at a time, oldest occurrence first, none cancelled, while the Allow
    schedule's run side by side; the serial schedules run alongside each other (the fleet had
    the room)."""
    names = ["bf-0", "bf-1", "bf-2"]
    processes = [start_worker(name, {"poll_seconds": 0.2}) for name in names]
    _wait_registered(conn, names)

    policies = {p.value.lower(): p for p in ConcurrencyPolicy}
    job = JobTemplate(kind=MP_TIMED_KIND, payload={"sleep": 0.5})
    app = tickwork.App(database_url)
    try:
        app.sync_schedules(
            "bf",
            [
                ScheduleDefinition(
                    name,
                    job,
                    schedule="* * * * *",
                    concurrency_policy=policy,
                    successful_jobs_history_limit=20,  # retention keeps them for the checks
                )
                for name, policy in policies.items()
            ],
        )
        end = scalar(conn, "SELECT date_trunc('minute', now())")
        for name in policies:
            assert app.backfill("bf", name, end - timedelta(minutes=7), end).created == 8
    finally:
        app.close()
    wait_until_sync(
        lambda: _counts(conn) == {"succeeded": 32}, timeout=90, what="every backfilled job"
    )
    _stop(processes)

    spans = recorded_spans(tmp_path)
    by_schedule: dict[str, list[tuple[float, float]]] = {name: [] for name in policies}
    for job_id, name in conn.execute(
        "SELECT id, schedule_name FROM tickwork.jobs ORDER BY occurrence_at"
    ):
        by_schedule[name].append(spans[job_id])
    assert sum(len(ran) for ran in by_schedule.values()) == len(spans) == 32, "each ran once"
    for name in ("forbid", "bufferone", "replace"):
        assert _most_at_once(by_schedule[name]) == 1, f"{name}: never two running"
        assert by_schedule[name] == sorted(by_schedule[name]), f"{name}: in occurrence order"
    assert _most_at_once(by_schedule["allow"]) >= 4, "Allow: side by side"
    serial = [span for name in ("forbid", "bufferone", "replace") for span in by_schedule[name]]
    assert _most_at_once(serial) == 3, "the serial schedules did not wait for each other"
