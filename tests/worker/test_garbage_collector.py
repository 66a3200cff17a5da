"""`tickwork worker` settles Python's garbage collector before it runs
(cli/worker.py ``settle_garbage_collector``): what start-up made is frozen out of its reach,
and the youngest generation is collected every 50,000 allocations instead of 700. A worker
draining jobs allocates rows, jobs and outcomes that their reference counts free, so the
collector's passes found little and cost 1.3-1.8 µs a no-op job (bench/peers.py).

The drain runs an in-process Worker (the command's own loop, without its subprocess), with the
collector's passes counted through ``gc.callbacks``; the test restores the process's collector
after."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

import tickwork
from tests.support.helpers import running, settings, wait_until
from tickwork.cli.worker import YOUNG_COLLECTION_THRESHOLD, settle_garbage_collector
from tickwork.worker.runner import Worker

JOBS = 3_000


@pytest.fixture
def collector() -> Iterator[list[int]]:
    """The generations of the collections made while the test runs; the collector's
    thresholds and frozen objects as they were, after."""
    thresholds = gc.get_threshold()
    generations: list[int] = []

    def counted(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            generations.append(info["generation"])

    gc.callbacks.append(counted)
    try:
        yield generations
    finally:
        gc.callbacks.remove(counted)
        gc.set_threshold(*thresholds)
        gc.unfreeze()


async def _drain(database_url: str, aconn: psycopg.AsyncConnection, collected: list[int]) -> int:
    """Young collections made while JOBS no-op jobs are enqueued and a worker drains them."""
    app = tickwork.App(database_url)

    @app.task("t.noop")
    async def noop(job: tickwork.Job) -> None:
        return None

    worker = Worker(app, settings(database_url, concurrency=10))
    try:
        async with running(worker):
            collected.clear()  # before the enqueue: the worker may claim before it returns
            await app.enqueue_many_async("t.noop", [{}] * JOBS)

            async def drained() -> bool:
                cur = await aconn.execute(
                    "SELECT count(*) FROM tickwork.jobs WHERE status = 'succeeded'"
                )
                row = await cur.fetchone()
                return row is not None and row[0] == JOBS

            await wait_until(drained, what=f"{JOBS} jobs to succeed")
            return collected.count(0)
    finally:
        await app.close_async()


async def test_a_settled_worker_collects_the_youngest_generation_a_few_times_a_drain(
    database_url: str, aconn: psycopg.AsyncConnection, collector: list[int]
) -> None:
    settle_garbage_collector()
    assert gc.get_threshold()[0] == YOUNG_COLLECTION_THRESHOLD
    assert gc.get_freeze_count() > 0  # start-up's objects (here: the test process's)

    young = await _drain(database_url, aconn, collector)

    # None when written; with Python's default of 700 the same enqueue and drain made 20-21
    # (the test below).
    assert young <= 5, young


async def test_python_defaults_collect_many_times_a_drain(
    database_url: str, aconn: psycopg.AsyncConnection, collector: list[int]
) -> None:
    """The control: the counting above can fail."""
    gc.set_threshold(700, 10, 10)

    young = await _drain(database_url, aconn, collector)

    assert young > 5, young
