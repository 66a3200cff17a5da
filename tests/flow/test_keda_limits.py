"""KEDA's count under flow rules (migration 0022): a limited group counts at most its room of
its due waiting jobs, a group a rate shut counts none, running jobs still count, and a paused
queue's waiting jobs still do not."""

from __future__ import annotations

from typing import Any

import psycopg

import tickwork
from tests.flow.test_limited_claims import claim_ruled
from tests.support.helpers import at, claim, scalar

KIND = "flow.job"
OTHER = "flow.other"


def due(conn: psycopg.Connection[Any], queues: list[str] | None = None) -> int:
    # On the database's clock, the pinned T0 is years ahead: a lead time that reaches it.
    return int(scalar(conn, "SELECT tickwork.keda_due_work(%s, NULL, 1e9)", (queues,)))


def enqueue(app: tickwork.App, count: int, queue: str, kind: str = KIND) -> None:
    for _ in range(count):
        app.enqueue(kind, {}, queue=queue, run_at=at(-10))


def test_a_queue_limited_to_2_counts_2_of_its_100_due_jobs(
    app: tickwork.App, conn: psycopg.Connection[Any]
) -> None:
    enqueue(app, 100, "q")
    enqueue(app, 3, "free")
    assert due(conn) == 103
    app.set_limit("queue", "q", max_running=2)
    assert due(conn) == 2 + 3
    assert due(conn, ["q"]) == 2
    assert due(conn, ["free"]) == 3
    app.pause_queue("q")
    assert due(conn) == 3  # paused: none of its waiting jobs
    app.resume_queue("q")
    app.remove_limit("queue", "q")
    assert due(conn) == 103


def test_running_jobs_count_and_use_up_the_room(
    app: tickwork.App, conn: psycopg.Connection[Any]
) -> None:
    enqueue(app, 10, "q")
    assert len(claim(conn, kinds=[KIND], queues=["q"], limit=1)) == 1
    app.set_limit("queue", "q", max_running=2)
    assert due(conn) == 1 + 1  # the running job, and one more may start
    assert len(claim_ruled(conn, kinds=[KIND], queues=["q"], limit=1)) == 1
    assert due(conn) == 2  # both running; the 8 waiting are held


def test_a_kind_limit_caps_its_jobs_across_queues(
    app: tickwork.App, conn: psycopg.Connection[Any]
) -> None:
    enqueue(app, 5, "a")
    enqueue(app, 5, "b")
    enqueue(app, 4, "a", OTHER)
    app.set_limit("kind", KIND, max_running=3)
    assert due(conn) == 3 + 4
    assert due(conn, ["b"]) == 3


def test_a_rate_with_no_room_counts_nothing(
    app: tickwork.App, conn: psycopg.Connection[Any]
) -> None:
    enqueue(app, 5, "q")
    enqueue(app, 2, "free")
    app.set_limit("queue", "q", rate="3/hour")
    assert due(conn) == 5 + 2  # a rate with room caps nothing
    started = claim_ruled(conn, kinds=[KIND], queues=["q"])
    assert len(started) == 3
    assert due(conn) == 3 + 0 + 2  # the 3 running, none of the 2 waiting, the free queue's
    app.set_limit("queue", "q", rate="10/hour", rate_key="customer")
    assert due(conn) == 3 + 2 + 2  # a keyed rate caps nothing here


def test_a_shut_namespace_leaves_the_queues_room_to_others(
    app: tickwork.App, conn: psycopg.Connection[Any]
) -> None:
    conn.execute(
        "INSERT INTO tickwork.jobs (kind, queue, schedule_namespace, schedule_name, run_at) "
        "SELECT %s, 'q', 'tenant', 's', now() - interval '1 hour' FROM generate_series(1, 5)",
        (KIND,),
    )
    enqueue(app, 5, "q")
    app.set_limit("namespace", "tenant", rate="1/hour")
    app.set_limit("queue", "q", max_running=4)
    # Two partly used caps overlapping: never more than either allows (1 of the tenant's jobs
    # and 4 of the queue's); fewer than could start is possible (the older tenant jobs fill
    # the queue's first 4).
    assert 1 <= due(conn) <= 4
    conn.execute(
        "INSERT INTO tickwork.flow_starts SELECT id, '', now(), 1 FROM tickwork.flow_rules "
        "WHERE scope = 'namespace'"
    )
    assert due(conn) == 4  # the tenant is shut: the queue's 4 are the other jobs
