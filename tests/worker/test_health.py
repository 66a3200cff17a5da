"""The health endpoints: ``/readyz`` follows the database (reachable, fully migrated) and
``/healthz`` the worker's own loops (a crashed or stuck loop fails it; a database outage does
not). ``tickwork worker`` serves them on ``--http-port``."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import pytest

import tickwork
from tests.support.helpers import free_port, running, settings, wait_until, wait_until_sync
from tickwork.cli.worker import start_probes
from tickwork.db import migrate
from tickwork.db.embedded import EmbeddedPostgres
from tickwork.http import ProbeServer, database_readiness
from tickwork.worker.liveness import STUCK_AFTER_INTERVALS, STUCK_GRACE_SECONDS
from tickwork.worker.runner import Worker

TICKWORK = str(Path(sys.executable).parent / "tickwork")
KIND = "h.noop"


async def get(port: int, path: str) -> tuple[int, str]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}{path}") as response,
    ):
        return response.status, await response.text()


async def until_status(port: int, path: str, status: int) -> str:
    """Poll ``path`` until it answers ``status``; returns the body."""
    body = ""

    async def answered() -> bool:
        nonlocal body
        got, body = await get(port, path)
        return got == status

    await wait_until(answered, what=f"{path} to answer {status}")
    return body


def make_app(url: str) -> tickwork.App:
    app = tickwork.App(url)

    @app.task(KIND)
    async def noop(job: tickwork.Job) -> None:
        return None

    return app


@asynccontextmanager
async def serving(worker: Worker, database_url: str) -> AsyncIterator[int]:
    """The worker's probes on a free port (what ``tickwork worker`` serves); yields the port."""
    server = ProbeServer(
        0,
        host="127.0.0.1",
        liveness=worker.liveness,
        readiness=database_readiness(database_url),
    )
    await server.start()
    try:
        yield server.port
    finally:
        await server.stop()


@pytest.fixture
def private_server() -> Iterator[EmbeddedPostgres]:
    """A PostgreSQL server of this test's own, so that it can be stopped and started."""
    with tempfile.TemporaryDirectory(prefix="tickwork-test-health-") as tmp:
        os.chmod(tmp, 0o711)
        server = EmbeddedPostgres(Path(tmp) / "pg", port=free_port(), durable=False)
        server.start()
        try:
            yield server
        finally:
            server.stop()


async def test_readyz_follows_the_database_while_healthz_stays_alive(
    private_server: EmbeddedPostgres, caplog: pytest.LogCaptureFixture
) -> None:
    url = private_server.conninfo
    migrate.apply(url)
    app = make_app(url)
    worker = Worker(app, settings(url, heartbeat_seconds=0.2, maintenance_seconds=0.2))
    try:
        async with running(worker), serving(worker, url) as port:
            assert await get(port, "/readyz") == (200, "ok\n")
            assert await get(port, "/healthz") == (200, "ok\n")

            await asyncio.to_thread(private_server.stop)
            body = await until_status(port, "/readyz", 503)
            assert body.startswith("database unavailable: ")
            await wait_until(
                lambda: any(getattr(r, "action", None) == "listener_lost" for r in caplog.records),
                what="the worker to notice the outage",
            )
            assert await get(port, "/healthz") == (200, "ok\n"), "an outage is not a dead worker"

            assert await asyncio.to_thread(private_server.start) == url
            await until_status(port, "/readyz", 200)
            assert await get(port, "/healthz") == (200, "ok\n")
            job_id = await app.enqueue_async(KIND, {})
            await wait_until(
                lambda: app.get_job(job_id).status is tickwork.JobStatus.SUCCEEDED,
                what="the worker to run jobs again",
            )
        assert not worker.failed
    finally:
        await app.close_async()


async def test_pending_migrations_make_it_unready(empty_database_url: str) -> None:
    worker = Worker(make_app(empty_database_url), settings(empty_database_url))
    async with serving(worker, empty_database_url) as port:
        status, body = await get(port, "/readyz")
        assert status == 503
        assert body.startswith("migrations pending: 0001_jobs.sql, 0002_schedules.sql")
        await asyncio.to_thread(migrate.apply, empty_database_url)
        assert await get(port, "/readyz") == (200, "ok\n")


async def test_healthz_fails_when_a_loop_crashed(database_url: str) -> None:
    crash = asyncio.Event()

    async def doomed(worker: Worker) -> None:
        await crash.wait()
        raise RuntimeError("boom")

    app = make_app(database_url)
    worker = Worker(app, settings(database_url), extra_loops=(doomed,))
    try:
        async with running(worker), serving(worker, database_url) as port:
            assert await get(port, "/healthz") == (200, "ok\n")
            crash.set()
            body = await until_status(port, "/healthz", 503)
            assert body == "loop doomed crashed: RuntimeError('boom')\n"
            assert await get(port, "/readyz") == (200, "ok\n"), "the database is fine"
    finally:
        await app.close_async()
    assert worker.failed


async def test_healthz_fails_when_a_periodic_loop_stops_coming_round(database_url: str) -> None:
    app = make_app(database_url)
    worker = Worker(app, settings(database_url, heartbeat_seconds=1.0))
    try:
        async with running(worker):
            await wait_until(lambda: worker.liveness() is None, what="the loops to start")
            allowance = STUCK_AFTER_INTERVALS * 1.0 + STUCK_GRACE_SECONDS
            assert worker.liveness(time.monotonic() + allowance - 1) is None
            problem = worker.liveness(time.monotonic() + allowance + 1)
            assert problem is not None and problem.startswith("loop heartbeat stuck: ")
    finally:
        await app.close_async()


# --- the command ------------------------------------------------------------------------------


def _worker_command(port: int) -> list[str]:
    return [
        TICKWORK,
        "worker",
        "--app",
        "tickwork.examples:app",
        "--http-host",
        "127.0.0.1",
        "--http-port",
        str(port),
    ]


def _env(database_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TICKWORK_")}
    return {**env, "TICKWORK_DATABASE_URL": database_url}


async def test_the_worker_command_serves_the_probes_and_refuses_a_taken_port(
    database_url: str,
) -> None:
    port = free_port()
    worker = subprocess.Popen(
        _worker_command(port),
        env=_env(database_url),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:

        async def serving() -> bool:
            assert worker.poll() is None, worker.stderr.read() if worker.stderr else ""
            try:
                return (await get(port, "/healthz"))[0] == 200
            except aiohttp.ClientConnectionError:
                return False

        await wait_until(serving, timeout=20, what="the worker's HTTP port")
        assert await get(port, "/readyz") == (200, "ok\n")
        status, text = await get(port, "/metrics")
        assert status == 200
        assert "# TYPE tickwork_jobs_completed_total counter" in text

        taken = await asyncio.to_thread(
            subprocess.run,
            _worker_command(port),
            env=_env(database_url),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert taken.returncode == 2
        assert taken.stderr.startswith(
            f"tickwork: error: --http-port: cannot listen on 127.0.0.1:{port}: "
        )
    finally:
        worker.send_signal(signal.SIGTERM)
        await asyncio.to_thread(worker.wait, 20)
    assert worker.returncode == 0
    wait_until_sync(lambda: not _listening(port), what="the port to close")


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


async def test_http_port_zero_turns_the_port_off(database_url: str) -> None:
    app = make_app(database_url)
    assert await start_probes(Worker(app, settings(database_url, http_port=0))) is None
    app.close()
