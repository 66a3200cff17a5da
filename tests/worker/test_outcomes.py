"""What a worker writes back after running a job: success, retry with backoff, dead with the
on_dead hook in the same transaction, errors and timeouts, and what a failure of a job asked to
stop becomes (cancelled, never retried). Time is pinned: run_at values
are checked exactly."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest

import tickwork
from tests.support import helpers
from tests.support.helpers import (
    T0,
    Recorder,
    ajob_row,
    ascalar,
    at,
    running,
    settings,
    wait_status,
    wait_until,
)
from tickwork.clock import SettableClock
from tickwork.db import jobs as jobs_db
from tickwork.db import store
from tickwork.model import Backoff, JobStatus
from tickwork.worker.runner import Worker


@pytest.fixture
async def app(database_url: str, clock: SettableClock) -> AsyncIterator[tickwork.App]:
    app = tickwork.App(database_url, clock=clock)
    yield app
    await app.close_async()


def _worker(app: tickwork.App, database_url: str, clock: SettableClock, **kw: Any) -> Worker:
    return Worker(app, settings(database_url, **kw), clock=clock)


# --- success -------------------------------------------------------------------------------


@pytest.mark.parametrize("flavour", ["async", "sync"])
async def test_success_is_recorded(
    app: tickwork.App,
    database_url: str,
    clock: SettableClock,
    aconn: psycopg.AsyncConnection,
    flavour: str,
) -> None:
    seen = Recorder()
    if flavour == "async":

        @app.task("t.ok")
        async def ok_async(job: tickwork.Job) -> str:
            seen.add(job)
            return "fine"
    else:

        @app.task("t.ok")
        def ok_sync(job: tickwork.Job) -> str:
            seen.add(job)
            return "fine"

    job_id = await app.enqueue_async("t.ok", {"n": 7})
    clock.set(at(3))
    async with running(_worker(app, database_url, clock, name="w-ok")):
        row = await wait_status(aconn, job_id, "succeeded")

    assert seen.ids == [job_id]
    (job,) = seen.calls
    assert job.payload == {"n": 7}
    assert job.attempt == 1
    assert row["attempt"] == 1
    assert row["picked_by"] == "w-ok"
    assert row["started_at"] == at(3)
    assert row["finished_at"] == at(3)
    assert row["lease_expires_at"] is None
    assert row["last_error"] is None


# --- failures, retries, death --------------------------------------------------------------


async def test_failure_retries_with_the_default_backoff(
    app: tickwork.App, database_url: str, clock: SettableClock, aconn: psycopg.AsyncConnection
) -> None:
    seen = Recorder()

    @app.task("t.flaky", max_attempts=5)
    async def flaky(job: tickwork.Job) -> None:
        seen.add(job)
        raise ValueError(f"boom on attempt {job.attempt}")

    job_id = await app.enqueue_async("t.flaky", {})
    async with running(_worker(app, database_url, clock)):
        row = await wait_status(aconn, job_id, "available", attempt=1)
        assert row["run_at"] == at(30), "first retry after base = 30 s"
        assert "ValueError: boom on attempt 1" in row["last_error"]
        assert "Traceback" in row["last_error"]
        assert row["finished_at"] is None
        assert row["lease_expires_at"] is None

        clock.set(at(29.999))  # not yet due: nothing happens
        clock.set(at(30))
        row = await wait_status(aconn, job_id, "available", attempt=2)
        assert row["run_at"] == at(30 + 45), "30 * 1.5 after the second failure"
        assert "boom on attempt 2" in row["last_error"]

        clock.set(at(75))
        row = await wait_status(aconn, job_id, "available", attempt=3)
        assert row["run_at"] == at(75 + 67.5), "30 * 1.5^2 after the third failure"

    assert seen.attempts(job_id) == [1, 2, 3]


async def test_retry_delay_is_capped_and_the_jobs_policy_wins_over_the_tasks(
    app: tickwork.App, database_url: str, clock: SettableClock, aconn: psycopg.AsyncConnection
) -> None:
    @app.task("t.fails", max_attempts=10, retry=Backoff(base=1000, rate=1, max=1000))
    def fails(job: tickwork.Job) -> None:
        raise RuntimeError("nope")

    job_id = await app.enqueue_async("t.fails", {}, retry=Backoff(base=10, rate=2, max=25))
    task_policy = await app.enqueue_async("t.fails", {})
    now = 0.0
    async with running(_worker(app, database_url, clock)):
        for attempt, delay in ((1, 10), (2, 20), (3, 25), (4, 25)):
            row = await wait_status(aconn, job_id, "available", attempt=attempt)
            assert row["run_at"] == at(now + delay), f"attempt {attempt}"
            now += delay
            clock.set(at(now))
        other = await wait_status(aconn, task_policy, "available", attempt=1)
        assert other["run_at"] == at(1000), "without its own policy, the task's applies"


async def test_job_dies_when_attempts_are_exhausted(
    app: tickwork.App, database_url: str, clock: SettableClock, aconn: psycopg.AsyncConnection
) -> None:
    seen = Recorder()

    @app.task("t.doomed", max_attempts=2, retry=Backoff(base=5, rate=1, max=5))
    async def doomed(job: tickwork.Job) -> None:
        seen.add(job)
        raise KeyError("missing")

    @app.task("t.sentinel")
    async def sentinel(job: tickwork.Job) -> None:
        return None

    job_id = await app.enqueue_async("t.doomed", {})
    async with running(_worker(app, database_url, clock)):
        await wait_status(aconn, job_id, "available", attempt=1)
        clock.set(at(5))
        row = await wait_status(aconn, job_id, "dead")
        # Much later, the worker is still claiming (it runs a newer job) but not the dead one.
        clock.set(at(500))
        await wait_status(aconn, await app.enqueue_async("t.sentinel", {}), "succeeded")

    assert seen.attempts(job_id) == [1, 2], "never run a third time"
    row = await ajob_row(aconn, job_id)
    assert row["status"] == "dead"
    assert row["attempt"] == 2
    assert row["finished_at"] == at(5)
    assert "KeyError: 'missing'" in row["last_error"]


async def test_max_attempts_one_dies_on_first_failure(
    app: tickwork.App, database_url: str, clock: SettableClock, aconn: psycopg.AsyncConnection
) -> None:
    @app.task("t.once")
    def once(job: tickwork.Job) -> None:
        raise OSError("disk on fire")

    job_id = await app.enqueue_async("t.once", {}, max_attempts=1)
    async with running(_worker(app, database_url, clock)):
        row = await wait_status(aconn, job_id, "dead")
    assert row["attempt"] == 1
    assert "OSError: disk on fire" in row["last_error"]


# --- the on_dead hook ----------------------------------------------------------------------


async def _hook_table(aconn: psycopg.AsyncConnection) -> None:
    await aconn.execute(
        "CREATE TABLE hook_log (job_id bigint, error text, status_inside text, status_outside text)"
    )


async def test_on_dead_hook_runs_in_the_transaction_that_marks_the_job_dead(
    app: tickwork.App,
    database_url: str,
    clock: SettableClock,
    aconn: psycopg.AsyncConnection,
) -> None:
    await _hook_table(aconn)

    async def on_dead(job: tickwork.Job, conn: psycopg.AsyncConnection, error: str) -> None:
        # Inside the transaction the job is already dead; outside, that is not committed yet.
        inside = await ascalar(conn, "SELECT status FROM tickwork.jobs WHERE id = %s", (job.id,))
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as own:
            outside = await ascalar(
                own, "SELECT status FROM tickwork.jobs WHERE id = %s", (job.id,)
            )
        await conn.execute(
            "INSERT INTO hook_log VALUES (%s, %s, %s, %s)", (job.id, error, inside, outside)
        )

    @app.task("t.hooked", max_attempts=2, retry=Backoff(1, 1, 1), on_dead=on_dead)
    async def hooked(job: tickwork.Job) -> None:
        raise RuntimeError(f"failure {job.attempt}")

    job_id = await app.enqueue_async("t.hooked", {})
    async with running(_worker(app, database_url, clock)):
        await wait_status(aconn, job_id, "available", attempt=1)
        assert await ascalar(aconn, "SELECT count(*) FROM hook_log") == 0, "not dead: no hook"
        clock.set(at(1))
        row = await wait_status(aconn, job_id, "dead")

    rows = await (await aconn.execute("SELECT * FROM hook_log")).fetchall()
    assert len(rows) == 1
    hook_job, hook_error, inside, outside = rows[0]
    assert hook_job == job_id
    assert "RuntimeError: failure 2" in hook_error
    assert inside == "dead"
    assert outside == "running", "the hook ran before the change to dead was committed"
    assert row["last_error"] == hook_error


async def test_failing_on_dead_hook_is_rolled_back_and_the_job_is_still_dead(
    app: tickwork.App,
    database_url: str,
    clock: SettableClock,
    aconn: psycopg.AsyncConnection,
) -> None:
    await _hook_table(aconn)

    async def on_dead(job: tickwork.Job, conn: psycopg.AsyncConnection, error: str) -> None:
        await conn.execute("INSERT INTO hook_log (job_id) VALUES (%s)", (job.id,))
        raise LookupError("pager service unreachable")

    @app.task("t.hook_fails", max_attempts=1, on_dead=on_dead)
    async def task(job: tickwork.Job) -> None:
        raise RuntimeError("original failure")

    job_id = await app.enqueue_async("t.hook_fails", {})
    async with running(_worker(app, database_url, clock)):
        row = await wait_status(aconn, job_id, "dead")

    assert await ascalar(aconn, "SELECT count(*) FROM hook_log") == 0, "hook's write rolled back"
    assert "RuntimeError: original failure" in row["last_error"]
    assert "on_dead hook failed" in row["last_error"]
    assert "LookupError: pager service unreachable" in row["last_error"]
    assert row["finished_at"] == T0


async def test_sync_on_dead_hook_is_called(
    app: tickwork.App, database_url: str, clock: SettableClock, aconn: psycopg.AsyncConnection
) -> None:
    calls: list[tuple[int, str]] = []

    def on_dead(job: tickwork.Job, conn: Any, error: str) -> None:
        calls.append((job.id, error))

    @app.task("t.sync_hook", max_attempts=1, on_dead=on_dead)
    def task(job: tickwork.Job) -> None:
        raise RuntimeError("x")

    job_id = await app.enqueue_async("t.sync_hook", {})
    async with running(_worker(app, database_url, clock)):
        await wait_status(aconn, job_id, "dead")
    assert [c[0] for c in calls] == [job_id]
    assert "RuntimeError: x" in calls[0][1]


# --- timeouts ------------------------------------------------------------------------------


async def test_async_task_past_its_timeout_fails_with_timed_out(
    app: tickwork.App, database_url: str, clock: SettableClock, aconn: psycopg.AsyncConnection
) -> None:
    cancelled = asyncio.Event()

    @app.task("t.hangs", timeout=0.2, max_attempts=1)
    async def hangs(job: tickwork.Job) -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    job_id = await app.enqueue_async("t.hangs", {})
    async with running(_worker(app, database_url, clock)):
        row = await wait_status(aconn, job_id, "dead")
    assert row["last_error"] == "timed out after 0.2s"
    assert cancelled.is_set(), "the coroutine was cancelled, not left running"


async def test_sync_task_past_the_jobs_timeout_fails_with_timed_out(
    app: tickwork.App, database_url: str, clock: SettableClock, aconn: psycopg.AsyncConnection
) -> None:
    release = threading.Event()

    @app.task("t.blocks")  # no task timeout: the job's own applies
    def blocks(job: tickwork.Job) -> None:
        release.wait(10)

    job_id = await app.enqueue_async("t.blocks", {}, timeout=0.25, max_attempts=3)
    try:
        async with running(_worker(app, database_url, clock)):
            row = await wait_status(aconn, job_id, "available", attempt=1)
    finally:
        release.set()
    assert row["last_error"] == "timed out after 0.25s"
    assert row["run_at"] == at(30)


async def test_task_that_finishes_within_its_timeout_succeeds(
    app: tickwork.App, database_url: str, clock: SettableClock, aconn: psycopg.AsyncConnection
) -> None:
    @app.task("t.quick", timeout=5)
    async def quick(job: tickwork.Job) -> None:
        await asyncio.sleep(0.01)

    job_id = await app.enqueue_async("t.quick", {})
    async with running(_worker(app, database_url, clock)):
        await wait_status(aconn, job_id, "succeeded")


async def test_many_jobs_all_succeed_with_batched_completion(
    app: tickwork.App, database_url: str, clock: SettableClock, aconn: psycopg.AsyncConnection
) -> None:
    seen = Recorder()

    @app.task("t.many")
    async def many(job: tickwork.Job) -> None:
        seen.add(job)

    ids = await app.enqueue_many_async("t.many", [{"n": n} for n in range(300)])
    async with running(_worker(app, database_url, clock, concurrency=8, claim_batch=50)):

        async def all_done() -> bool:
            return (
                await ascalar(
                    aconn, "SELECT count(*) FROM tickwork.jobs WHERE status = 'succeeded'"
                )
                == 300
            )

        await wait_until(all_done, what="300 successes")
    assert sorted(seen.ids) == ids


@pytest.mark.parametrize("task_timeout", [None, 30.0])
async def test_task_raising_its_own_timeout_error_is_an_ordinary_failure(
    app: tickwork.App,
    database_url: str,
    clock: SettableClock,
    aconn: psycopg.AsyncConnection,
    task_timeout: float | None,
) -> None:
    """A TimeoutError from inside the task (a socket, a client library) is the task's error,
    recorded as such: not a crash of the worker's slot, not "timed out after 30s"."""

    @app.task("t.upstream", timeout=task_timeout, max_attempts=3)
    async def upstream(job: tickwork.Job) -> None:
        raise TimeoutError("upstream API did not answer")

    @app.task("t.after")
    async def after(job: tickwork.Job) -> None:
        return None

    job_id = await app.enqueue_async("t.upstream", {})
    async with running(_worker(app, database_url, clock, concurrency=1)):
        row = await wait_status(aconn, job_id, "available", attempt=1)
        # The only slot is still alive: the next job runs.
        await wait_status(aconn, await app.enqueue_async("t.after", {}), "succeeded")
    assert "TimeoutError: upstream API did not answer" in row["last_error"]
    assert "timed out after" not in row["last_error"]
    assert row["run_at"] == at(30)


