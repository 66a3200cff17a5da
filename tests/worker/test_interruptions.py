"""A worker shutting down is not the job failing (issue 29, item 8): a job still running when
the shutdown grace ends is handed back at once, its attempt not spent and one interruption
counted; one interrupted more than ``--max-interruptions`` times ends dead (its on_dead hook
then runs in a worker of its kind); one asked to stop is cancelled. A forced exit (a second
signal) hands back what the worker holds and removes its row at once; ``tickwork workers``
shows a worker that missed two heartbeats as stale (the console: test_admin_views.py)."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

import tickwork
from tests.db.fault_app import WORK
from tests.db.fault_helpers import Fleet
from tests.support.helpers import (
    T0,
    ajob_row,
    job_row,
    running,
    scalar,
    settings,
    wait_until,
    wait_until_sync,
)
from tickwork.cli import main
from tickwork.clock import SettableClock
from tickwork.db import store
from tickwork.db import workers as workers_db
from tickwork.worker import deaths
from tickwork.worker.runner import Worker

HANG = "t.hang"


class Hanging:
    """An App whose task hangs until cancelled (max 3 attempts), recording its starts and the
    jobs its on_dead hook saw."""

    def __init__(self, database_url: str) -> None:
        self.database_url = database_url
        self.started = asyncio.Event()
        self.dead: list[int] = []
        self.app = tickwork.App(database_url, clock=SettableClock(T0))

        def on_dead(job: tickwork.Job, conn: Any, error: str) -> None:
            self.dead.append(job.id)

        @self.app.task(HANG, max_attempts=3, on_dead=on_dead)
        async def hang(job: tickwork.Job) -> None:
            self.started.set()
            await asyncio.Event().wait()

    def worker(self, **overrides: Any) -> Worker:
        self.started = asyncio.Event()
        config = settings(self.database_url, shutdown_grace_seconds=0.1, **overrides)
        return Worker(self.app, config, clock=self.app.clock)

    async def interrupt_once(self, **overrides: Any) -> None:
        """Run a worker until the task has started, then stop it (the grace is 0.1 s)."""
        async with running(self.worker(**overrides)):
            await wait_until(self.started.is_set, what="the task to start")


@pytest.fixture
async def hanging(database_url: str) -> AsyncIterator[Hanging]:
    made = Hanging(database_url)
    yield made
    await made.app.close_async()


async def test_a_job_interrupted_more_than_the_limit_ends_dead_and_its_hook_runs(
    hanging: Hanging, aconn: psycopg.AsyncConnection
) -> None:
    job_id = await hanging.app.enqueue_async(HANG, {})
    for interruption in (1, 2):
        await hanging.interrupt_once(max_interruptions=2)
        row = await ajob_row(aconn, job_id)
        assert (row["status"], row["attempt"]) == ("available", 0)
        assert row["interruptions"] == interruption
        assert row["last_error"] == (
            f"interrupted: worker w1 shut down before the job finished; handed back, "
            f"attempt not spent (interruption {interruption} of at most 2)"
        )
    await hanging.interrupt_once(max_interruptions=2)
    row = await ajob_row(aconn, job_id)
    assert (row["status"], row["attempt"], row["interruptions"]) == ("dead", 1, 3)
    assert row["last_error"] == (
        "interrupted 3 times by workers shutting down (more than --max-interruptions 2):"
        " the job outlives the shutdown grace"
    )
    assert row["on_dead_pending"] and row["finished_at"] == T0
    assert await deaths.PendingHooks(hanging.app.registry).run_once(aconn, None) == 1
    assert hanging.dead == [job_id], "the on_dead hook ran in a worker of the kind"
    await asyncio.to_thread(hanging.app.retry, job_id, actor="ops")
    row = await ajob_row(aconn, job_id)
    assert (row["status"], row["attempt"], row["interruptions"]) == ("available", 0, 0)


async def test_an_interrupted_job_that_was_asked_to_stop_is_cancelled(
    hanging: Hanging, aconn: psycopg.AsyncConnection
) -> None:
    job_id = await hanging.app.enqueue_async(HANG, {})
    async with running(hanging.worker(pooler="transaction")):  # no LISTEN: polls
        await wait_until(hanging.started.is_set, what="the task to start")
        # Asked to stop, the worker not told: no notification, no heartbeat before the end.
        await aconn.execute(
            "UPDATE tickwork.jobs SET cancel_requested_at = %s WHERE id = %s", (T0, job_id)
        )
    row = await ajob_row(aconn, job_id)
    assert (row["status"], row["interruptions"]) == ("cancelled", 1)
    assert row["last_error"] == "cancelled: worker w1 shut down before the job stopped"


# --- from outside: worker processes -------------------------------------------------------


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Any]:
    """``tickwork worker --app fault_app:app`` named ``name`` (stderr in ``<tmp>/<name>.log``),
    ``env`` on top; every one left is stopped after."""
    (tmp_path / "runs").mkdir()
    fleet = Fleet(tmp_path / "runs", tmp_path)

    def launch(name: str, database_url: str, **env: str) -> subprocess.Popen[str]:
        variables = {"TICKWORK_POLL_SECONDS": "0.2", **env}
        return fleet.start(name, database_url, variables=variables)

    yield launch
    fleet.stop()


def _running_on(conn: psycopg.Connection, job_id: int, name: str) -> bool:
    row = job_row(conn, job_id)
    return row["status"] == "running" and row["picked_by"] == name


def _log(tmp_path: Path, name: str) -> str:
    return (tmp_path / f"{name}.log").read_text()


def test_a_sigtermed_workers_long_job_is_handed_back_unspent_and_run_elsewhere_at_once(
    database_url: str, conn: psycopg.Connection, tmp_path: Path, start: Any
) -> None:
    """A rolling update: the stopping worker's 60 s job outlives its grace (1 s). It is
    available again at once, attempt unspent, one interruption; a worker already running
    takes it within seconds, not after the 30 s retry delay."""
    stopping = start("stopping", database_url, TICKWORK_SHUTDOWN_GRACE_SECONDS="1")
    app = tickwork.App(database_url)
    try:
        job_id = app.enqueue(WORK, {"seconds": 60})
    finally:
        app.close()
    wait_until_sync(lambda: _running_on(conn, job_id, "stopping"), timeout=60, what="it to run")
    other = start("other", database_url)
    wait_until_sync(lambda: "action=worker_started" in _log(tmp_path, "other"), timeout=60)

    stopping.send_signal(signal.SIGTERM)
    assert stopping.wait(30) == 0
    wait_until_sync(
        lambda: _running_on(conn, job_id, "other"), timeout=15, what="the other worker to run it"
    )
    row = job_row(conn, job_id)
    assert (row["attempt"], row["interruptions"]) == (1, 1), "its first attempt, again"
    assert row["started_at"] - row["run_at"] < timedelta(seconds=10), "no retry delay"
    assert row["last_error"].startswith("interrupted: worker stopping shut down")
    assert "action=job_interrupted" in _log(tmp_path, "stopping")
    assert other.poll() is None


def test_a_forced_exit_hands_back_the_running_job_and_removes_the_row_at_once(
    database_url: str, conn: psycopg.Connection, tmp_path: Path, start: Any
) -> None:
    worker = start("forced", database_url, TICKWORK_SHUTDOWN_GRACE_SECONDS="600")
    app = tickwork.App(database_url)
    try:
        job_id = app.enqueue(WORK, {"seconds": 600})
    finally:
        app.close()
    wait_until_sync(lambda: _running_on(conn, job_id, "forced"), timeout=60, what="it to run")
    worker.send_signal(signal.SIGTERM)
    wait_until_sync(lambda: "action=shutdown_requested" in _log(tmp_path, "forced"), timeout=30)
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(30) == 128 + signal.SIGTERM
    assert scalar(conn, "SELECT count(*) FROM tickwork.workers") == 0, "its row is gone"
    row = job_row(conn, job_id)
    assert (row["status"], row["attempt"]) == ("available", 0), "handed back, not running"
    assert row["interruptions"] == 1


# --- tickwork workers ----------------------------------------------------------------------


def test_tickwork_workers_shows_a_worker_that_missed_two_heartbeats_as_stale(
    database_url: str, conn: psycopg.Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    now = scalar(conn, "SELECT now()")
    for name, seen in (("w-silent", 30), ("w-beating", 5)):
        store.run(
            conn,
            workers_db.register_worker(
                name=name,
                queues=["default"],
                kinds=["k"],
                namespaces=[],
                concurrency=2,
                host="h",
                pid=7,
                heartbeat_seconds=10,
                now=now - timedelta(seconds=seen),
            ),
        )
    env = {"TICKWORK_DATABASE_URL": database_url}
    assert main(["workers", "-o", "json"], env) == 0
    listed = {w["name"]: w for w in json.loads(capsys.readouterr().out)}
    assert {name: w["state"] for name, w in listed.items()} == {
        "w-beating": "live",
        "w-silent": "stale",
    }
    assert listed["w-silent"]["heartbeat_seconds"] == 10
    silent_seen = (now - timedelta(seconds=30)).astimezone(UTC)
    assert listed["w-silent"]["last_seen_at"] == silent_seen.isoformat()
    assert main(["workers"], env) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["NAME", "STATE", "HOST"]
    states = [line.split()[:2] for line in lines[1:]]
    assert states == [["w-beating", "live"], ["w-silent", "stale"]]


async def test_a_worker_records_its_heartbeat_interval(
    database_url: str, aconn: psycopg.AsyncConnection
) -> None:
    app = tickwork.App(database_url, clock=SettableClock(T0))
    try:
        worker = Worker(app, settings(database_url, heartbeat_seconds=4.5), clock=app.clock)
        async with running(worker):
            cur = await aconn.execute(
                "SELECT heartbeat_seconds, incarnation FROM tickwork.workers WHERE name = 'w1'"
            )
            assert await cur.fetchone() == (4.5, worker.incarnation)
    finally:
        await app.close_async()
