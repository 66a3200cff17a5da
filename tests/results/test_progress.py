"""``job.progress()`` through a real worker: written while the task runs (one statement per
round for all the worker's jobs, at most once per round per job however often the task
reports), the last report written with the outcome (a success's in the completion itself,
a failure's just before it), values outside the limits made storable and noted once, values
of the wrong type refused at the call, and a failing write logged without failing the job."""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest

import tickwork
from tests.support.helpers import ajob_row, running, settings, wait_status, wait_until
from tickwork import progress
from tickwork.clock import SettableClock
from tickwork.db import results as results_db
from tickwork.errors import InvalidInput
from tickwork.model import JobId
from tickwork.worker.runner import Worker


@pytest.fixture
async def app(database_url: str, clock: SettableClock) -> AsyncIterator[tickwork.App]:
    app = tickwork.App(database_url, clock=clock)
    yield app
    await app.close_async()


def _worker(app: tickwork.App, database_url: str, clock: SettableClock) -> Worker:
    worker = Worker(app, settings(database_url, name="w-progress"), clock=clock)
    worker.progress.interval = 3600.0  # the test writes rounds itself (run_once)
    return worker


def _stored(row: dict[str, Any]) -> tuple[Any, Any, Any]:
    found = row["progress"]
    return None if found is None else (found["fraction"], found["message"], found["attempt"])


