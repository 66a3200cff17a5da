"""Small shared helpers for the job-engine tests: a pinned start time, worker settings fit for
tests, a worker opened for one-shot calls or run in-process, polling with a deadline, and the
target of worker processes for the multi-process tests.

Import as ``from tests.support import helpers``.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import signal
import socket
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

import tickwork
from tests.support.forking import process_context
from tickwork.clock import SettableClock
from tickwork.db import jobs as jobs_db
from tickwork.db import store
from tickwork.model import Job
from tickwork.settings import WorkerSettings
from tickwork.worker.runner import Worker

# A pinned instant later than the real clock, so rows the migration stamped with now()
# (the maintenance duties' next_run_at) are already due at it.
T0 = datetime(2030, 1, 1, tzinfo=UTC)

DEADLINE = 10.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listened on a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def at(seconds: float) -> datetime:
    """``T0`` plus ``seconds``."""
    return T0 + timedelta(seconds=seconds)


def settings(database_url: str, **overrides: Any) -> WorkerSettings:
    """Worker settings for in-process tests: fast polling (so a worker on a pinned clock,
    which gets no notifications for jobs due in the future, still picks jobs up), and
    heartbeat, lease and maintenance slow enough that the loops never act on their own:
    tests call ``heartbeat_once``/``maintain_once`` when they mean to."""
    base = WorkerSettings(
        database_url=database_url,
        app="tests",
        name="w1",
        concurrency=2,
        lease_seconds=30.0,
        heartbeat_seconds=25.0,
        poll_seconds=0.05,
        maintenance_seconds=3600.0,
        shutdown_grace_seconds=5.0,
    )
    return replace(base, **overrides)


class Recorder:
    """Thread-safe record of what tasks saw (tasks may run in the worker's thread pool)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls: list[Job] = []

    def add(self, job: Job) -> None:
        with self._lock:
            self.calls.append(job)

    @property
    def ids(self) -> list[int]:
        with self._lock:
            return [job.id for job in self.calls]

    def attempts(self, job_id: int) -> list[int]:
        with self._lock:
            return [job.attempt for job in self.calls if job.id == job_id]


def make_app(database_url: str, clock: SettableClock | None = None) -> tickwork.App:
    return tickwork.App(database_url, clock=clock)


def job_row(conn: psycopg.Connection[Any], job_id: int) -> dict[str, Any]:
    """The job's row as a dict (sync connection)."""
    with conn.cursor(row_factory=dict_row) as cur:
        row = cur.execute("SELECT * FROM tickwork.jobs WHERE id = %s", (job_id,)).fetchone()
    assert row is not None, f"job {job_id} does not exist"
    return row


async def ajob_row(conn: psycopg.AsyncConnection[Any], job_id: int) -> dict[str, Any]:
    """The job's row as a dict (async connection)."""
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute("SELECT * FROM tickwork.jobs WHERE id = %s", (job_id,))
        row = await cur.fetchone()
    assert row is not None, f"job {job_id} does not exist"
    return row


async def ascalar(conn: psycopg.AsyncConnection[Any], query: str, params: Any = None) -> Any:
    cur = await conn.execute(query, params)
    row = await cur.fetchone()
    assert row is not None
    return row[0]


def scalar(conn: psycopg.Connection[Any], query: str, params: Any = None) -> Any:
    row = conn.execute(query, params).fetchone()
    assert row is not None
    return row[0]


def claim(
    conn: psycopg.Connection[Any],
    *,
    kinds: Sequence[str],
    max_attempts: int = 25,
    queues: Sequence[str] = ("default",),
    limit: int = 100,
    now: datetime | None = T0,
    worker: str = "claimer",
    lease_seconds: float = 30.0,
    incarnation: UUID | None = None,
) -> list[Job]:
    """One claim statement on ``conn`` (in whatever transaction ``conn`` is in), by the worker
    process ``incarnation`` (None: by no worker process)."""
    known = dict.fromkeys(kinds, max_attempts)
    claimed = jobs_db.claim_jobs(
        worker, queues, known, limit, lease_seconds, now, incarnation=incarnation
    )
    return store.run(conn, claimed)


# --- waiting with a deadline ---------------------------------------------------------------


async def wait_until(
    condition: Callable[[], Awaitable[bool] | bool],
    *,
    timeout: float = DEADLINE,
    what: str = "condition",
) -> None:
    """Poll ``condition`` (sync or async) until it holds; fail the test at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        await asyncio.sleep(0.02)


def wait_until_sync(
    condition: Callable[[], bool], *, timeout: float = DEADLINE, what: str = "condition"
) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(0.05)


async def wait_status(
    conn: psycopg.AsyncConnection[Any],
    job_id: int,
    status: str,
    *,
    attempt: int | None = None,
    timeout: float = DEADLINE,
) -> dict[str, Any]:
    """Wait until the job has ``status`` (and ``attempt``); returns its row."""
    row: dict[str, Any] = {}

    async def reached() -> bool:
        nonlocal row
        row = await ajob_row(conn, job_id)
        return row["status"] == status and (attempt is None or row["attempt"] == attempt)

    await wait_until(reached, timeout=timeout, what=f"job {job_id} to be {status}")
    return row


# --- workers in-process --------------------------------------------------------------------


@asynccontextmanager
async def opened(worker: Worker) -> AsyncIterator[Worker]:
    """Give ``worker`` a connection pool without starting its loops, so a test can call the
    one-shot methods (``claim_once``, ``heartbeat_once``, ``maintain_once``) by hand.

    (Worker has no public "open without running"; the pool is what ``run`` would create.)
    """
    pool: AsyncConnectionPool[psycopg.AsyncConnection[Any]] = AsyncConnectionPool(
        worker.settings.database_url, min_size=1, max_size=4, open=False
    )
    await pool.open(wait=True, timeout=10)
    worker._pool = pool
    try:
        yield worker
    finally:
        worker._pool = None
        await pool.close()
        worker.slots.threads.shutdown(wait=False, cancel_futures=True)
        await asyncio.to_thread(worker._heartbeat.stop)  # closes its connection


@asynccontextmanager
async def running(worker: Worker, *, stop_timeout: float = DEADLINE) -> AsyncIterator[Any]:
    """Run ``worker.run()`` on this loop; on exit stop it and wait for it (errors surface)."""
    task = asyncio.create_task(worker.run(), name=f"worker-{worker.name}")
    started = asyncio.create_task(worker.started.wait())
    await asyncio.wait({task, started}, timeout=DEADLINE, return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        started.cancel()
        task.result()  # raises what run() raised
        raise AssertionError("worker.run() returned before it started")
    if not started.done():
        started.cancel()
        task.cancel()
        raise AssertionError("worker did not start within the deadline")
    try:
        yield task
    finally:
        worker.stop()
        await asyncio.wait_for(task, stop_timeout)


# --- worker processes (multiprocessing spawn target) ---------------------------------------

MP_KIND = "mp.record"
MP_TIMED_KIND = "mp.timed"
"""Like MP_KIND, and the job's start and end (system-wide monotonic clock) recorded too."""


def serve_worker(database_url: str, name: str, record_dir: str, overrides: dict[str, Any]) -> None:
    """Run one worker process until SIGTERM. Its task appends the job id to a file of its own,
    flushed per job, so the test can count executions even after a SIGKILL; the timed task
    appends ``id start end`` to another once it ended."""
    app = tickwork.App(database_url)
    out = (Path(record_dir) / f"{name}.ids").open("a", buffering=1)
    spans = (Path(record_dir) / f"{name}.spans").open("a", buffering=1)

    @app.task(MP_KIND)
    async def record(job: Job) -> None:
        out.write(f"{job.id}\n")
        out.flush()
        await asyncio.sleep(job.payload.get("sleep", 0))

    @app.task(MP_TIMED_KIND)
    async def timed(job: Job) -> None:
        start = time.monotonic()
        await record(job)
        spans.write(f"{job.id} {start} {time.monotonic()}\n")
        spans.flush()

    worker_settings = replace(
        WorkerSettings(database_url=database_url, app="tests", name=name), **overrides
    )
    worker = Worker(app, worker_settings)

    async def main() -> None:
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, worker.stop)
        await worker.run()

    try:
        asyncio.run(main())
    finally:
        out.close()
        spans.close()
        app.close()


