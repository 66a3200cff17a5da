"""Job guarantees tried from outside, with several ``tickwork worker`` processes on one real
PostgreSQL: a cancelled job keeps its concurrency key until its worker has stopped it (by
hand and under Replace), a busy key never holds back the jobs queued behind it, an expired
lease is recovered whatever the job's kind (its on_dead hook waits for a worker registering
the kind), and a log line for an exception carries its type, message and traceback.

The tasks (guarantee_app.py) leave wall-clock traces in files; every process runs on this
machine, so the times compare."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any, Protocol

import psycopg
import pytest
from psycopg.rows import dict_row

import tickwork
from tests.support.cli_fork import run_tickwork
from tests.support.helpers import wait_until_sync
from tests.worker.guarantee_app import CLEANUP_SECONDS, HOLD, ORPHAN, QUICK
from tickwork.schedules.definition import ScheduleDefinition
from tickwork.schedules.options import JobTemplate
from tickwork.schedules.policies import ConcurrencyPolicy

TICKWORK = str(Path(sys.executable).parent / "tickwork")
DEADLINE = 20.0
HEARTBEAT = 20.0
"""Slow on purpose where a test shows that a notification, not the heartbeat, did it."""


class Start(Protocol):
    def __call__(self, name: str, kinds: str, **settings: Any) -> subprocess.Popen[str]: ...


@pytest.fixture
def traces(tmp_path: Path) -> Path:
    path = tmp_path / "traces"
    path.mkdir()
    return path


@pytest.fixture
def start_worker(database_url: str, traces: Path, tmp_path: Path) -> Iterator[Start]:
    """Start ``tickwork worker --app guarantee_app:app`` serving ``kinds``; ``settings`` become
    ``TICKWORK_*`` variables. Its stderr goes to ``<tmp>/<name>.log``. All are stopped after."""
    started: list[subprocess.Popen[str]] = []
    logs: list[Any] = []

    def start(name: str, kinds: str, **settings: Any) -> subprocess.Popen[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TICKWORK_")}
        env.update(
            PYTHONPATH=os.pathsep.join(
                filter(None, [str(Path(__file__).parent), env.get("PYTHONPATH")])
            ),
            GUARANTEE_KINDS=kinds,
            GUARANTEE_DIR=str(traces),
            TICKWORK_DATABASE_URL=database_url,
            TICKWORK_NAME=name,
            TICKWORK_HTTP_PORT="0",
            TICKWORK_POLL_SECONDS="0.2",
            TICKWORK_HEARTBEAT_SECONDS=str(HEARTBEAT),
            TICKWORK_LEASE_SECONDS="60",
            TICKWORK_SHUTDOWN_GRACE_SECONDS="1",  # a held job is interrupted at teardown
        )
        env.update({f"TICKWORK_{key.upper()}": str(value) for key, value in settings.items()})
        log = (tmp_path / f"{name}.log").open("w")
        logs.append(log)
        process = subprocess.Popen(
            [TICKWORK, "worker", "--app", "guarantee_app:app"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=log,
            text=True,
        )
        started.append(process)
        return process

    yield start
    for process in started:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    for process in started:
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
    for log in logs:
        log.close()


def _row(conn: psycopg.Connection, job_id: int) -> dict[str, Any]:
    with conn.cursor(row_factory=dict_row) as cur:
        row = cur.execute("SELECT * FROM tickwork.jobs WHERE id = %s", (job_id,)).fetchone()
    assert row is not None
    return row


def _status(conn: psycopg.Connection, job_id: int) -> str:
    return str(_row(conn, job_id)["status"])


def _wait_status(
    conn: psycopg.Connection, job_id: int, status: str, timeout: float = DEADLINE
) -> None:
    wait_until_sync(
        lambda: _status(conn, job_id) == status, timeout=timeout, what=f"job {job_id} {status}"
    )


def _wait_registered(conn: psycopg.Connection, count: int) -> None:
    wait_until_sync(
        lambda: conn.execute("SELECT count(*) FROM tickwork.workers").fetchone() == (count,),
        timeout=30,
        what=f"{count} workers to register",
    )


def _when(traces: Path, event: str, job_id: int) -> float:
    return float((traces / f"{event}-{job_id}").read_text())


def _traced(traces: Path, event: str, job_id: int) -> bool:
    return (traces / f"{event}-{job_id}").exists()


# --- (1) cancellation keeps the key --------------------------------------------------------


def test_a_cancelled_running_job_keeps_its_key_until_its_worker_has_stopped_it(
    database_url: str, conn: psycopg.Connection, traces: Path, start_worker: Start
) -> None:
    for name in ("w-a", "w-b"):
        start_worker(name, f"{HOLD},{QUICK}")
    _wait_registered(conn, 2)
    app = tickwork.App(database_url)
    try:
        first = app.enqueue(HOLD, {}, concurrency_key="k")
        wait_until_sync(lambda: _traced(traces, "started", first), what="the first job to start")
        second = app.enqueue(QUICK, {}, concurrency_key="k")
    finally:
        app.close()

    cancelled = run_tickwork(
        ["cancel", str(first), "--reason", "test"],
        {**os.environ, "TICKWORK_DATABASE_URL": database_url},
    )
    assert cancelled.returncode == 0, cancelled.stderr
    out = cancelled.stdout
    asked = time.time()  # once the command has committed (it may take seconds to start)
    assert "asked to stop" in out
    # Reached through the notification: the heartbeat is 20 s away.
    wait_until_sync(
        lambda: _traced(traces, "cancelled", first), timeout=10, what="the task cancelled"
    )
    assert _when(traces, "cancelled", first) - asked < 10
    _wait_status(conn, first, "cancelled")
    _wait_status(conn, second, "succeeded")

    assert _when(traces, "started", second) >= _when(traces, "stopped", first), (
        "the second job of the key started only once the first had stopped"
    )
    one, two = _row(conn, first), _row(conn, second)
    # The order above is the guarantee. The rows' times are their transactions' starts: the
    # claim's may precede the statement that found the key free (the flow rules are looked
    # up first, in the same transaction) and so the first job's finished_at by a hair.
    assert one["cancel_requested_at"] is not None
    assert two["started_at"] >= one["cancel_requested_at"], "claimed once the stop was asked"
    assert one["last_error"] is None


def test_replace_starts_the_new_job_only_once_the_replaced_one_has_stopped(
    database_url: str, conn: psycopg.Connection, traces: Path, start_worker: Start
) -> None:
    app = tickwork.App(database_url)
    try:
        app.sync_schedules(
            "g",
            [
                ScheduleDefinition(
                    name="replaced",
                    every=timedelta(seconds=3),
                    concurrency_policy=ConcurrencyPolicy.REPLACE,
                    job=JobTemplate(kind=HOLD, concurrency_key="nightly"),
                )
            ],
        )
    finally:
        app.close()
    start_worker("w-fire", f"{HOLD},{QUICK}", namespaces="g")
    start_worker("w-b", f"{HOLD},{QUICK}")

    def schedule_jobs() -> list[dict[str, Any]]:
        with conn.cursor(row_factory=dict_row) as cur:
            return cur.execute(
                "SELECT * FROM tickwork.jobs WHERE schedule_name = 'replaced' ORDER BY id"
            ).fetchall()

    def replaced_after_starting() -> tuple[dict[str, Any], dict[str, Any]] | None:
        """The first job that started and whose next occurrence's job started too (on a busy
        machine the first job may be replaced before any worker started it)."""
        jobs = schedule_jobs()
        for old, new in itertools.pairwise(jobs):
            if _traced(traces, "started", old["id"]) and _traced(traces, "started", new["id"]):
                return old, new
        return None

    wait_until_sync(
        lambda: replaced_after_starting() is not None,
        timeout=60,  # two workers starting and an occurrence 3 s later: slow on a busy machine
        what="a started job to be replaced and its successor to start",
    )
    pair = replaced_after_starting()
    assert pair is not None
    old, new = pair
    assert old["status"] == "cancelled"
    assert "replaced" in old["last_error"]
    assert _when(traces, "started", new["id"]) >= _when(traces, "stopped", old["id"]), (
        "the new job started only once the replaced one had stopped"
    )
    assert old["finished_at"] <= new["started_at"]
    # The replaced job heard of it at once, not at a heartbeat 20 s later.
    assert old["finished_at"] - new["created_at"] < timedelta(seconds=CLEANUP_SECONDS + 4)


# --- (2) no head-of-line blocking ----------------------------------------------------------


def test_jobs_behind_a_busy_key_run_while_the_key_stays_busy(
    database_url: str, conn: psycopg.Connection, traces: Path, start_worker: Start
) -> None:
    batch = 20
    for name in ("w-a", "w-b"):
        start_worker(name, f"{HOLD},{QUICK}", claim_batch=batch, concurrency=4)
    _wait_registered(conn, 2)
    app = tickwork.App(database_url)
    try:
        holder = app.enqueue(HOLD, {}, concurrency_key="busy")
        wait_until_sync(lambda: _traced(traces, "started", holder), what="the key to be busy")
        waiting = app.enqueue_many(QUICK, [{}] * (5 * batch), concurrency_key="busy")
        behind = app.enqueue_many(QUICK, [{}] * batch)
    finally:
        app.close()

    wait_until_sync(
        lambda: all(_traced(traces, "started", job_id) for job_id in behind),
        timeout=10,
        what="the unkeyed jobs behind the busy key to run",
    )
    assert _status(conn, holder) == "running"
    statuses = conn.execute(
        "SELECT DISTINCT status::text FROM tickwork.jobs WHERE id = ANY(%s)", (waiting,)
    ).fetchall()
    assert statuses == [("available",)], "the busy key's jobs wait"


# --- (3) every lease ends ------------------------------------------------------------------


def test_an_expired_lease_of_a_kind_no_live_worker_registers_is_recovered_and_frees_its_key(
    database_url: str, conn: psycopg.Connection, traces: Path, start_worker: Start
) -> None:
    short = {"lease_seconds": 2, "heartbeat_seconds": 0.5, "maintenance_seconds": 0.5}
    victim = start_worker("w-orphan", ORPHAN, **short)
    _wait_registered(conn, 1)
    app = tickwork.App(database_url)
    try:
        dying = app.enqueue(ORPHAN, {}, max_attempts=1, concurrency_key="k1")
        retried = app.enqueue(ORPHAN, {}, max_attempts=3, concurrency_key="k2")
        wait_until_sync(
            lambda: _traced(traces, "started", dying) and _traced(traces, "started", retried),
            what="both orphan jobs to start",
        )
        victim.send_signal(signal.SIGKILL)
        victim.wait(10)
        behind_key = app.enqueue(QUICK, {}, concurrency_key="k1")
    finally:
        app.close()

    start_worker("w-other", QUICK, **short)  # knows nothing of g.orphan
    _wait_status(conn, dying, "dead")
    _wait_status(conn, retried, "available")
    _wait_status(conn, behind_key, "succeeded")  # the key was freed
    row = _row(conn, dying)
    assert row["on_dead_pending"] is True
    assert "lease expired on the last attempt" in row["last_error"]
    assert not _traced(traces, "on-dead", dying), "nobody registering the kind ran it yet"

    start_worker("w-orphan-2", ORPHAN, **short)
    wait_until_sync(lambda: _traced(traces, "on-dead", dying), what="the on_dead hook to run")
    wait_until_sync(lambda: _row(conn, dying)["on_dead_pending"] is False, what="the flag cleared")
    _wait_status(conn, retried, "succeeded")  # its second attempt, in the new worker
    assert _row(conn, retried)["attempt"] == 2


# --- (6) logs carry their causes -----------------------------------------------------------


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_an_exception_log_line_carries_type_message_and_traceback(
    database_url: str,
    conn: psycopg.Connection,
    traces: Path,
    tmp_path: Path,
    start_worker: Start,
    log_format: str,
) -> None:
    start_worker("w-log", ORPHAN, log_format=log_format)
    _wait_registered(conn, 1)
    app = tickwork.App(database_url)
    try:
        job_id = app.enqueue(
            ORPHAN, {"hang": False, "fail": True, "hook_fails": True}, max_attempts=1
        )
    finally:
        app.close()
    _wait_status(conn, job_id, "dead")
    log_path = tmp_path / "w-log.log"
    wait_until_sync(
        lambda: "on_dead_failed" in log_path.read_text(), what="the hook failure logged"
    )
    text = log_path.read_text()
    message = f"hook of job {job_id} broke"
    if log_format == "json":
        (record,) = [
            json.loads(line)
            for line in text.splitlines()
            if line.startswith("{") and json.loads(line).get("action") == "on_dead_failed"
        ]
        assert record["job_id"] == job_id
        exception = record["exception"]
        assert (exception["type"], exception["message"]) == ("ValueError", message)
        assert exception["traceback"].startswith("Traceback (most recent call last):")
        assert "guarantee_app.py" in exception["traceback"]
        assert "in on_dead" in exception["traceback"]
    else:
        lines = text.splitlines()
        (at,) = [i for i, line in enumerate(lines) if "action=on_dead_failed" in line]
        assert lines[at + 1] == "Traceback (most recent call last):"
        trace = lines[at + 1 :]
        end = next(i for i, line in enumerate(trace) if line.startswith("ValueError"))
        assert trace[end] == f"ValueError: {message}"
        assert any("guarantee_app.py" in line and "in on_dead" in line for line in trace[:end])
