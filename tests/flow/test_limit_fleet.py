"""Concurrency and rate limits across a fleet of worker processes (spawned, as in production),
each claiming with its own connections: what one process sees of another is only what the
database says.

* A queue limited to 3 with 200 short jobs, and a concurrency key limited to 2: never more at
  once (start and end recorded by the tasks on the machine's monotonic clock), the limits used
  (3 and 2 seen at once), and another queue's jobs run alongside freely.
* A rate of 50 starts per 10 s on a queue of 100 jobs: at most 50 starts in any 10 s window
  (the claims' start times, on the database clock, where the rule counts them), and the limit
  used: 50 in the first window and the rest after it.
"""

from __future__ import annotations

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


def most_at_once(spans: list[tuple[float, float]]) -> int:
    events = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    most = running = 0
    for _, change in events:  # at a tie an end sorts first: touching spans do not overlap
        running += change
        most = max(most, running)
    return most


def succeeded(conn: psycopg.Connection[Any]) -> int:
    return int(scalar(conn, "SELECT count(*) FROM tickwork.jobs WHERE status = 'succeeded'"))


def test_four_processes_never_run_more_than_a_queue_limit_or_a_key_limit(
    database_url: str, conn: psycopg.Connection[Any], tmp_path: Path, start_worker: StartWorker
) -> None:
    app = tickwork.App(database_url)
    try:
        app.set_limit("queue", "limited", max_running=3, actor="test")
        limited = app.enqueue_many(MP_TIMED_KIND, [{"sleep": 0.02}] * 60, queue="limited")
        keyed = app.enqueue_many(
            MP_TIMED_KIND,
            [{"sleep": 0.1}] * 20,
            queue="free",
            concurrency_key="k",
            concurrency_limit=2,
        )
        free = app.enqueue_many(MP_TIMED_KIND, [{"sleep": 0.5}] * 40, queue="free")
    finally:
        app.close()
    overrides = {"concurrency": 10, "claim_batch": 10, "queues": ("limited", "free")}
    for n in range(4):
        start_worker(f"lim-{n}", overrides)
    wait_until_sync(lambda: succeeded(conn) == 120, timeout=120, what="every job to succeed")

    spans = recorded_spans(tmp_path)
    assert set(spans) == set(limited) | set(keyed) | set(free), "each job ran"
    assert most_at_once([spans[i] for i in limited]) == 3, "never 4, and the limit used"
    assert most_at_once([spans[i] for i in keyed]) == 2, "never 3 of the key, and 2 used"
    assert most_at_once([spans[i] for i in free]) > 3, "the other queue ran freely"
    pickers = "SELECT count(DISTINCT picked_by) FROM tickwork.jobs WHERE queue = 'limited'"
    assert scalar(conn, pickers) > 1, "the processes shared the limited queue"


def test_four_processes_start_at_most_a_rates_worth_in_any_window_and_use_it(
    database_url: str, conn: psycopg.Connection[Any], start_worker: StartWorker
) -> None:
    overrides = {"concurrency": 5, "claim_batch": 5, "queues": ("rated",)}
    for n in range(4):
        start_worker(f"rate-{n}", overrides)
    wait_until_sync(
        lambda: scalar(conn, "SELECT count(*) FROM tickwork.workers") == 4,
        timeout=30,
        what="four workers to register",
    )
    app = tickwork.App(database_url)
    try:  # all four are waiting when the jobs come: they race for them
        app.set_limit("queue", "rated", rate="20/4s", actor="test")
        app.enqueue_many(MP_TIMED_KIND, [{"sleep": 0.05}] * 40, queue="rated")
    finally:
        app.close()
    wait_until_sync(lambda: succeeded(conn) == 40, timeout=60, what="every job to succeed")

    starts = [
        row[0]
        for row in conn.execute(
            "SELECT extract(epoch FROM started_at)::float8 FROM tickwork.jobs ORDER BY 1"
        )
    ]
    in_window = [sum(1 for t in starts if s <= t < s + 4) for s in starts]
    assert max(in_window) <= 20, "never more than 20 in a 4 s window"
    assert in_window[0] == 20, "the first window used fully"
    assert starts[20] - starts[0] >= 4, "the 21st waited for the window"
    pickers = "SELECT count(DISTINCT picked_by) FROM tickwork.jobs"
    assert scalar(conn, pickers) > 1, "the processes shared the rate"