# --- failures of jobs asked to stop --------------------------------------------------------


async def test_a_job_asked_to_stop_that_then_fails_is_cancelled_not_retried(
    app: tickwork.App, database_url: str, clock: SettableClock, aconn: psycopg.AsyncConnection
) -> None:
    running_now, release = threading.Event(), threading.Event()

    @app.task("t.fails_late", max_attempts=5)
    def fails_late(job: tickwork.Job) -> None:
        running_now.set()
        release.wait(10)
        raise RuntimeError("failed while being cancelled")

    job_id = await app.enqueue_async("t.fails_late", {})
    worker = _worker(app, database_url, clock)
    try:
        async with running(worker):
            await wait_until(running_now.is_set, what="the task to start")
            await asyncio.to_thread(app.cancel, job_id)
            await worker.heartbeat_once()
            release.set()
            row = await wait_status(aconn, job_id, "cancelled")
    finally:
        release.set()
    assert (row["attempt"], row["finished_at"]) == (1, T0)


async def test_a_failure_written_before_the_worker_heard_of_the_request_cancels_the_job(
    app: tickwork.App, database_url: str, conn: psycopg.Connection
) -> None:
    """The request and the failure race: whichever order they commit in, the job never runs
    again; the failure's error is kept."""
    job_id = await app.enqueue_async("t.unknown", {})
    (job,) = helpers.claim(conn, kinds=["t.unknown"])
    await asyncio.to_thread(app.cancel, job_id)
    became = store.run(conn, jobs_db.retry_job_later(job, 30, "RuntimeError: late", at(5)))
    assert became is JobStatus.CANCELLED
    row = helpers.job_row(conn, job_id)
    assert (row["status"], row["finished_at"], row["run_at"]) == ("cancelled", at(5), T0)
    assert row["last_error"] == "RuntimeError: late"


async def test_a_claimed_job_asked_to_stop_is_cancelled_when_handed_back(
    app: tickwork.App, conn: psycopg.Connection
) -> None:
    asked, plain = await app.enqueue_many_async("t.unknown", [{}, {}])
    jobs = helpers.claim(conn, kinds=["t.unknown"])
    await asyncio.to_thread(app.cancel, asked)
    assert store.run(conn, jobs_db.hand_back_jobs(jobs, at(2))) == {asked, plain}
    assert helpers.job_row(conn, asked)["status"] == "cancelled"
    assert helpers.job_row(conn, plain)["status"] == "available"
