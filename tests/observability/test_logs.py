"""Structured logs as a log pipeline reads them: one JSON object per line with the stable keys
(action, job_id, kind, schedule, worker, attempt) where they apply, never a payload, and for an
exception its type, message and traceback (in text too)."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import sys
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

import tickwork
from tests.support.helpers import at, running, settings, wait_status
from tests.support.schedule_helpers import every, fire
from tickwork import logs
from tickwork.clock import SettableClock
from tickwork.logs import KeyValueFormatter
from tickwork.schedules.options import JobTemplate, MisfirePolicy
from tickwork.worker.runner import Worker

SECRET = "payload-secret-4711"


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    """Everything logged (DEBUG and up) as ``--log-format json`` writes it."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(KeyValueFormatter(as_json=True))
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield out
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def records(out: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


def one(out: io.StringIO, action: str) -> dict[str, Any]:
    found = [r for r in records(out) if r.get("action") == action]
    assert len(found) == 1, f"{action}: {found}"
    return found[0]


async def test_job_records_carry_the_stable_keys_and_no_payload(
    database_url: str,
    app: tickwork.App,
    clock: SettableClock,
    aconn: psycopg.AsyncConnection[Any],
    captured: io.StringIO,
) -> None:
    @app.task("l.fail", max_attempts=2)
    async def fail(job: tickwork.Job) -> None:
        raise ValueError("no good")

    job_id = await app.enqueue_async("l.fail", {"token": SECRET})
    async with running(Worker(app, settings(database_url, name="log-worker"), clock=clock)):
        await wait_status(aconn, job_id, "available", attempt=1)
        clock.set(at(60))  # past the retry delay
        await wait_status(aconn, job_id, "dead")

    retry = one(captured, "job_retry")
    assert retry["level"] == "info"
    assert {k: retry[k] for k in ("job_id", "kind", "attempt", "worker")} == {
        "job_id": job_id,
        "kind": "l.fail",
        "attempt": 1,
        "worker": "log-worker",
    }
    assert retry["error"] == "ValueError: no good"
    dead = one(captured, "job_dead")
    assert (dead["job_id"], dead["kind"], dead["attempt"], dead["worker"]) == (
        job_id,
        "l.fail",
        2,
        "log-worker",
    )
    started = one(captured, "worker_started")
    assert started["worker"] == "log-worker"
    assert all(r["worker"] == "log-worker" for r in records(captured) if "worker" in r)
    assert SECRET not in captured.getvalue()


async def test_skipped_occurrences_are_logged_per_schedule_with_the_reason(
    app: tickwork.App, aconn: psycopg.AsyncConnection[Any], captured: io.StringIO
) -> None:
    app.sync_schedules(
        "logs",
        [
            every(
                "late",
                60,
                starting_deadline_seconds=10,
                misfire_policy=MisfirePolicy.SKIP,
                job=JobTemplate(kind="l.job", payload={"token": SECRET}),
            )
        ],
    )
    await fire(aconn, at(300), ("logs",))
    skipped = one(captured, "occurrences_skipped")
    assert (skipped["schedule"], skipped["kind"], skipped["count"], skipped["reason"]) == (
        "logs/late",
        "l.job",
        4,  # 60 ... 240 are late; 300 is on time and fires
        "misfire",
    )
    assert SECRET not in captured.getvalue()


def test_text_format_puts_the_keys_after_the_message() -> None:
    record = logging.LogRecord("tickwork", logging.INFO, __file__, 1, "job failed", (), None)
    record.__dict__.update(action="job_retry", job_id=7, kind="k", attempt=2)
    line = KeyValueFormatter(as_json=False).format(record)
    assert line.endswith(" INFO    job failed action=job_retry job_id=7 kind=k attempt=2")


@pytest.mark.parametrize("level", ["info", "debug"])
def test_the_pools_outage_warnings_are_debug_records_and_its_others_stay_warnings(
    level: str, capsys: pytest.CaptureFixture[str]
) -> None:
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    try:
        logs.configure(level)
        pool = logging.getLogger(logs.POOL_LOGGER)
        pool.warning("error connecting in %r: %s", "pool-1", "connection refused")
        pool.warning("discarding closed connection: %s", "<conn>")
        pool.warning("discarding broken connection: %s", "<conn>")
        pool.warning("rolling back returned connection: %s", "<conn>")
    finally:
        root.handlers[:], _ = saved
        root.setLevel(saved[1])
    lines = capsys.readouterr().err.splitlines()
    kept = [line for line in lines if " WARNING " in line]
    assert len(kept) == 1 and "rolling back returned connection" in kept[0], lines
    demoted = [line for line in lines if " DEBUG " in line]
    assert len(demoted) == (3 if level == "debug" else 0), lines


# --- exceptions ----------------------------------------------------------------------------


def _raised() -> logging.LogRecord:
    try:
        raise ValueError("the cause")
    except ValueError:
        exc_info = sys.exc_info()
    record = logging.LogRecord("tickwork", logging.ERROR, __file__, 1, "it broke", (), exc_info)
    record.__dict__.update(action="worker_crashed")
    return record


def test_text_format_puts_the_traceback_after_the_line() -> None:
    text = KeyValueFormatter(as_json=False).format(_raised())
    first, *trace = text.splitlines()
    assert first.endswith(" ERROR   it broke action=worker_crashed")
    assert trace[0] == "Traceback (most recent call last):"
    assert any("in _raised" in line for line in trace)
    assert trace[-1] == "ValueError: the cause"


def test_json_format_carries_the_exception_type_message_and_traceback() -> None:
    (line,) = KeyValueFormatter(as_json=True).format(_raised()).splitlines()
    record = json.loads(line)
    assert (record["message"], record["action"]) == ("it broke", "worker_crashed")
    exception = record["exception"]
    assert (exception["type"], exception["message"]) == ("ValueError", "the cause")
    assert exception["traceback"].startswith("Traceback (most recent call last):")
    assert "in _raised" in exception["traceback"]
    assert exception["traceback"].endswith("ValueError: the cause")


class LoopBug(Exception):
    pass


async def test_a_crashed_worker_loop_logs_its_cause(
    database_url: str, captured: io.StringIO
) -> None:
    async def broken(worker: Worker) -> None:
        raise LoopBug("a bug in the loop")

    app = tickwork.App(database_url, clock=SettableClock(at(0)))
    try:
        worker = Worker(app, settings(database_url), clock=app.clock, extra_loops=(broken,))
        await asyncio.wait_for(worker.run(), 10)  # stops by itself
    finally:
        await app.close_async()
    crashed = one(captured, "worker_crashed")
    assert crashed["message"] == "worker loop broken failed; shutting down"
    assert crashed["exception"]["type"] == f"{__name__}.LoopBug"
    assert crashed["exception"]["message"] == "a bug in the loop"
    assert "in broken" in crashed["exception"]["traceback"]
