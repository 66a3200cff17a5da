"""Leases: heartbeats extend them, expired ones are recovered by any worker (or the job dies
with its on_dead hook), every write after a claim is fenced by version, and cancellation
reaches a running job's worker at once (a notification; the heartbeat is the fallback), which
stops the task and records it cancelled; until then the job holds its concurrency key."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncIterator

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
from tickwork import metrics
from tickwork.clock import SettableClock
from tickwork.errors import InvalidTransition, JobNotFound
from tickwork.maintenance import gauges, leases
from tickwork.model import JobStatus
from tickwork.worker import deaths
from tickwork.worker.runner import Worker

KIND = "t.lease"


@pytest.fixture
async def app(database_url: str) -> AsyncIterator[tickwork.App]:
    app = tickwork.App(database_url, clock=SettableClock(T0))

    @app.task(KIND)
    async def noop(job: tickwork.Job) -> None:
        return None

    yield app
    await app.close_async()


def _records(caplog: pytest.LogCaptureFixture, action: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "action", None) == action]


# --- heartbeat and recovery ----------------------------------------------------------------


async def test_heartbeat_extends_the_leases_of_held_jobs(
    app: tickwork.App, database_url: str, aconn: psycopg.AsyncConnection
) -> None:
    clock = SettableClock(T0)
    job_id = await app.enqueue_async(KIND, {})
    worker = Worker(app, settings(database_url, lease_seconds=30), clock=clock)
    async with opened(worker):
        (job,) = await worker.claim_once(10)
        assert (await ajob_row(aconn, job_id))["lease_expires_at"] == at(30)

        clock.set(at(20))
        await worker.heartbeat_once()
        row = await ajob_row(aconn, job_id)
        assert row["lease_expires_at"] == at(50)
        assert row["version"] == job.version, "a heartbeat is not a state change"

        # Past the first lease, within the extended one: not recovered.
        assert await leases.LeaseRecovery().run_once(aconn, at(45)) == 0
        assert await leases.LeaseRecovery().run_once(aconn, at(50)) == 0, "expiry is strict"
        assert (await ajob_row(aconn, job_id))["status"] == "running"
        assert await leases.LeaseRecovery().run_once(aconn, at(50.001)) == 1
        assert (await ajob_row(aconn, job_id))["status"] == "available"


async def test_expired_lease_is_recovered_by_another_worker_and_the_attempt_counts(
    app: tickwork.App,
    database_url: str,
    aconn: psycopg.AsyncConnection,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    clock = SettableClock(T0)
    job_id = await app.enqueue_async(KIND, {})
    a = Worker(app, settings(database_url, name="w-a"), clock=clock)
    b = Worker(app, settings(database_url, name="w-b"), clock=clock)
    async with opened(a), opened(b):
        (claimed,) = await a.claim_once(10)
        clock.set(at(31))  # a never heartbeats: its lease (30 s) ran out

        await b.maintain_once()
        row = await ajob_row(aconn, job_id)
        assert row["status"] == "available"
        assert row["attempt"] == 1, "the lost attempt counts"
        assert row["run_at"] == at(31)
        assert row["lease_expires_at"] is None
        assert row["version"] == claimed.version + 1
        assert "lease expired" in row["last_error"]
        assert "w-a" in row["last_error"]
        assert (
            await ascalar(
                aconn, "SELECT last_run_by FROM tickwork.duties WHERE name = 'recover_leases'"
            )
            == "w-b"
        )
        assert [r.job_id for r in _records(caplog, "lease_recovered")] == [job_id]

        (again,) = await b.claim_once(10)
        assert again.attempt == 2
        row = await ajob_row(aconn, job_id)
        assert (row["picked_by"], row["attempt"], row["lease_expires_at"]) == ("w-b", 2, at(61))

        # a's late heartbeat neither steals the lease back nor extends it.
        clock.set(at(40))
        await a.heartbeat_once()
        assert (await ajob_row(aconn, job_id))["lease_expires_at"] == at(61)
        assert [r.job_id for r in _records(caplog, "job_lost")] == [job_id]


async def test_expired_lease_of_a_kind_nobody_else_knows_is_recovered_dead_and_its_hook_runs_later(
    database_url: str, aconn: psycopg.AsyncConnection
) -> None:
    await aconn.execute("CREATE TABLE hook_log (job_id bigint, error text, outside text)")

    async def on_dead(job: tickwork.Job, conn: psycopg.AsyncConnection, error: str) -> None:
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as own:
            outside = await ascalar(
                own, "SELECT on_dead_pending::text FROM tickwork.jobs WHERE id = %s", (job.id,)
            )
        await conn.execute("INSERT INTO hook_log VALUES (%s, %s, %s)", (job.id, error, outside))

    app = tickwork.App(database_url, clock=SettableClock(T0))

    @app.task("t.last", max_attempts=1, on_dead=on_dead)
    async def last(job: tickwork.Job) -> None:
        return None

    stranger = tickwork.App(database_url)  # serves other kinds only

    @stranger.task("t.other")
    async def other(job: tickwork.Job) -> None:
        return None

    try:
        job_id = await app.enqueue_async("t.last", {})
        worker = Worker(app, settings(database_url, name="w-a"), clock=SettableClock(T0))
        async with opened(worker):
            await worker.claim_once(10)

        # The stranger's worker recovers it: dead, its hook pending (it cannot run it).
        w_other = Worker(stranger, settings(database_url, name="w-o"), clock=SettableClock(at(31)))
        async with opened(w_other):
            await w_other.maintain_once()
        row = await ajob_row(aconn, job_id)
        assert (row["status"], row["on_dead_pending"]) == ("dead", True)
        assert row["finished_at"] == at(31)
        assert row["lease_expires_at"] is None
        assert "lease expired on the last attempt" in row["last_error"]
        assert "w-a" in row["last_error"]
        assert await ascalar(aconn, "SELECT count(*) FROM hook_log") == 0

        # A worker registering the kind runs it, once, in the transaction clearing the flag.
        w_b = Worker(app, settings(database_url, name="w-b"), clock=SettableClock(at(40)))
        async with opened(w_b):
            await w_b.maintain_once()
            await w_b.maintain_once()
        assert (await ajob_row(aconn, job_id))["on_dead_pending"] is False
        hooks = await (await aconn.execute("SELECT * FROM hook_log")).fetchall()
        assert hooks == [(job_id, row["last_error"], "true")], (
            "the hook ran once, inside the uncommitted transaction that clears the flag"
        )
    finally:
        await app.close_async()
        await stranger.close_async()


async def test_failing_hook_during_lease_recovery_spares_the_rest_of_the_batch(
    database_url: str, aconn: psycopg.AsyncConnection
) -> None:
    await aconn.execute("CREATE TABLE hook_log (job_id bigint PRIMARY KEY)")

    async def on_dead(job: tickwork.Job, conn: psycopg.AsyncConnection, error: str) -> None:
        await conn.execute("INSERT INTO hook_log VALUES (%s)", (job.id,))
        if job.payload.get("break"):
            await conn.execute("SELECT * FROM no_such_table")  # an SQL error in the hook

    app = tickwork.App(database_url, clock=SettableClock(T0))

    @app.task("t.last", max_attempts=1, on_dead=on_dead)
    async def last(job: tickwork.Job) -> None:
        return None

    try:
        broken, fine = await app.enqueue_many_async("t.last", [{"break": True}, {}])
        worker = Worker(app, settings(database_url), clock=SettableClock(T0))
        async with opened(worker):
            assert len(await worker.claim_once(10)) == 2

        assert await leases.LeaseRecovery().run_once(aconn, at(31)) == 2
        assert await deaths.PendingHooks(app.registry).run_once(aconn, None) == 2
        assert await deaths.PendingHooks(app.registry).run_once(aconn, None) == 0
        broken_row, fine_row = [await ajob_row(aconn, i) for i in (broken, fine)]
        assert (broken_row["status"], fine_row["status"]) == ("dead", "dead")
        assert "on_dead hook failed" in broken_row["last_error"]
        assert "no_such_table" in broken_row["last_error"]
        assert "on_dead hook failed" not in fine_row["last_error"]
        logged = await (await aconn.execute("SELECT job_id FROM hook_log")).fetchall()
        assert logged == [(fine,)], "the failed hook's write rolled back, the other kept"
    finally:
        await app.close_async()


# --- version fencing -----------------------------------------------------------------------


@pytest.mark.parametrize("outcome", ["succeed", "fail_and_retry", "fail_and_die"])
async def test_outcome_of_a_job_taken_over_elsewhere_is_dropped_and_logged(
    database_url: str,
    aconn: psycopg.AsyncConnection,
    caplog: pytest.LogCaptureFixture,
    outcome: str,
) -> None:
    caplog.set_level(logging.INFO)
    release = asyncio.Event()
    started = Recorder()
    await aconn.execute("CREATE TABLE hook_log (job_id bigint)")

    async def on_dead(job: tickwork.Job, conn: psycopg.AsyncConnection, error: str) -> None:
        # Written in the hook's transaction: a pass that A's shutdown cancels rolls it back.
        await conn.execute("INSERT INTO hook_log VALUES (%s)", (job.id,))

    slow_clock = SettableClock(T0)  # worker A's clock stays at T0: it cannot re-claim
    app = tickwork.App(database_url, clock=slow_clock)

    @app.task("t.slow", max_attempts=1 if outcome == "fail_and_die" else 3, on_dead=on_dead)
    async def slow(job: tickwork.Job) -> None:
        started.add(job)
        await release.wait()
        if outcome != "succeed":
            raise RuntimeError("late failure")

    try:
        job_id = await app.enqueue_async("t.slow", {})
        a = Worker(app, settings(database_url, name="w-a"), clock=slow_clock)
        async with running(a):
            await wait_until(lambda: started.ids == [job_id], what="the task to start")
            # A's lease runs out (by the clock of everyone else); the job is recovered...
            assert await leases.LeaseRecovery().run_once(aconn, at(31)) == 1
            b = Worker(app, settings(database_url, name="w-b"), clock=SettableClock(at(31)))
            if outcome != "fail_and_die":
                async with opened(b):  # ... and taken by another worker
                    (taken,) = await b.claim_once(10)
                    assert taken.id == job_id
            before = await ajob_row(aconn, job_id)
            release.set()  # now A's task finishes and A tries to write its outcome

            await wait_until(
                lambda: bool(_records(caplog, "version_mismatch")), what="a version mismatch"
            )

        mismatches = _records(caplog, "version_mismatch")
        assert [r.job_id for r in mismatches] == [job_id]
        after = await ajob_row(aconn, job_id)
        # (A's maintenance may have run the pending on_dead hook meanwhile: not A's outcome.)
        before.pop("on_dead_pending"), after.pop("on_dead_pending")
        assert after == before, "A's outcome was not applied over the newer state"
        if outcome == "fail_and_die":
            assert after["status"] == "dead"
            assert "lease expired on the last attempt" in after["last_error"]
            await deaths.PendingHooks(app.registry).run_once(aconn, None)
            logged = await (await aconn.execute("SELECT job_id FROM hook_log")).fetchall()
            assert logged == [(job_id,)], "the hook ran once, for the recovery, not for A"
        else:
            assert (after["status"], after["picked_by"], after["attempt"]) == ("running", "w-b", 2)
    finally:
        await app.close_async()


# --- cancellation --------------------------------------------------------------------------


async def test_cancelled_available_job_never_runs(
    app: tickwork.App, database_url: str, aconn: psycopg.AsyncConnection
) -> None:
    seen = Recorder()

    @app.task("t.seen")
    async def record(job: tickwork.Job) -> None:
        seen.add(job)

    doomed = await app.enqueue_async("t.seen", {})
    await asyncio.to_thread(app.cancel, doomed, actor="alice", reason="not needed")
    row = await ajob_row(aconn, doomed)
    assert row["status"] == "cancelled"
    assert row["finished_at"] == T0
    audit = await (
        await aconn.execute("SELECT actor, action, target, reason FROM tickwork.audit_log")
    ).fetchall()
    assert audit == [("alice", "cancel", f"job:{doomed}", "not needed")]

    later = await app.enqueue_async("t.seen", {})
    async with running(Worker(app, settings(database_url), clock=app.clock)):
        await wait_status(aconn, later, "succeeded")
    assert seen.ids == [later]
    assert (await ajob_row(aconn, doomed))["status"] == "cancelled"


async def test_cancelling_a_running_async_job_is_a_request_its_worker_carries_out_at_once(
    app: tickwork.App,
    database_url: str,
    aconn: psycopg.AsyncConnection,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    started, interrupted = asyncio.Event(), asyncio.Event()
    release = asyncio.Event()

    @app.task("t.long")
    async def long(job: tickwork.Job) -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            interrupted.set()
            await release.wait()  # cleaning up: the job is still running meanwhile
            raise

    @app.task("t.next")
    async def next_one(job: tickwork.Job) -> None:
        return None

    job_id = await app.enqueue_async("t.long", {}, concurrency_key="k")
    worker = Worker(app, settings(database_url, concurrency=1, prefetch=1), clock=app.clock)
    async with running(worker):
        await asyncio.wait_for(started.wait(), 10)
        assert await asyncio.to_thread(app.cancel, job_id) is JobStatus.RUNNING
        # No heartbeat is due (every 25 s): the notification alone reaches the worker.
        await asyncio.wait_for(interrupted.wait(), 5)
        row = await ajob_row(aconn, job_id)
        assert (row["status"], row["cancel_requested_at"]) == ("running", T0)
        assert row["concurrency_key"] == "k", "the key stays held while the task stops"
        release.set()
        await wait_status(aconn, job_id, "cancelled")
        # The job ran in the worker's only slot: interrupting it left the slot serving.
        after = await app.enqueue_async("t.next", {})
        await wait_status(aconn, after, "succeeded")
    row = await ajob_row(aconn, job_id)
    assert (row["status"], row["finished_at"], row["last_error"]) == ("cancelled", T0, None)
    assert [r.job_id for r in _records(caplog, "cancel_requested")] == [job_id]
    assert [r.job_id for r in _records(caplog, "job_cancelled")] == [job_id]
    assert not _records(caplog, "version_mismatch")


async def test_a_claimed_job_asked_to_stop_before_it_started_never_runs(
    app: tickwork.App, database_url: str, aconn: psycopg.AsyncConnection
) -> None:
    seen = Recorder()

    @app.task("t.seen")
    async def record(job: tickwork.Job) -> None:
        seen.add(job)

    job_id = await app.enqueue_async("t.seen", {})
    worker = Worker(app, settings(database_url), clock=app.clock)
    async with opened(worker):  # no listener: the heartbeat is how it learns
        (claimed,) = await worker.claim_once(10)
        await asyncio.to_thread(app.cancel, job_id)
        await worker.heartbeat_once()
        slot = asyncio.create_task(worker.slots.run())
        await wait_status(aconn, job_id, "cancelled")
        worker.held.stop_slots(1)
        await asyncio.wait_for(slot, 10)
    assert seen.ids == []
    assert (await ajob_row(aconn, job_id))["version"] == claimed.version + 1


async def test_a_sync_job_asked_to_stop_runs_on_holding_its_key_and_is_cancelled_when_it_returns(
    app: tickwork.App, database_url: str, aconn: psycopg.AsyncConnection
) -> None:
    running_now, release = threading.Event(), threading.Event()

    @app.task("t.blocking")
    def blocking(job: tickwork.Job) -> str:
        running_now.set()
        release.wait(10)
        return "done anyway"

    job_id = await app.enqueue_async("t.blocking", {}, concurrency_key="k")
    rival = await app.enqueue_async(KIND, {}, concurrency_key="k")
    worker = Worker(app, settings(database_url, concurrency=2), clock=app.clock)
    try:
        async with running(worker):
            await wait_until(running_now.is_set, what="the sync task to start")
            await asyncio.to_thread(app.cancel, job_id)
            await worker.heartbeat_once()
            await asyncio.sleep(0.3)  # a free slot polls every 0.05 s: the rival must wait
            assert (await ajob_row(aconn, job_id))["status"] == "running"
            assert (await ajob_row(aconn, rival))["status"] == "available"
            release.set()
            await wait_status(aconn, job_id, "cancelled")
            await wait_status(aconn, rival, "succeeded")
    finally:
        release.set()


async def test_cancel_refuses_finished_and_unknown_jobs(
    app: tickwork.App, database_url: str, aconn: psycopg.AsyncConnection
) -> None:
    job_id = await app.enqueue_async(KIND, {})
    await asyncio.to_thread(app.cancel, job_id)
    with pytest.raises(InvalidTransition, match="cancelled"):
        await asyncio.to_thread(app.cancel, job_id)
    with pytest.raises(JobNotFound):
        await asyncio.to_thread(app.cancel, 10**9)
    assert await ascalar(aconn, "SELECT count(*) FROM tickwork.audit_log") == 1


# --- orphaned kinds ------------------------------------------------------------------------


async def test_jobs_of_kinds_no_live_worker_registers_are_sampled_as_orphaned(
    app: tickwork.App, database_url: str, aconn: psycopg.AsyncConnection
) -> None:
    served = await app.enqueue_async(KIND, {})
    stray = await app.enqueue_many_async("t.nobody", [{}, {}, {}])
    worker = Worker(app, settings(database_url), clock=app.clock)  # registers KIND only
    async with opened(worker):
        await worker._register()
        async with aconn.transaction():  # a worker of t.nobody took one, then went away
            await aconn.execute(
                "UPDATE tickwork.jobs SET status = 'running', attempt = 1, max_attempts = 1,"
                " lease_expires_at = %s WHERE id = %s",
                (at(30), stray[0]),
            )
        sample = await gauges.sample(aconn, 60, at(1))
        orphaned = {(o.kind, o.status.value): o.count for o in sample.orphaned}
        assert orphaned == {("t.nobody", "available"): 2, ("t.nobody", "running"): 1}

        assert (
            await leases.LeaseRecovery().run_once(aconn, at(31)) == 1
        )  # on_dead pending: still orphaned
        sample = await gauges.sample(aconn, 60, at(31))
        orphaned = {(o.kind, o.status.value): o.count for o in sample.orphaned}
        assert orphaned == {("t.nobody", "available"): 2, ("t.nobody", "dead"): 1}
        gauges.export(sample, fresh_for=60)
        assert metrics.FLEET_ORPHANED_JOBS.labels("t.nobody", "dead")._value.get() == 1
    assert (await ajob_row(aconn, served))["status"] == "available"
