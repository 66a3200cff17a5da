"""An ``async def`` task that blocks the worker's event loop (a sync call, CPU-bound code) for
longer than the lease keeps its lease: the heartbeat runs in a thread of its own on a
connection of its own, so no other worker takes the job over and it runs once. The loop's
watch measures the loop's lag and warns, while the loop is blocked, naming the job that
blocks it."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any
from uuid import UUID

import prometheus_client
import psycopg
import pytest

import tickwork
from tests.db.fault_app import BLOCK
from tests.db.fault_helpers import Fleet, runs_by_process
from tests.support.helpers import (
    at,
    claim,
    running,
    scalar,
    settings,
    wait_status,
    wait_until_sync,
)
from tickwork.clock import SettableClock
from tickwork.model import Job, JobId, JobStatus
from tickwork.worker import heartbeat, loop_watch
from tickwork.worker.held import HeldJobs
from tickwork.worker.liveness import Liveness
from tickwork.worker.runner import Worker

LEASE = 4.0
_INCARNATION = UUID("00000000-0000-4000-8000-00000000feed")
"""The incarnation of the heartbeats made here by hand."""


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    (tmp_path / "runs").mkdir()
    fleet = Fleet(tmp_path / "runs", tmp_path)
    yield fleet
    fleet.stop()


def _row(conn: psycopg.Connection, job_id: int) -> tuple[Any, ...]:
    row = conn.execute(
        "SELECT status::text, attempt, picked_by FROM tickwork.jobs WHERE id = %s", (job_id,)
    ).fetchone()
    assert row is not None
    return tuple(row)


def test_an_async_task_blocking_the_loop_for_one_and_a_half_leases_runs_once(
    database_url: str, conn: psycopg.Connection, fleet: Fleet
) -> None:
    # Two `tickwork worker` processes; each recovers expired leases every half second.
    for name in ("w1", "w2"):
        fleet.start(
            name, database_url, lease_seconds=LEASE, heartbeat_seconds=1, maintenance_seconds=0.5
        )
    fleet.wait_started()
    app = tickwork.App(database_url)
    try:
        job_id = app.enqueue(BLOCK, {"seconds": 1.5 * LEASE})
    finally:
        app.close()

    wait_until_sync(
        lambda: _row(conn, job_id)[0] in ("succeeded", "dead", "cancelled"),
        timeout=60,
        what="the job to end",
    )
    status, attempt, picked_by = _row(conn, job_id)
    started = [run for ran in runs_by_process(fleet.runs).values() for run in ran]
    assert started == [(job_id, 1)], "its body started once, on its first attempt"
    assert (status, attempt) == ("succeeded", 1)
    assert fleet.exits() == ""
    blocked = [line for line in fleet.log(picked_by).splitlines() if "action=loop_blocked" in line]
    blocked = [line for line in blocked if f"job_id={job_id} " in line]
    assert len(blocked) == 1, fleet.log(picked_by)
    assert f"kind={BLOCK} " in blocked[0]
    assert "fault_app.py" in blocked[0], "it says where the loop is stuck"
    assert "action=loop_unblocked" in fleet.log(picked_by)


async def test_the_heartbeat_thread_extends_leases_while_the_loop_is_blocked(
    app: tickwork.App, database_url: str, clock: SettableClock, aconn: psycopg.AsyncConnection
) -> None:
    """The task blocks the loop until the job's lease is extended: only a heartbeat that
    does not need the loop can do that."""
    seen: list[datetime] = []

    def lease(job_id: int) -> datetime | None:
        with psycopg.connect(database_url, autocommit=True) as conn:
            row = conn.execute(
                "SELECT lease_expires_at FROM tickwork.jobs WHERE id = %s", (job_id,)
            ).fetchone()
        assert row is not None
        return row[0]  # type: ignore[no-any-return]

    @app.task("t.blocking")
    async def blocking(job: tickwork.Job) -> None:
        assert lease(job.id) == at(30)
        clock.set(at(20))
        wait_until_sync(lambda: lease(job.id) == at(50), what="the lease to be extended")
        seen.append(at(50))

    job_id = await app.enqueue_async("t.blocking", {})
    worker = Worker(app, settings(database_url, heartbeat_seconds=0.05), clock=clock)
    async with running(worker):
        await wait_status(aconn, job_id, "succeeded")
    assert seen == [at(50)], "its lease was extended while it blocked the loop"


class _Logged(logging.Handler):
    """Keeps the watch's report naming job 42 and the end of that stall, each with an event
    (a loaded machine may stall the loop before, for another reason: not counted)."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []
        self.blocked = threading.Event()
        self.unblocked = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        action = getattr(record, "action", None)
        if action == "loop_blocked" and getattr(record, "job_id", None) == 42:
            self.records.append(record)
            self.blocked.set()
        elif action == "loop_unblocked" and self.blocked.is_set() and not self.unblocked.is_set():
            self.records.append(record)
            self.unblocked.set()


