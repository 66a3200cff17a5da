"""Claiming: one statement, ordered, filtered, SKIP LOCKED, one running job per concurrency key;
jobs of a busy key are passed over inside the statement, never holding back those behind."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

import tickwork
from tests.support.helpers import T0, at, claim, job_row, opened, scalar, settings
from tickwork.clock import SettableClock
from tickwork.db import jobs as jobs_db
from tickwork.db import store
from tickwork.worker.runner import Worker

KIND = "t.work"


@pytest.fixture
def app(database_url: str) -> Iterator[tickwork.App]:
    app = tickwork.App(database_url, clock=SettableClock(T0))

    @app.task(KIND)
    def work(job: tickwork.Job) -> None:
        return None

    yield app
    app.close()


@pytest.fixture
def other(database_url: str) -> Iterator[psycopg.Connection[Any]]:
    """A second connection (not autocommit): a second claimer in its own transaction.
    A claim that would wait for a lock fails fast instead of hanging the test."""
    with psycopg.connect(database_url) as connection:
        connection.execute("SET lock_timeout = '2s'")
        connection.commit()
        yield connection


@pytest.fixture
def first(database_url: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(database_url) as connection:
        connection.execute("SET lock_timeout = '2s'")
        connection.commit()
        yield connection


def _ids(jobs: list[tickwork.Job]) -> list[int]:
    return [j.id for j in jobs]


def test_claim_takes_a_lease_and_counts_the_attempt(
    app: tickwork.App, conn: psycopg.Connection
) -> None:
    job_id = app.enqueue(KIND, {"x": 1})
    (job,) = claim(conn, kinds=[KIND], now=at(5), worker="w-a", lease_seconds=30)

    assert job.id == job_id
    assert job.status == tickwork.JobStatus.RUNNING
    assert job.attempt == 1
    assert job.payload == {"x": 1}
    assert job.picked_by == "w-a"
    assert job.lease_expires_at == at(35)
    row = job_row(conn, job_id)
    assert row["status"] == "running"
    assert row["attempt"] == 1
    assert row["picked_by"] == "w-a"
    assert row["started_at"] == at(5)
    assert row["lease_expires_at"] == at(35)
    assert row["version"] == job.version == 1
    assert claim(conn, kinds=[KIND], now=at(5)) == [], "a running job is not claimed again"


def test_claim_order_is_priority_desc_then_run_at_then_id(
    app: tickwork.App, conn: psycopg.Connection
) -> None:
    # Enqueued in a scrambled order; the run_at values are all in the past of T0.
    c = app.enqueue(KIND, {}, priority=5, run_at=at(-10))
    a = app.enqueue(KIND, {}, priority=9, run_at=at(-5))
    e = app.enqueue(KIND, {}, priority=0, run_at=at(-30))
    d = app.enqueue(KIND, {}, priority=5, run_at=at(-10))  # same as c: id decides
    b = app.enqueue(KIND, {}, priority=5, run_at=at(-20))
    expected = [a, b, c, d, e]

    one_by_one = []
    with psycopg.connect(conn.info.dsn) as tx:
        for _ in expected:
            one_by_one += _ids(claim(tx, kinds=[KIND], limit=1))
        tx.rollback()
    assert one_by_one == expected

    # A batch takes the first ones in that order, and hands them over in that order.
    assert _ids(claim(conn, kinds=[KIND], limit=3)) == [a, b, c]
    assert _ids(claim(conn, kinds=[KIND], limit=3)) == [d, e]


def test_claim_returns_a_large_batch_in_claim_order(
    app: tickwork.App, conn: psycopg.Connection
) -> None:
    ids = app.enqueue_many(KIND, [{}] * 300)
    urgent = app.enqueue_many(KIND, [{}] * 20, priority=1)
    batch = _ids(claim(conn, kinds=[KIND], limit=250))
    assert batch == urgent + ids[:230]


def test_claim_batch_is_limited(app: tickwork.App, conn: psycopg.Connection) -> None:
    app.enqueue_many(KIND, [{}] * 7)
    assert len(claim(conn, kinds=[KIND], limit=3)) == 3
    assert len(claim(conn, kinds=[KIND], limit=3)) == 3
    assert len(claim(conn, kinds=[KIND], limit=3)) == 1
    assert claim(conn, kinds=[KIND], limit=3) == []


def test_claim_skips_jobs_not_yet_due(app: tickwork.App, conn: psycopg.Connection) -> None:
    later = app.enqueue(KIND, {}, run_at=at(1))
    due = app.enqueue(KIND, {}, run_at=at(0))
    assert _ids(claim(conn, kinds=[KIND], now=T0)) == [due]
    assert _ids(claim(conn, kinds=[KIND], now=at(1))) == [later]


def test_claim_skips_finished_and_cancelled_jobs(
    app: tickwork.App, conn: psycopg.Connection
) -> None:
    cancelled = app.enqueue(KIND, {})
    app.cancel(cancelled)
    done = app.enqueue(KIND, {})
    (job,) = claim(conn, kinds=[KIND])
    assert job.id == done
    store.run(conn, jobs_db.complete_jobs([job], T0))
    assert claim(conn, kinds=[KIND]) == []


async def test_worker_claims_only_registered_kinds_and_served_queues(
    database_url: str, conn: psycopg.Connection
) -> None:
    clock = SettableClock(T0)
    app = tickwork.App(database_url, clock=clock)

    @app.task("a")
    def a(job: tickwork.Job) -> None:
        return None

    @app.task("b", queue="mail")
    def b(job: tickwork.Job) -> None:
        return None

    try:
        a_default = app.enqueue("a", {})
        b_mail = app.enqueue("b", {})
        a_elsewhere = app.enqueue("a", {}, queue="elsewhere")
        unknown = app.enqueue("c", {})
        unknown_mail = app.enqueue("c", {}, queue="mail")

        worker = Worker(app, settings(database_url, name="w-all"), clock=clock)
        assert worker.queues == ["default", "mail"], "default: the tasks' queues plus default"
        async with opened(worker):
            claimed = await worker.claim_once(100)
            assert sorted(_ids(claimed)) == sorted([a_default, b_mail])
            assert await worker.claim_once(100) == []

        for job_id in (a_elsewhere, unknown, unknown_mail):
            assert job_row(conn, job_id)["status"] == "available"

        # --queues narrows what is served.
        conn.execute("UPDATE tickwork.jobs SET status = 'available', lease_expires_at = NULL")
        mail_only = Worker(
            app, settings(database_url, name="w-mail", queues=("mail",)), clock=clock
        )
        async with opened(mail_only):
            assert _ids(await mail_only.claim_once(100)) == [b_mail]
    finally:
        app.close()


def test_two_claimers_in_open_transactions_never_share_a_job(
    app: tickwork.App,
    conn: psycopg.Connection,
    first: psycopg.Connection,
    other: psycopg.Connection,
) -> None:
    ids = app.enqueue_many(KIND, [{}] * 10)

    mine = claim(first, kinds=[KIND], limit=4, worker="w-a")  # not committed: rows locked
    theirs = claim(other, kinds=[KIND], limit=4, worker="w-b")  # skips them, does not wait
    assert _ids(mine) == ids[:4]
    assert _ids(theirs) == ids[4:8]

    # Everything left is locked by one or the other: a third claim gets nothing, at once.
    with psycopg.connect(conn.info.dsn) as third:
        third.execute("SET lock_timeout = '2s'")
        locked_out = claim(third, kinds=[KIND], limit=2, worker="w-c")
        assert _ids(locked_out) == ids[8:10]
        assert claim(third, kinds=[KIND], limit=10, worker="w-c") == []
        third.rollback()

    first.commit()
    other.commit()
    rows = conn.execute(
        "SELECT picked_by, count(*) FROM tickwork.jobs WHERE status = 'running' GROUP BY 1"
        " ORDER BY 1"
    ).fetchall()
    assert rows == [("w-a", 4), ("w-b", 4)]
    assert scalar(conn, "SELECT max(attempt) FROM tickwork.jobs") == 1


def test_concurrency_key_allows_one_running_job_per_key(
    app: tickwork.App, conn: psycopg.Connection
) -> None:
    k1 = [app.enqueue(KIND, {}, concurrency_key="k1") for _ in range(3)]
    k2 = [app.enqueue(KIND, {}, concurrency_key="k2") for _ in range(2)]
    free = [app.enqueue(KIND, {}) for _ in range(2)]

    first_batch = claim(conn, kinds=[KIND])
    assert sorted(_ids(first_batch)) == sorted([k1[0], k2[0], *free])
    assert claim(conn, kinds=[KIND]) == [], "k1 and k2 each have a running job"

    # k1's job finishes: the next k1 job becomes claimable, k2 still blocked.
    (k1_running,) = [j for j in first_batch if j.id == k1[0]]
    store.run(conn, jobs_db.complete_jobs([k1_running], T0))
    assert _ids(claim(conn, kinds=[KIND])) == [k1[1]]
    assert claim(conn, kinds=[KIND]) == []
    assert (
        scalar(
            conn,
            "SELECT max(n) FROM (SELECT count(*) AS n FROM tickwork.jobs"
            " WHERE status = 'running' AND concurrency_key IS NOT NULL GROUP BY concurrency_key) c",
        )
        == 1
    )


def test_jobs_behind_a_busy_key_are_claimed_by_the_same_statement(
    app: tickwork.App, conn: psycopg.Connection
) -> None:
    app.enqueue(KIND, {}, concurrency_key="k")
    (holder,) = claim(conn, kinds=[KIND])
    blocked = app.enqueue_many(KIND, [{}] * 10, concurrency_key="k")  # queued first
    other_key = app.enqueue(KIND, {}, concurrency_key="free")
    behind = app.enqueue_many(KIND, [{}] * 3)

    # A batch smaller than the busy key's queue: still filled from behind it.
    assert _ids(claim(conn, kinds=[KIND], limit=4)) == [other_key, *behind]
    assert {job_row(conn, i)["status"] for i in blocked} == {"available"}
    assert job_row(conn, holder.id)["status"] == "running"


def test_a_running_job_asked_to_stop_keeps_its_key_until_it_is_recorded_cancelled(
    app: tickwork.App, conn: psycopg.Connection
) -> None:
    app.enqueue(KIND, {}, concurrency_key="k")
    waiting = app.enqueue(KIND, {}, concurrency_key="k")
    (running,) = claim(conn, kinds=[KIND])
    app.cancel(running.id)
    assert job_row(conn, running.id)["status"] == "running"
    assert claim(conn, kinds=[KIND]) == [], "the key is still held"
    assert store.run(conn, jobs_db.record_cancelled(running, at(1)))
    assert _ids(claim(conn, kinds=[KIND])) == [waiting]


def test_concurrency_key_holds_across_two_claimers(
    app: tickwork.App,
    conn: psycopg.Connection,
    first: psycopg.Connection,
    other: psycopg.Connection,
) -> None:
    keyed = [app.enqueue(KIND, {}, concurrency_key="tenant-1") for _ in range(4)]
    free = app.enqueue(KIND, {})

    mine = claim(first, kinds=[KIND], limit=1, worker="w-a")  # open transaction
    assert _ids(mine) == [keyed[0]]
    # The other claimer sees keyed[1..3] unlocked but the key taken (not yet committed).
    theirs = claim(other, kinds=[KIND], worker="w-b")
    assert _ids(theirs) == [free]
    first.commit()
    other.commit()

    # Committed running job with the key: still nothing for anyone.
    assert claim(other, kinds=[KIND], worker="w-b") == []
    other.commit()
    assert (
        scalar(
            conn,
            "SELECT count(*) FROM tickwork.jobs WHERE concurrency_key = 'tenant-1'"
            " AND status = 'running'",
        )
        == 1
    )


def test_a_keys_jobs_start_in_order_when_its_first_is_locked_by_another_claimer(
    app: tickwork.App,
    conn: psycopg.Connection,
    first: psycopg.Connection,
    other: psycopg.Connection,
) -> None:
    """The key's first job is locked by another transaction (a claimer between its scan and
    its key lock): the key is passed over, not served from its second job, which would start
    before the first (a backfill's occurrences out of order). An earlier job this claimer
    could not take (another kind, not due yet) does not hold the key back."""
    keyed = [app.enqueue(KIND, {}, concurrency_key="k") for _ in range(3)]
    free = app.enqueue(KIND, {})
    first.execute("SELECT 1 FROM tickwork.jobs WHERE id = %s FOR UPDATE", (keyed[0],))
    assert _ids(claim(other, kinds=[KIND], worker="w-b")) == [free]
    other.commit()
    first.commit()
    assert _ids(claim(conn, kinds=[KIND])) == [keyed[0]]

    app.enqueue("elsewhere", {}, concurrency_key="e")
    app.enqueue(KIND, {}, concurrency_key="e", run_at=at(60), priority=5)
    mine = app.enqueue(KIND, {}, concurrency_key="e")
    assert _ids(claim(conn, kinds=[KIND])) == [mine]


def test_concurrency_key_index_refuses_a_second_running_job(
    app: tickwork.App, conn: psycopg.Connection
) -> None:
    """The final guard under the claim query: even a direct write cannot run two."""
    a = app.enqueue(KIND, {}, concurrency_key="k")
    b = app.enqueue(KIND, {}, concurrency_key="k")
    claim(conn, kinds=[KIND])
    with pytest.raises(psycopg.errors.UniqueViolation):
        conn.execute(
            "UPDATE tickwork.jobs SET status = 'running', lease_expires_at = %s WHERE id = %s",
            (at(30), b),
        )
    assert job_row(conn, a)["status"] == "running"
    assert job_row(conn, b)["status"] == "available"


async def test_worker_survives_losing_a_concurrency_key_race(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the unique index refuses a claim (two workers raced for a key), the worker
    claims nothing this round instead of crashing."""
    app = tickwork.App(database_url, clock=SettableClock(T0))

    @app.task(KIND)
    def work(job: tickwork.Job) -> None:
        return None

    try:
        app.enqueue(KIND, {}, concurrency_key="k")
        worker = Worker(app, settings(database_url), clock=app.clock)
        async with opened(worker):

            async def lose_race(conn: Any, op: Any) -> Any:
                raise psycopg.errors.UniqueViolation("jobs_concurrency_key_idx")

            with monkeypatch.context() as patch:
                patch.setattr(store, "arun", lose_race)
                assert await worker.claim_once(10) == []
            assert len(await worker.claim_once(10)) == 1
    finally:
        app.close()
