"""The in-process Worker: prompt pickup through LISTEN/NOTIFY, graceful shutdown with hand-back,
the workers table, retention, and maintenance duties divided between workers."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import threading
import time
from datetime import timedelta
from typing import Any

import psycopg
import pytest

import tickwork
from tests.support.helpers import (
    T0,
    Recorder,
    ajob_row,
    ascalar,
    at,
    opened,
    running,
    settings,
    wait_status,
    wait_until,
)
from tickwork.clock import SettableClock
from tickwork.db import jobs as jobs_db
from tickwork.db import store
from tickwork.db import workers as workers_db
from tickwork.maintenance import claim_floors, deadlines, gauges, leases, retention
from tickwork.maintenance import workers as worker_expiry
from tickwork.maintenance.workers import WorkerExpiryConfig
from tickwork.worker.runner import Worker


async def _count(aconn: psycopg.AsyncConnection, where: str = "true") -> int:
    return int(await ascalar(aconn, f"SELECT count(*) FROM tickwork.jobs WHERE {where}"))


# --- LISTEN/NOTIFY -------------------------------------------------------------------------


async def _listening(aconn: psycopg.AsyncConnection) -> bool:
    return bool(
        await ascalar(
            aconn,
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND query LIKE 'LISTEN %%' AND state = 'idle'",
        )
    )


async def test_new_job_wakes_an_idle_worker_long_before_its_poll_interval(
    database_url: str, aconn: psycopg.AsyncConnection
) -> None:
    poll_seconds = 30.0
    app = tickwork.App(database_url)  # the database clock: notifications are sent for due jobs

    @app.task("t.ping")
    async def ping(job: tickwork.Job) -> None:
        return None

    worker = Worker(app, settings(database_url, poll_seconds=poll_seconds, lease_seconds=60))
    try:
        async with running(worker):
            await wait_until(lambda: _listening(aconn), what="the worker to LISTEN")
            enqueued = time.monotonic()
            job_id = await app.enqueue_async("t.ping", {})
            # Deadline well under the poll interval: only the notification can explain it.
            await wait_status(aconn, job_id, "succeeded", timeout=poll_seconds / 3)
            assert time.monotonic() - enqueued < poll_seconds
    finally:
        await app.close_async()


_PRODUCER = """
import sys
import tickwork

