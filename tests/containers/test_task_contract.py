"""What the container-job task relies on from the worker, shown with plain async tasks on a
real PostgreSQL: a task cancelled because its job was asked to stop sees
``tasks.CANCEL_REQUESTED`` on its CancelledError (one interrupted by a shutdown does not), and a
task that enforces its own timeout (``Task.own_timeout``) is not interrupted at the job's
timeout, while a TimeoutError it raises is recorded as the job timing out."""

from __future__ import annotations

import asyncio

import psycopg

import tickwork
from tests.support.helpers import running, settings, wait_status, wait_until
from tickwork import metrics
from tickwork.model import Backoff
from tickwork.tasks import CANCEL_REQUESTED, Task
from tickwork.worker.runner import Worker


async def test_a_cancelled_task_is_told_why_and_a_shutdown_is_not_a_cancel(
    database_url: str, aconn: psycopg.AsyncConnection
) -> None:
    app = tickwork.App(database_url)
    seen: dict[int, tuple[object, ...]] = {}
    started: set[int] = set()

    @app.task("t.wait")
    async def wait(job: tickwork.Job) -> None:
        started.add(job.id)
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError as exc:
            seen[job.id] = exc.args
            raise

    try:
        worker = Worker(app, settings(database_url, shutdown_grace_seconds=0.1))
        async with running(worker):
            cancelled = await app.enqueue_async("t.wait", {})
            interrupted = await app.enqueue_async("t.wait", {})
            await wait_until(lambda: {cancelled, interrupted} <= started, what="both started")
            await asyncio.to_thread(app.cancel, cancelled)
            await wait_status(aconn, cancelled, "cancelled")
        assert seen[cancelled] == (CANCEL_REQUESTED,)
        assert seen[interrupted] == ()
    finally:
        await app.close_async()


async def test_a_task_enforcing_its_own_timeout_runs_past_it_and_its_timeout_error_counts(
    database_url: str, aconn: psycopg.AsyncConnection
) -> None:
    app = tickwork.App(database_url)

    async def slow(job: tickwork.Job) -> None:
        await asyncio.sleep(0.5)  # past the job's 0.1 s timeout
        if job.payload.get("fail"):
            raise TimeoutError("ran past its deadline")

    app.registry.add(Task("t.own", slow, max_attempts=2, own_timeout=True))
    timed_out = metrics.JOBS_COMPLETED.labels(metrics.NO_SCHEDULE, "default", "t.own", "timed_out")
    before = timed_out._value.get()
    try:
        worker = Worker(app, settings(database_url))
        async with running(worker):
            fine = await app.enqueue_async("t.own", {}, timeout=0.1)
            late = await app.enqueue_async(
                "t.own", {"fail": True}, timeout=0.1, retry=Backoff(0, 1, 0)
            )
            await wait_status(aconn, fine, "succeeded")
            row = await wait_status(aconn, late, "dead")
        assert "TimeoutError: ran past its deadline" in row["last_error"]
        assert timed_out._value.get() == before + 1  # the first attempt: retried as timed out
    finally:
        await app.close_async()