async def test_the_watch_reports_a_blocked_loop_while_it_is_blocked_naming_the_job(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=loop_watch.__name__)
    job = Job(JobId(42), "t.cpu", "default", {}, 0, at(0), JobStatus.RUNNING, 2, 3, 1)
    logged = _Logged()
    logger = logging.getLogger(loop_watch.__name__)
    logger.addHandler(logged)

    async def cpu_bound() -> None:
        # Blocks the loop until the watch has reported it: the report comes while it blocks.
        assert logged.blocked.wait(10), "no warning while the loop was blocked"

    lag = "tickwork_worker_loop_lag_seconds"
    before = prometheus_client.REGISTRY.get_sample_value(f"{lag}_sum") or 0.0
    blocker = asyncio.create_task(cpu_bound(), name="cpu")
    watch = loop_watch.LoopWatch(
        stall_seconds=0.05,
        job_of=lambda task: job if task is blocker else None,
        worker="w-watch",
        every=0.01,
    )
    watch.start()
    try:
        await blocker
        assert await asyncio.to_thread(logged.unblocked.wait, 10), "the stall's end is logged"
    finally:
        await asyncio.to_thread(watch.stop)
        logger.removeHandler(logged)
    warning, info = logged.records
    assert warning.levelno == logging.WARNING
    assert (warning.job_id, warning.kind, warning.attempt) == (42, "t.cpu", 2)
    assert warning.worker == "w-watch"
    message = warning.getMessage()
    assert "job 42 (kind t.cpu, attempt 2)" in message
    assert "threading.py:" in message, message
    assert f"{Path(__file__).name}:" in message and "(cpu_bound)" in message, message
    assert info.levelno == logging.INFO and "free again after" in info.getMessage()
    after = prometheus_client.REGISTRY.get_sample_value(f"{lag}_sum") or 0.0
    assert after - before >= 0.05, "the stall's lag was measured"


def test_the_stall_threshold_is_a_quarter_lease_and_at_least_a_second() -> None:
    assert loop_watch.threshold(2.0) == 1.0
    assert loop_watch.threshold(30.0) == 7.5


async def test_a_heartbeat_whose_connection_broke_reconnects_on_the_next(
    database_url: str, conn: psycopg.Connection
) -> None:
    config = heartbeat.HeartbeatConfig(database_url, _INCARNATION, lease_seconds=30, interval=10)
    beats = heartbeat.Heartbeat(
        config,
        clock=SettableClock(at(0)),
        held=HeldJobs(),
        liveness=Liveness(),
        found=lambda beat: None,
    )
    try:
        assert beats.run_once().kept == {}
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        with pytest.raises(psycopg.OperationalError):
            beats.run_once()
        assert beats.run_once().kept == {}
    finally:
        beats.stop()


async def test_stopping_a_heartbeat_stuck_behind_a_lock_cancels_its_statement(
    app: tickwork.App, database_url: str, conn: psycopg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(heartbeat, "STOP_SECONDS", 0.2)
    await app.enqueue_async("t.held", {})
    held = HeldJobs()
    for job in claim(conn, kinds=["t.held"], incarnation=_INCARNATION):
        held.hold(job)
    config = heartbeat.HeartbeatConfig(database_url, _INCARNATION, lease_seconds=30, interval=10)
    beats = heartbeat.Heartbeat(
        config, clock=SettableClock(at(0)), held=held, liveness=Liveness(), found=lambda beat: None
    )
    waiting = (
        "SELECT count(*) FROM pg_stat_activity"
        " WHERE wait_event_type = 'Lock' AND datname = current_database()"
    )
    with psycopg.connect(database_url) as locker:
        locker.execute("SELECT * FROM tickwork.jobs FOR UPDATE")  # held until the block ends
        beats.start()
        beats.wake()
        wait_until_sync(lambda: scalar(conn, waiting) == 1, what="the heartbeat to wait")
        await asyncio.to_thread(beats.stop)
        assert scalar(conn, waiting) == 0, "its statement was cancelled"
        thread = f"tickwork-heartbeat-{_INCARNATION.hex[:8]}"
        assert not [t for t in threading.enumerate() if t.name == thread]
