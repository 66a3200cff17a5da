"""A pause across a fleet of worker processes: once the pause of a queue is committed, no
process starts a job of it later than 1 s after (start times recorded by the tasks, on the
machine's monotonic clock), the jobs running then finish, the other queue's jobs keep
running, and on resume the paused queue's jobs all run. The workers keep the default poll
interval (2 s): the pause does not wait for it."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import psycopg

import tickwork
from tests.support.helpers import (
    MP_TIMED_KIND,
    StartWorker,
    recorded_spans,
    scalar,
    wait_until_sync,
)


def _count(conn: psycopg.Connection[Any], queue: str, status: str) -> int:
    query = "SELECT count(*) FROM tickwork.jobs WHERE queue = %s AND status = %s"
    return int(scalar(conn, query, (queue, status)))


def test_nothing_of_a_paused_queue_starts_a_second_after_the_pause_across_three_processes(
    database_url: str, conn: psycopg.Connection[Any], tmp_path: Path, start_worker: StartWorker
) -> None:
    names = ["pause-0", "pause-1", "pause-2"]
    overrides = {"concurrency": 4, "claim_batch": 10, "queues": ("default", "held")}
    for name in names:
        start_worker(name, overrides)
    wait_until_sync(
        lambda: scalar(conn, "SELECT count(*) FROM tickwork.workers") == len(names),
        timeout=30,
        what="three workers to register",
    )
    app = tickwork.App(database_url)
    try:
        held = app.enqueue_many(MP_TIMED_KIND, [{"sleep": 0.05}] * 1500, queue="held")
        wait_until_sync(
            lambda: _count(conn, "held", "succeeded") >= 60, timeout=30, what="jobs running"
        )
        assert _count(conn, "held", "running") > 0, "jobs are running when the pause commits"
        app.pause_queue("held", actor="test", reason="fleet test")
        paused = time.monotonic()  # the pause is committed

        others = app.enqueue_many(MP_TIMED_KIND, [{"sleep": 0.01}] * 40, queue="default")
        wait_until_sync(
            lambda: _count(conn, "held", "running") == 0,
            timeout=15,
            what="the paused queue's running jobs to finish",
        )
        wait_until_sync(
            lambda: _count(conn, "default", "succeeded") == len(others),
            timeout=15,
            what="the other queue's jobs to run while the first is paused",
        )
        spans = recorded_spans(tmp_path)
        late = [job for job in held if job in spans and spans[job][0] > paused + 1.0]
        assert not late, f"{len(late)} jobs of the paused queue started over 1 s after it"
        waiting = _count(conn, "held", "available")
        assert waiting > 0 and _count(conn, "held", "dead") == 0
        ran_before = len([job for job in held if job in spans])
        assert ran_before + waiting == len(held), "the jobs running at the pause finished"

        app.resume_queue("held", actor="test")
        wait_until_sync(
            lambda: _count(conn, "held", "succeeded") == len(held),
            timeout=60,
            what="the resumed queue's jobs to run",
        )
    finally:
        app.close()
