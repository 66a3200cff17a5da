"""The status that tells the truth, end to end: the real operator against kmock and a real
PostgreSQL. ``Served`` flips True→False→True→False as a real in-process ``Worker`` (tickwork's
own, offering the namespace and registering the kind) starts and stops, and as worker rows
written with the worker's own registration and heartbeat statements come, go stale or lack
the kind, or serve other queues than the job's, or as its namespace is paused; Warning Events
say so. ``status.lastJob``
follows the last job (and keeps its id and outcome once retention deleted it); CronJob-like
Events are posted, rate-limited, and a restart of the operator posts none for what happened
before it."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import psycopg

import tickwork
from tests.operator.harness import DEADLINE, Cluster, OperatorFactory, row
from tests.support.helpers import running, scalar, settings, wait_until
from tickwork.db import store
from tickwork.db import workers as workers_db
from tickwork.maintenance import firing
from tickwork.maintenance.retention import Retention, RetentionConfig
from tickwork.worker.runner import Worker

KIND = "s.job"
HOURLY: dict[str, Any] = {"every": "1h", "job": {"kind": KIND}}


def condition(cluster: Cluster, name: str, kind: str) -> dict[str, Any]:
    body = cluster.get(name) or {}
    for found in body.get("status", {}).get("conditions", []):
        if found["type"] == kind:
            return dict(found)
    return {}


async def wait_served(cluster: Cluster, name: str, status: str, reason: str) -> dict[str, Any]:
    await wait_until(
        lambda: (
            (
                condition(cluster, name, "Served").get("status"),
                condition(cluster, name, "Served").get("reason"),
            )
            == (status, reason)
        ),
        timeout=DEADLINE,
        what=f"{name}: Served {status} {reason}",
    )
    return condition(cluster, name, "Served")


def events(cluster: Cluster, name: str, reason: str) -> list[dict[str, Any]]:
    return [e for e in cluster.events(name) if e.get("reason") == reason]


async def wait_events(cluster: Cluster, name: str, reason: str, count: int) -> list[dict[str, Any]]:
    await wait_until(
        lambda: len(events(cluster, name, reason)) >= count,
        timeout=DEADLINE,
        what=f"{count} {reason} events of {name}",
    )
    return events(cluster, name, reason)


def register(url: str, name: str, kinds: list[str], now: datetime | None = None) -> None:
    """A worker row as a worker writes it at start (``now``: its heartbeat's time)."""
    with psycopg.connect(url, autocommit=True) as conn:
        op = workers_db.register_worker(
            name=name,
            queues=["default"],
            kinds=kinds,
            namespaces=["ns"],
            concurrency=1,
            host="test",
            pid=1,
            now=now,
        )
        store.run(conn, op)


def heartbeat(url: str, name: str, now: datetime) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        incarnation = scalar(
            conn, "SELECT incarnation FROM tickwork.workers WHERE name = %s", (name,)
        )
        store.run(conn, workers_db.touch_worker(incarnation, now))


def db_now(url: str) -> datetime:
    with psycopg.connect(url) as conn:
        now: datetime = scalar(conn, "SELECT now()")
    return now


async def test_served_follows_the_live_workers_offering_the_namespace_and_kind(
    cluster: Cluster, start_operator: OperatorFactory, database_url: str
) -> None:
    await start_operator(live_worker_seconds=60)
    await cluster.create("served", HOURLY)
    await cluster.wait_ready("served", "Synced")
    nobody = await wait_served(cluster, "served", "False", "NoWorker")
    assert "'ns'" in nobody["message"] and "live workers: 0" in nobody["message"]
    (warning,) = await wait_events(cluster, "served", "NoWorker", 1)
    assert warning["type"] == "Warning" and "'ns'" in warning["message"]

    app = tickwork.App(database_url)

    @app.task(KIND)
    def job(job: tickwork.Job) -> None: ...

    worker = Worker(app, settings(database_url, name="w1", namespaces=("ns",)))
    async with running(worker):
        up = await wait_served(cluster, "served", "True", "WorkersAvailable")
        assert up["message"] == (
            "1 live worker offers schedule namespace 'ns'; 1 live worker registers kind 's.job'"
            " and serves queue 'default'"
        )
        # READY stays about the sync.
        assert (cluster.ready("served") or {})["reason"] == "Synced"
    # The last worker offering the namespace stopped (it deregisters): False again, a Warning.
    await wait_served(cluster, "served", "False", "NoWorker")
    await wait_events(cluster, "served", "NoWorker", 2)

    register(database_url, "w2", [KIND])
    await wait_served(cluster, "served", "True", "WorkersAvailable")
    # Its heartbeat goes stale (last seen longer ago than the liveness window): not live.
    heartbeat(database_url, "w2", db_now(database_url) - timedelta(seconds=61))
    await wait_served(cluster, "served", "False", "NoWorker")

    register(database_url, "w3", ["something.else"])
    kindless = await wait_served(cluster, "served", "False", "KindNotRegistered")
    assert "kind 's.job'" in kindless["message"]
    (warning,) = await wait_events(cluster, "served", "KindNotRegistered", 1)
    assert warning["type"] == "Warning"
    app.close()


async def test_served_needs_a_live_worker_claiming_from_the_jobs_queue(
    cluster: Cluster, start_operator: OperatorFactory, database_url: str
) -> None:
    """A worker registering the kind but serving other queues never claims the schedule's
    jobs: QueueNotServed with a Warning Event, until a worker serves that queue too."""
    await start_operator(live_worker_seconds=60)
    await cluster.create("queued", {"every": "1h", "job": {"kind": KIND, "queue": "reports"}})
    await cluster.wait_ready("queued", "Synced")
    await wait_served(cluster, "queued", "False", "NoWorker")

    app = tickwork.App(database_url)

    @app.task(KIND)
    def job(job: tickwork.Job) -> None: ...

    elsewhere = settings(database_url, name="w1", namespaces=("ns",), queues=("default",))
    async with running(Worker(app, elsewhere)):
        waiting = await wait_served(cluster, "queued", "False", "QueueNotServed")
        assert waiting["message"].startswith(
            "1 live worker registers kind 's.job', but none of them serves queue 'reports'"
        )
        (warning,) = await wait_events(cluster, "queued", "QueueNotServed", 1)
        assert warning["type"] == "Warning" and "'reports'" in warning["message"]
        both = settings(database_url, name="w2", namespaces=(), queues=("reports", "default"))
        async with running(Worker(app, both)):
            up = await wait_served(cluster, "queued", "True", "WorkersAvailable")
            assert up["message"].endswith("registers kind 's.job' and serves queue 'reports'")
        await wait_served(cluster, "queued", "False", "QueueNotServed")
    app.close()


async def test_served_says_when_the_schedule_namespace_is_paused(
    cluster: Cluster, start_operator: OperatorFactory, database_url: str
) -> None:
    """`tickwork namespaces pause` shows on the Schedule: Served False with NamespacePaused
    (the SERVED and SERVED REASON columns of -o wide) and a Warning Event, until resumed."""
    await start_operator(live_worker_seconds=60)
    await cluster.create("held", HOURLY)
    await cluster.wait_ready("held", "Synced")
    register(database_url, "w1", [KIND])
    await wait_served(cluster, "held", "True", "WorkersAvailable")

    app = tickwork.App(database_url)
    try:
        app.pause_namespace("ns", actor="alice", reason="freeze")
        held = await wait_served(cluster, "held", "False", "NamespacePaused")
        assert held["message"].startswith("schedule namespace 'ns' is paused (by alice)")
        (warning,) = await wait_events(cluster, "held", "NamespacePaused", 1)
        assert warning["type"] == "Warning"
        app.resume_namespace("ns", actor="alice")
        await wait_served(cluster, "held", "True", "WorkersAvailable")
    finally:
        app.close()


async def test_a_dead_job_gets_a_warning_job_failed_event_rate_limited(
    cluster: Cluster, start_operator: OperatorFactory, database_url: str
) -> None:
    """A job of the Schedule fails its only attempt in a real Worker: the operator posts a
    Warning ``JobFailed`` naming the job, its attempts and its error; a second dead job
    within the event window is held (one Event per reason per window)."""
    await start_operator(event_window_seconds=3600)
    await cluster.create("failing", {"every": "1h", "job": {"kind": KIND, "maxAttempts": 1}})
    await cluster.wait_ready("failing", "Synced")
    app = tickwork.App(database_url)

    @app.task(KIND)
    def job(job: tickwork.Job) -> None:
        raise RuntimeError("upstream said no")

    async with running(Worker(app, settings(database_url, namespaces=()))):
        first = app.trigger("ns", "failing", actor="test")
        (failed,) = await wait_events(cluster, "failing", "JobFailed", 1)
        assert failed["type"] == "Warning"
        assert failed["message"].startswith(f"Job {first} is dead after 1 attempts: ")
        assert "RuntimeError" in failed["message"] and "upstream said no" in failed["message"]
        await wait_until(
            lambda: last_job(cluster, "failing").get("outcome") == "dead", what="lastJob dead"
        )

        second = app.trigger("ns", "failing", actor="test")
        await wait_until(
            lambda: (
                last_job(cluster, "failing") == {**last_job(cluster, "failing"), "id": second}
                and last_job(cluster, "failing").get("outcome") == "dead"
            ),
            timeout=DEADLINE,
            what="the second job dead in lastJob",
        )
    # The round that showed the second dead job posted no second JobFailed: held.
    assert len(events(cluster, "failing", "JobFailed")) == 1
    app.close()


async def fire_at(url: str, instant: datetime) -> int:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        report = await firing.run_once(conn, ["ns"], instant)
    return report.fired


def last_job(cluster: Cluster, name: str) -> dict[str, Any]:
    return dict((cluster.get(name) or {}).get("status", {}).get("lastJob") or {})


def job_ids(url: str) -> list[int]:
    with psycopg.connect(url) as conn:
        return [r[0] for r in conn.execute("SELECT id FROM tickwork.jobs ORDER BY id")]


async def test_last_job_and_rate_limited_events_and_none_for_what_came_before_a_restart(
    cluster: Cluster, start_operator: OperatorFactory, database_url: str
) -> None:
    operator = await start_operator(event_window_seconds=3600)
    await cluster.create("nightly", {"every": "1m", "job": {"kind": KIND}})
    await cluster.wait_ready("nightly", "Synced")
    stored = row(database_url, "nightly")
    assert stored is not None
    first_run = stored["next_run_at"]

    assert await fire_at(database_url, first_run) == 1
    (first,) = job_ids(database_url)
    (created,) = await wait_events(cluster, "nightly", "SuccessfulCreate", 1)
    assert created["type"] == "Normal"
    assert created["message"].startswith(f"Created job {first} for the occurrence ")
    await wait_until(lambda: last_job(cluster, "nightly").get("id") == first, what="lastJob")
    assert last_job(cluster, "nightly")["outcome"] == "available"

    # Three minutes late: the default misfire policy (Latest) fires one, skips two.
    assert await fire_at(database_url, first_run + timedelta(minutes=3)) == 1
    second = job_ids(database_url)[-1]
    (skipped,) = await wait_events(cluster, "nightly", "SkippedOccurrences", 1)
    assert skipped["type"] == "Warning"
    assert skipped["message"] == "Skipped 2 occurrences (2 since creation)"

    app = tickwork.App(database_url)
    app.cancel(second)
    (completed,) = await wait_events(cluster, "nightly", "SawCompletedJob", 1)
    assert completed["message"] == f"Saw completed job {second}: cancelled"
    # The second creation came within the window: held (to be counted into the next one).
    assert len(events(cluster, "nightly", "SuccessfulCreate")) == 1
    await wait_until(
        lambda: last_job(cluster, "nightly").get("outcome") == "cancelled", what="cancelled"
    )
    shown = last_job(cluster, "nightly")
    assert shown["id"] == second and "finishedAt" in shown and "startedAt" not in shown

    # Retention deletes the job row: lastJob keeps what the schedule row has.
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        later = db_now(database_url) + timedelta(days=30)
        assert await Retention(RetentionConfig(age_seconds=1)).run_once(conn, later) >= 1
    await wait_until(
        lambda: "finishedAt" not in last_job(cluster, "nightly"), what="lastJob without times"
    )
    assert last_job(cluster, "nightly") == {"id": second, "outcome": "cancelled"}

    # What happens while the operator is down posts nothing after its start.
    await operator.stop()
    assert await fire_at(database_url, first_run + timedelta(minutes=10)) == 1
    third = job_ids(database_url)[-1]
    await start_operator(event_window_seconds=0, identity="operator-1")
    await wait_until(lambda: last_job(cluster, "nightly").get("id") == third, what="third job")
    app.cancel(third)
    await wait_events(cluster, "nightly", "SawCompletedJob", 2)
    assert len(events(cluster, "nightly", "SuccessfulCreate")) == 1
    assert len(events(cluster, "nightly", "SkippedOccurrences")) == 1
    app.close()
