"""A task's return value kept on its job's row, through a real worker: values at and past the
payload limits, values that are not JSON, and values whose own methods fail. Each is kept, or
the job still succeeds with ``result_error`` naming the result and the reason: never a worker
crash, never a lost job (the worker goes on to run the next one)."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import psycopg
import pytest

import tickwork
from tests.support.helpers import running, settings, wait_status
from tickwork.clock import SettableClock
from tickwork.schedules import limits
from tickwork.worker.runner import Worker


class _Unreadable(dict[str, int]):
    def __iter__(self) -> Any:
        raise RuntimeError("no reading me")


def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def _cycle() -> list[Any]:
    loop: list[Any] = []
    loop.append(loop)
    return loop


AT_LIMIT = "x" * (limits.PAYLOAD_MAX_BYTES - 2)
"""Encoded with its quotes: exactly the limit."""

KEPT: dict[str, Any] = {
    "a dict": {"rows": 10, "tables": ["a", "b"], "ratio": 0.5, "ok": True, "none": None},
    "a string": "fine",
    "zero": 0,
    "false": False,
    "an empty list": [],
    "exactly the size limit": AT_LIMIT,
    "nested to the depth limit": _nested(limits.PAYLOAD_MAX_DEPTH),
    "the largest integer": limits.PAYLOAD_MAX_INT,
    "unicode": {"naïve ✓ 𝄞": "ünïcödé"},
}

REFUSED: dict[str, tuple[Any, str]] = {
    "one byte over the limit": (AT_LIMIT + "x", "is larger than 65536 bytes"),
    "far over the limit": (["y" * 1000] * 1000, "is larger than 65536 bytes"),
    "NaN": ({"score": math.nan}, "result.score: nan is not a JSON number"),
    "Infinity": ([1, math.inf], "result[1]: inf is not a JSON number"),
    "-Infinity": (-math.inf, "result: -inf is not a JSON number"),
    "a NUL in text": ({"text": "a\x00b"}, "must not contain NUL"),
    "a NUL in a key": ({"k\x00": 1}, "must not contain NUL"),
    "an unpaired surrogate": ("\ud800", "unpaired surrogate"),
    "one level too deep": (_nested(limits.PAYLOAD_MAX_DEPTH + 1), "nests deeper than 64"),
    "100000 levels deep": (_nested(100_000), "nests deeper than 64"),
    "a cycle": (_cycle(), "nests deeper than 64"),
    "a huge integer": (2**64, "outside the signed 64-bit integer range"),
    "a set": ({1, 2}, "is not a JSON value (set)"),
    "bytes": (b"raw", "is not a JSON value (bytes)"),
    "a datetime": (datetime(2030, 1, 1), "is not a JSON value (datetime)"),
    "an object": (object(), "is not a JSON value (object)"),
    "a tuple": ((1, 2), "is not a JSON value (tuple)"),
    "a non-string key": ({1: "a"}, "key 1 is not a string"),
    "a value that cannot be read": (_Unreadable(a=1), "could not be read: RuntimeError"),
}


@pytest.fixture
async def app(database_url: str, clock: SettableClock) -> AsyncIterator[tickwork.App]:
    app = tickwork.App(database_url, clock=clock)
    yield app
    await app.close_async()


async def _run(
    app: tickwork.App, database_url: str, clock: SettableClock, aconn: Any, values: list[Any]
) -> list[dict[str, Any]]:
    """Run one job per value, each returning it (async and sync tasks alternately), then one
    more job: the worker is still running them. The rows, in order."""

    @app.task("r.async")
    async def returns_async(job: tickwork.Job) -> Any:
        return values[job.payload["i"]]

    @app.task("r.sync")
    def returns_sync(job: tickwork.Job) -> Any:
        return values[job.payload["i"]]

    ids = [
        await app.enqueue_async("r.async" if i % 2 == 0 else "r.sync", {"i": i})
        for i in range(len(values))
    ]
    worker = Worker(app, settings(database_url, name="w-results"), clock=clock)
    async with running(worker):
        rows = [await wait_status(aconn, job_id, "succeeded") for job_id in ids]
        last = await app.enqueue_async("r.async", {"i": 0})
        await wait_status(aconn, last, "succeeded")
    assert not worker.failed
    return rows


async def test_results_within_the_limits_are_kept(
    app: tickwork.App, database_url: str, clock: SettableClock, aconn: psycopg.AsyncConnection
) -> None:
    values = [*KEPT.values(), None]
    rows = await _run(app, database_url, clock, aconn, values)
    for name, value, row in zip([*KEPT, "None"], values, rows, strict=True):
        assert row["result"] == value, name
        assert row["result_error"] is None, name


async def test_results_past_the_limits_leave_the_job_succeeded_with_an_error(
    app: tickwork.App,
    database_url: str,
    clock: SettableClock,
    aconn: psycopg.AsyncConnection,
    caplog: pytest.LogCaptureFixture,
) -> None:
    values = [value for value, _ in REFUSED.values()]
    rows = await _run(app, database_url, clock, aconn, values)
    for (name, (_, reason)), row in zip(REFUSED.items(), rows, strict=True):
        assert row["status"] == "succeeded", name
        assert row["result"] is None, name
        assert row["result_error"].startswith("not kept: result"), (name, row["result_error"])
        assert reason in row["result_error"], (name, row["result_error"])
        assert len(row["result_error"]) <= 500
        assert row["last_error"] is None, name
        assert "quote it" not in row["result_error"]
    logged = [r for r in caplog.records if getattr(r, "action", None) == "result_not_kept"]
    assert len(logged) == len(REFUSED) + 1  # and the last job's, which returned values[0]
    assert not any(r.levelname == "ERROR" for r in caplog.records)