def recorded_ids(record_dir: Path) -> dict[str, list[int]]:
    """Job ids each worker process recorded, by worker name."""
    return {
        path.stem: [int(line) for line in path.read_text().split()]
        for path in sorted(record_dir.glob("*.ids"))
    }


def recorded_spans(record_dir: Path) -> dict[int, tuple[float, float]]:
    """The start and end of each timed job, by job id, whichever process ran it."""
    spans = {}
    for path in sorted(record_dir.glob("*.spans")):
        for line in path.read_text().splitlines():
            job_id, start, end = line.split()
            spans[int(job_id)] = (float(start), float(end))
    return spans


@contextmanager
def sync_conn(database_url: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(database_url, autocommit=True) as conn:
        yield conn


StartWorker = Callable[[str, dict[str, Any]], Any]
"""Start a worker process named ``name`` with settings ``overrides``; returns the process."""


def spawned_workers(database_url: str, record_dir: Path) -> Iterator[StartWorker]:
    """A fixture's body: start worker processes (each a process of its own:
    tests/support/forking.py) running :func:`serve_worker`; every one still alive at the end
    is stopped, by its own pid."""
    ctx = process_context()
    started: list[Any] = []

    def start(name: str, overrides: dict[str, Any]) -> Any:
        process = ctx.Process(
            target=serve_worker,
            args=(database_url, name, str(record_dir), overrides),
            name=name,
            daemon=True,
        )
        process.start()
        started.append(process)
        return process

    yield start
    stop_processes(started)


def stop_processes(processes: Sequence[Any]) -> None:
    """SIGTERM the processes still alive, then SIGKILL those that do not exit in 10 s."""
    for process in processes:
        if process.is_alive():
            os.kill(process.pid, signal.SIGTERM)
    for process in processes:
        process.join(10)
        if process.is_alive():
            os.kill(process.pid, signal.SIGKILL)
            process.join(5)