class _Writes:
    """Counts progress statements (the writer's, not the completion's)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        real = results_db.write_progress

        def counted(*args: Any, **kw: Any) -> Any:
            self.count += 1
            return real(*args, **kw)

        monkeypatch.setattr(results_db, "write_progress", counted)


async def test_progress_is_written_each_round_and_with_the_success(
    app: tickwork.App,
    database_url: str,
    clock: SettableClock,
    aconn: psycopg.AsyncConnection,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reported, go_on = asyncio.Event(), asyncio.Event()
    writes = _Writes(monkeypatch)

    @app.task("p.copy")
    async def copy(job: tickwork.Job) -> dict[str, int]:
        for i in range(100_000):  # a task reporting in a tight loop
            await job.progress(i / 100_000, f"copied {i} rows")
        await job.progress(0.4, "copied 4 of 10 tables")
        reported.set()
        await go_on.wait()
        await job.progress(1.0, "all 10 tables copied")
        return {"tables": 10}

    worker = _worker(app, database_url, clock)
    job_id = await app.enqueue_async("p.copy", {})
    async with running(worker):
        await asyncio.wait_for(reported.wait(), 10)
        assert _stored(await ajob_row(aconn, job_id)) is None, "nothing written before a round"
        assert await worker.progress.run_once() == 1
        row = await ajob_row(aconn, job_id)
        assert _stored(row) == (0.4, "copied 4 of 10 tables", 1)
        assert row["progress"]["at"].startswith("2030-01-01T00:00:00")
        assert await worker.progress.run_once() == 0, "written once: nothing new to write"
        assert writes.count == 1
        go_on.set()
        row = await wait_status(aconn, job_id, "succeeded")
    assert writes.count == 1, "the last report went with the completion, not a statement"
    assert _stored(row) == (1.0, "all 10 tables copied", 1)
    assert row["result"] == {"tables": 10}


async def test_a_failure_keeps_how_far_it_got_and_the_next_attempt_reports_anew(
    app: tickwork.App, database_url: str, clock: SettableClock, aconn: psycopg.AsyncConnection
) -> None:
    @app.task("p.flaky", max_attempts=2, retry=tickwork.Backoff(base=0, rate=1, max=0))
    def flaky(job: tickwork.Job) -> None:  # sync: no await
        job.progress(0.3 * job.attempt, f"attempt {job.attempt}")
        if job.attempt == 1:
            raise ValueError("disk full")

    job_id = await app.enqueue_async("p.flaky", {})
    async with running(_worker(app, database_url, clock)):
        row = await wait_status(aconn, job_id, "succeeded")
    assert _stored(row) == (0.6, "attempt 2", 2)
    assert "disk full" in row["last_error"]


async def test_a_dead_job_keeps_its_last_report(
    app: tickwork.App, database_url: str, clock: SettableClock, aconn: psycopg.AsyncConnection
) -> None:
    @app.task("p.dies", max_attempts=1)
    async def dies(job: tickwork.Job) -> None:
        await job.progress(0.7, "table 7 broke")
        raise RuntimeError("table 7")

    job_id = await app.enqueue_async("p.dies", {})
    async with running(_worker(app, database_url, clock)):
        row = await wait_status(aconn, job_id, "dead")
    assert _stored(row) == (0.7, "table 7 broke", 1)


HOSTILE: list[tuple[Any, Any, float | None, str | None, str | None]] = [
    # fraction, message, stored fraction, stored message, noted
    (1.5, "over", 1.0, "over", "fraction 1.5 outside 0..1: shown as 1"),
    (-3, None, 0.0, None, "fraction -3 outside 0..1: shown as 0"),
    (math.inf, "inf", 1.0, "inf", "outside 0..1"),
    (math.nan, "nan", None, "nan", "fraction NaN: shown as not known"),
    (None, "only a message", None, "only a message", None),
    (0, "", 0.0, "", None),
    (1, "done", 1.0, "done", None),
    (0.5, "x" * 10_000, 0.5, "x" * 499 + "…", "message of 10000 characters cut to 500"),
    (0.5, "a\x00b", 0.5, "a\ufffdb", "NUL characters replaced"),
    (0.5, "a\ud800b", 0.5, "a?b", "unpaired surrogates replaced"),
    (0.5, "<script>alert(1)</script>", 0.5, "<script>alert(1)</script>", None),
]


@pytest.mark.parametrize(("fraction", "message", "fraction_kept", "message_kept", "noted"), HOSTILE)
def test_reports_are_made_storable(
    fraction: Any, message: Any, fraction_kept: Any, message_kept: Any, noted: str | None
) -> None:
    report = progress.make_report(fraction, message, 1)
    assert (report.fraction, report.message) == (fraction_kept, message_kept)
    if noted is None:
        assert report.note is None
    else:
        assert report.note is not None and noted in report.note
    assert report.message is None or len(report.message) <= progress.MAX_MESSAGE_LENGTH


@pytest.mark.parametrize(
    ("fraction", "message", "field"),
    [
        ("40%", None, "progress.fraction"),
        (True, None, "progress.fraction"),
        ([0.5], None, "progress.fraction"),
        (0.5, 42, "progress.message"),
        (0.5, b"bytes", "progress.message"),
    ],
)
def test_values_of_the_wrong_type_are_refused_at_the_call(
    fraction: Any, message: Any, field: str
) -> None:
    with pytest.raises(InvalidInput) as caught:
        progress.make_report(fraction, message, 1)
    assert caught.value.field == field


async def test_outside_a_worker_a_report_goes_nowhere() -> None:
    job = tickwork.Job(JobId(1), "k", "q", {}, 0, None, None, 1, 1, 1)  # type: ignore[arg-type]
    await job.progress(0.5, "fine")
    assert job.progress(0.5) is job.progress(0.6)  # the one finished awaitable
    with pytest.raises(InvalidInput):
        job.progress("half")  # type: ignore[arg-type]


async def test_hostile_reports_in_a_worker_are_stored_changed_and_noted_once(
    app: tickwork.App,
    database_url: str,
    clock: SettableClock,
    aconn: psycopg.AsyncConnection,
    caplog: pytest.LogCaptureFixture,
) -> None:
    @app.task("p.hostile")
    async def hostile(job: tickwork.Job) -> None:
        for _ in range(1000):
            await job.progress(7, "\x00" + "y" * 5000)

    @app.task("p.wrong")
    async def wrong(job: tickwork.Job) -> None:
        await job.progress("40%")  # type: ignore[arg-type]

    good = await app.enqueue_async("p.hostile", {})
    bad = await app.enqueue_async("p.wrong", {})
    async with running(_worker(app, database_url, clock)):
        row = await wait_status(aconn, good, "succeeded")
        failed = await wait_status(aconn, bad, "available", attempt=1)
    fraction, message, _ = _stored(row)
    assert fraction == 1.0
    assert message.startswith("\ufffdyyy") and len(message) == 500
    noted = [r for r in caplog.records if getattr(r, "action", None) == "progress_changed"]
    assert len(noted) == 1, "noted once per job, not per report"
    assert "InvalidInput: progress.fraction: must be a number" in failed["last_error"]


async def test_a_failing_write_is_logged_and_the_job_goes_on(
    app: tickwork.App,
    database_url: str,
    clock: SettableClock,
    aconn: psycopg.AsyncConnection,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    reported, go_on = threading.Event(), threading.Event()

    @app.task("p.slow")
    def slow(job: tickwork.Job) -> str:
        job.progress(0.5, "half way")
        reported.set()
        go_on.wait(10)
        return "done"

    def broken(*args: Any, **kw: Any) -> Any:
        raise RuntimeError("the progress statement broke")

    monkeypatch.setattr(results_db, "write_progress", broken)
    worker = _worker(app, database_url, clock)
    job_id = await app.enqueue_async("p.slow", {})
    async with running(worker):
        await wait_until(reported.is_set, what="the report")
        assert await worker.progress.run_once() == 0
        assert await worker.progress.run_once() == 0
        go_on.set()
        row = await wait_status(aconn, job_id, "succeeded")
    assert row["result"] == "done"
    assert _stored(row) == (0.5, "half way", 1), "written with the outcome all the same"
    failed = [r for r in caplog.records if getattr(r, "action", None) == "progress_failed"]
    assert len(failed) == 1, "logged once per outage"
    assert not worker.failed
