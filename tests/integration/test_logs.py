"""Structured logs as a log pipeline reads them: one JSON object per line with the stable keys
(action, job_id, kind, schedule, worker, attempt) where they apply, and never a payload."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

import tickwork
from helpers import at, running, settings, wait_status
from schedule_helpers import every, fire
from tickwork.clock import SettableClock
from tickwork.logs import KeyValueFormatter
from tickwork.schedules.definition import JobTemplate, MisfirePolicy
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