app = tickwork.App(sys.argv[1])
print(app.enqueue("t.ping", {}))
app.close()
"""


async def test_a_producer_process_wakes_an_idle_worker_with_its_after_commit_notification(
    database_url: str, aconn: psycopg.AsyncConnection
) -> None:
    """Another process enqueues through the App's own transaction: its insert notifies nobody
    (tickwork.notify_jobs is off in it) and the one notification comes after its commit; that
    one wakes the worker long before its poll interval."""
    poll_seconds = 30.0
    app = tickwork.App(database_url)

    @app.task("t.ping")
    async def ping(job: tickwork.Job) -> None:
        return None

    worker = Worker(app, settings(database_url, poll_seconds=poll_seconds, lease_seconds=60))
    try:
        async with running(worker):
            await wait_until(lambda: _listening(aconn), what="the worker to LISTEN")
            produced = await asyncio.create_subprocess_exec(
                sys.executable, "-c", _PRODUCER, database_url, stdout=asyncio.subprocess.PIPE
            )
            out, _ = await produced.communicate()
            assert produced.returncode == 0
            await wait_status(aconn, int(out), "succeeded", timeout=poll_seconds / 3)
    finally:
        await app.close_async()


async def test_a_batch_cut_short_by_one_key_is_followed_by_another_claim_at_once(
    database_url: str, aconn: psycopg.AsyncConnection
) -> None:
    """A claim takes one job per key: a batch full of one key's jobs claims one of them, and
    the claimer claims again right away (not after its poll interval) for the jobs behind."""
    poll_seconds = 30.0
    app = tickwork.App(database_url)

    @app.task("t.ping")
    async def ping(job: tickwork.Job) -> None:
        return None

    worker = Worker(
        app, settings(database_url, poll_seconds=poll_seconds, lease_seconds=60, claim_batch=5)
    )
    try:
        async with running(worker):
            await wait_until(lambda: _listening(aconn), what="the worker to LISTEN")
            with app.connection() as conn:  # one transaction: a single notification
                app.enqueue_many("t.ping", [{}] * 10, concurrency_key="k", conn=conn)
                behind = app.enqueue_many("t.ping", [{}] * 3, conn=conn)
            for job_id in behind:
                await wait_status(aconn, job_id, "succeeded", timeout=poll_seconds / 3)
    finally:
        await app.close_async()


# --- graceful shutdown ---------------------------------------------------------------------


async def test_stop_hands_back_buffered_jobs_at_once_and_lets_the_running_one_finish(
    database_url: str, aconn: psycopg.AsyncConnection
) -> None:
    clock = SettableClock(T0)
    app = tickwork.App(database_url, clock=clock)
    started, release = Recorder(), asyncio.Event()

    @app.task("t.slow")
    async def slow(job: tickwork.Job) -> None:
        started.add(job)
        await release.wait()

    worker = Worker(
        app,
        settings(database_url, concurrency=1, prefetch=5, shutdown_grace_seconds=10),
        clock=clock,
    )
    run = asyncio.create_task(worker.run())
    try:
        ids = await app.enqueue_many_async("t.slow", [{}] * 8)
        await wait_until(lambda: len(started.ids) == 1, what="one job to start")

        async def claimed_six() -> bool:
            return await _count(aconn, "status = 'running'") == 6

        await wait_until(claimed_six, what="1 running + 5 prefetched")
        (running_id,) = started.ids

        worker.stop()

        async def handed_back() -> bool:
            return await _count(aconn, "status = 'available'") == 7

        await wait_until(handed_back, what="the 5 buffered jobs to be handed back")
        assert not run.done(), "still waiting for the running job"
        rows = await (
            await aconn.execute(
                "SELECT id, attempt, picked_by, started_at, lease_expires_at FROM tickwork.jobs"
                " WHERE status = 'available' ORDER BY id"
            )
        ).fetchall()
        assert {r[0] for r in rows} == set(ids) - {running_id}
        assert {r[1:] for r in rows} == {(0, None, None, None)}, "as if never claimed"
        assert (await ajob_row(aconn, running_id))["status"] == "running"

        release.set()
        await asyncio.wait_for(run, 10)
        row = await ajob_row(aconn, running_id)
        assert row["status"] == "succeeded"
        assert await _count(aconn, "status = 'available'") == 7, "nothing claimed after stop"
        assert started.ids == [running_id]
        assert await ascalar(aconn, "SELECT count(*) FROM tickwork.workers") == 0, "deregistered"
    finally:
        worker.stop()
        release.set()
        await asyncio.wait_for(run, 10)
        await app.close_async()


@pytest.mark.parametrize("flavour", ["async", "sync"])
async def test_job_still_running_after_the_grace_period_is_handed_back_with_its_attempt_unspent(
    database_url: str, aconn: psycopg.AsyncConnection, flavour: str
) -> None:
    clock = SettableClock(T0)
    app = tickwork.App(database_url, clock=clock)
    started, unblock = threading.Event(), threading.Event()

    if flavour == "async":

        @app.task("t.hang", max_attempts=3)
        async def hang_async(job: tickwork.Job) -> None:
            started.set()
            await asyncio.Event().wait()
    else:

        @app.task("t.hang", max_attempts=3)
        def hang_sync(job: tickwork.Job) -> None:
            started.set()
            unblock.wait(10)

    try:
        job_id = await app.enqueue_async("t.hang", {})
        worker = Worker(app, settings(database_url, shutdown_grace_seconds=0.2), clock=clock)
        async with running(worker):
            await wait_until(started.is_set, what="the task to start")
        # running() returned: stop() completed although the task never finished.
        row = await ajob_row(aconn, job_id)
        assert row["status"] == "available"
        assert row["attempt"] == 0, "a worker shutting down is not the job failing"
        assert row["interruptions"] == 1
        assert row["last_error"].startswith("interrupted: worker w1 shut down")
        assert row["run_at"] == T0, "due again at once, not after the retry delay"
        assert (row["picked_by"], row["lease_expires_at"]) == ("w1", None)
    finally:
        unblock.set()
        await app.close_async()


# --- the workers table ---------------------------------------------------------------------


async def test_workers_table_registration_refresh_expiry_and_removal(
    database_url: str, aconn: psycopg.AsyncConnection
) -> None:
    clock = SettableClock(T0)
    app = tickwork.App(database_url, clock=clock)

    @app.task("t.b", queue="mail")
    def b(job: tickwork.Job) -> None:
        return None

    @app.task("t.a")
    def a(job: tickwork.Job) -> None:
        return None

    def listed() -> dict[str, workers_db.WorkerInfo]:
        with psycopg.connect(database_url) as c:
            return {w.name: w for w in store.run(c, workers_db.list_workers())}

    worker = Worker(
        app,
        settings(database_url, name="w-reg", namespaces=("billing", "ops"), concurrency=3),
        clock=clock,
    )
    try:
        async with running(worker):
            info = (await asyncio.to_thread(listed))["w-reg"]
            assert info.queues == ["default", "mail"]
            assert info.kinds == ["t.a", "t.b", "tickwork.steps"]  # every worker runs steps
            assert info.namespaces == ["billing", "ops"]
            assert info.concurrency == 3
            assert info.host == socket.gethostname()
            assert info.pid == os.getpid()
            assert info.started_at == info.last_seen_at == T0

            clock.set(at(50))
            await worker.heartbeat_once()
            info = (await asyncio.to_thread(listed))["w-reg"]
            assert (info.started_at, info.last_seen_at) == (T0, at(50))

            # A worker that stopped refreshing: stale at at(170), not yet at the clock's at(50),
            # so the worker's own maintenance loop (running meanwhile) leaves it to this test.
            await store.arun(
                aconn,
                workers_db.register_worker(
                    name="w-gone",
                    queues=["default"],
                    kinds=["t.a"],
                    namespaces=[],
                    concurrency=1,
                    host="elsewhere",
                    pid=1,
                    now=at(-60),
                ),
            )
            assert await worker_expiry.WorkerExpiry(WorkerExpiryConfig(ttl_seconds=120)).run_once(
                aconn, at(170)
            ) == ["w-gone"]
            assert set(await asyncio.to_thread(listed)) == {"w-reg"}, "fresh one kept"
            assert await worker_expiry.WorkerExpiry(WorkerExpiryConfig(ttl_seconds=120)).run_once(
                aconn, at(170.001)
            ) == ["w-reg"]
            await worker.heartbeat_once()  # refreshing an expired row does not resurrect it
            assert await asyncio.to_thread(listed) == {}
        assert await ascalar(aconn, "SELECT count(*) FROM tickwork.workers") == 0
    finally:
        await app.close_async()


async def test_a_worker_given_no_clock_runs_on_the_apps(
    database_url: str, aconn: psycopg.AsyncConnection
) -> None:
    clock = SettableClock(at(3600))
    app = tickwork.App(database_url, clock=clock)

    @app.task("t.a")
    def a(job: tickwork.Job) -> None:
        return None

    job = await app.enqueue_async("t.a")
    worker = Worker(app, settings(database_url, name="w-app-clock"))
    try:
        async with opened(worker):
            await worker._register()
            claimed = await worker.claim_once(10)
        assert [j.id for j in claimed] == [job]
        assert claimed[0].started_at == at(3600), "claimed at the App's pinned time"
        seen = await ascalar(
            aconn, "SELECT last_seen_at FROM tickwork.workers WHERE name = 'w-app-clock'"
        )
        assert seen == at(3600)
    finally:
        await app.close_async()


async def test_stopped_worker_removes_its_row(
    database_url: str, aconn: psycopg.AsyncConnection
) -> None:
    app = tickwork.App(database_url, clock=SettableClock(T0))
    try:
        async with running(Worker(app, settings(database_url, name="w-x"), clock=app.clock)):
            assert await ascalar(aconn, "SELECT array_agg(name) FROM tickwork.workers") == ["w-x"]
        assert await ascalar(aconn, "SELECT count(*) FROM tickwork.workers") == 0
    finally:
        await app.close_async()


async def test_an_error_in_a_worker_loop_is_logged_once_and_retried_not_a_crash(
    app: tickwork.App,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    @app.task("t.any")
    async def anything(job: tickwork.Job) -> None:
        return None

    calls = 0
    real_claim = jobs_db.claim_jobs

    def broken_claim(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls <= 4:
            raise RuntimeError("a bug in the claim")
        return real_claim(*args, **kwargs)

    monkeypatch.setattr(jobs_db, "claim_jobs", broken_claim)
    worker = Worker(app, settings(database_url), clock=app.clock)
    async with running(worker):
        await wait_until(lambda: calls > 4, what="the claim to be retried past the errors")
        assert not worker.failed and worker.liveness() is None
    failures = [r for r in caplog.records if getattr(r, "action", None) == "claim_failed"]
    assert len(failures) == 1, "one line per outage, not one per attempt"
    assert "RuntimeError: a bug in the claim" in failures[0].getMessage()


# --- retention -----------------------------------------------------------------------------


async def _insert(
    aconn: psycopg.AsyncConnection, status: str, finished_days_ago: float | None
) -> int:
    finished = None if finished_days_ago is None else T0 - timedelta(days=finished_days_ago)
    lease = at(30) if status == "running" else None
    return int(
        await ascalar(
            aconn,
            "INSERT INTO tickwork.jobs (kind, status, finished_at, lease_expires_at)"
            " VALUES ('t.old', %s, %s, %s) RETURNING id",
            (status, finished, lease),
        )
    )


class _CountingAsyncConnection:
    def __init__(self, conn: psycopg.AsyncConnection[Any]) -> None:
        self._conn = conn
        self.statements = 0

    async def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
        self.statements += 1
        return await self._conn.execute(query, params, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


async def test_retention_deletes_old_finished_jobs_in_batches(
    aconn: psycopg.AsyncConnection,
) -> None:
    old = [
        await _insert(aconn, status, days)
        for status, days in [
            ("succeeded", 30),
            ("succeeded", 7.01),
            ("dead", 8),
            ("cancelled", 9),
            ("succeeded", 10),
        ]
    ]
    kept = [
        await _insert(aconn, "succeeded", 6.99),
        await _insert(aconn, "dead", 1),
        await _insert(aconn, "cancelled", 0),
        await _insert(aconn, "available", None),
        await _insert(aconn, "running", None),
    ]
    counting = _CountingAsyncConnection(aconn)

    week = retention.Retention(retention.RetentionConfig(age_seconds=7 * 86400, batch=2))

    deleted = await week.run_once(counting, T0)  # type: ignore[arg-type]

    assert deleted == len(old)
    # Batches of 2, 2 and 1, one look at the history queue, then one statement for each step of
    # the counts' retention (merge per hour, merge per day, delete), none of which has rows.
    assert counting.statements == 4 + 3
    remaining = await (await aconn.execute("SELECT id FROM tickwork.jobs ORDER BY id")).fetchall()
    assert [r[0] for r in remaining] == kept
    assert await week.run_once(aconn, T0) == 0


async def test_worker_retention_duty_uses_its_settings(
    database_url: str, aconn: psycopg.AsyncConnection
) -> None:
    old = await _insert(aconn, "succeeded", 2)
    young = await _insert(aconn, "succeeded", 0.5)
    app = tickwork.App(database_url)
    worker = Worker(app, settings(database_url, retention_seconds=86400.0), clock=SettableClock(T0))
    try:
        async with opened(worker):
            await worker.maintain_once()
        ids = [r[0] for r in await (await aconn.execute("SELECT id FROM tickwork.jobs")).fetchall()]
        assert ids == [young]
        assert old not in ids
    finally:
        await app.close_async()


# --- duties divided between workers --------------------------------------------------------


async def test_each_duty_is_performed_by_one_worker_per_interval(
    database_url: str, aconn: psycopg.AsyncConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    performed: list[str] = []

    def counting(name: str, real: Any) -> Any:
        async def duty(*args: Any, **kwargs: Any) -> Any:
            performed.append(name)
            return await real(*args, **kwargs)

        return duty

    for service in (
        leases.LeaseRecovery,
        retention.Retention,
        worker_expiry.WorkerExpiry,
        claim_floors.ClaimFloors,
        gauges.GaugeSampling,
        deadlines.DeadlineCheck,
    ):
        monkeypatch.setattr(service, "run_once", counting(service.name, service.run_once))

    clock = SettableClock(T0)
    app = tickwork.App(database_url)
    every_5s = {"maintenance_seconds": 5, "gauges_seconds": 5}
    w1 = Worker(app, settings(database_url, name="w1", **every_5s), clock=clock)
    w2 = Worker(app, settings(database_url, name="w2", **every_5s), clock=clock)
    duties = [
        *("check_deadlines", "claim_floors", "expire_workers"),
        *("recover_leases", "retention", "sample_gauges"),
    ]
    try:
        async with opened(w1), opened(w2):
            await asyncio.gather(w1.maintain_once(), w2.maintain_once())
            assert sorted(performed) == duties, "each duty exactly once"
            rows = await (
                await aconn.execute(
                    "SELECT name, last_run_by, last_run_at, next_run_at FROM tickwork.duties"
                    " ORDER BY name"
                )
            ).fetchall()
            assert [r[0] for r in rows] == duties
            assert all(r[1] in ("w1", "w2") for r in rows)
            assert {(r[2], r[3]) for r in rows} == {(T0, at(5))}

            # Same instant again: nothing is due.
            await asyncio.gather(w1.maintain_once(), w2.maintain_once())
            clock.set(at(4.999))
            await asyncio.gather(w2.maintain_once(), w1.maintain_once())
            assert len(performed) == len(duties)

            # One interval later each duty is due once more, and done once more.
            clock.set(at(5))
            await asyncio.gather(w2.maintain_once(), w1.maintain_once())
            assert sorted(performed) == sorted(duties * 2)
            assert (
                await ascalar(aconn, "SELECT count(DISTINCT last_run_at) FROM tickwork.duties") == 1
            )
    finally:
        await app.close_async()
