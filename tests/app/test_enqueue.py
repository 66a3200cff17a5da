"""Enqueueing jobs: one, many, delayed, prioritised, unique, transactional, sync and async."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any, cast

import psycopg
import pytest

import tickwork
from tests.support.helpers import T0, at, claim, job_row, scalar
from tickwork.clock import SettableClock
from tickwork.db import jobs as jobs_db
from tickwork.db import store
from tickwork.errors import InvalidInput
from tickwork.model import Backoff

KIND = "t.echo"


def _register(app: tickwork.App) -> None:
    @app.task(KIND)
    def echo(job: tickwork.Job) -> None:
        return None

    @app.task("t.mail", queue="mail", max_attempts=3, retry=Backoff(1, 2, 10), timeout=5)
    def mail(job: tickwork.Job) -> None:
        return None


@pytest.fixture
def app(database_url: str, clock: SettableClock) -> Iterator[tickwork.App]:
    app = tickwork.App(database_url, clock=clock)
    _register(app)
    yield app
    app.close()


@pytest.fixture
async def aapp(database_url: str, clock: SettableClock) -> AsyncIterator[tickwork.App]:
    app = tickwork.App(database_url, clock=clock)
    _register(app)
    yield app
    await app.close_async()


def _count(conn: psycopg.Connection[Any]) -> int:
    return int(scalar(conn, "SELECT count(*) FROM tickwork.jobs"))


class CountingConnection:
    """A thin wrapper that counts the statements sent through ``execute``."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn
        self.statements: list[str] = []

    def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
        self.statements.append(str(query))
        return self._conn.execute(query, params, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


# --- one job -------------------------------------------------------------------------------


def test_enqueue_stores_a_due_available_job(app: tickwork.App, conn: psycopg.Connection) -> None:
    job_id = app.enqueue(KIND, {"day": "2026-12-01", "n": [1, 2]})

    row = job_row(conn, job_id)
    assert row["kind"] == KIND
    assert row["queue"] == "default"
    assert row["payload"] == {"day": "2026-12-01", "n": [1, 2]}
    assert row["status"] == "available"
    assert row["priority"] == 0
    assert row["run_at"] == T0, "run_at defaults to now (the pinned clock)"
    assert row["attempt"] == 0
    assert row["max_attempts"] == 25
    assert row["version"] == 0
    assert row["unique_key"] is None
    assert row["picked_by"] is None
    assert row["retry_base_seconds"] is None, "no per-job policy: the task's applies"
    assert _count(conn) == 1


def test_enqueue_without_payload_stores_empty_object(
    app: tickwork.App, conn: psycopg.Connection
) -> None:
    assert job_row(conn, app.enqueue(KIND))["payload"] == {}


def test_enqueue_takes_queue_and_attempts_from_the_task(
    app: tickwork.App, conn: psycopg.Connection
) -> None:
    row = job_row(conn, app.enqueue("t.mail", {}))
    assert row["queue"] == "mail"
    assert row["max_attempts"] == 3

    unregistered = job_row(conn, app.enqueue("nobody.serves.this", {}))
    assert unregistered["queue"] == "default"
    assert unregistered["max_attempts"] is None, "left to the task of the claiming worker"


def test_a_claim_gives_a_job_without_max_attempts_its_task_setting(
    conn: psycopg.Connection,
) -> None:
    producer = tickwork.App(conn.info.dsn)  # registers no tasks: it cannot know the setting
    try:
        job_id = producer.enqueue("t.elsewhere", {})
        given = producer.enqueue("t.elsewhere", {}, max_attempts=9)
    finally:
        producer.close()
    assert job_row(conn, job_id)["max_attempts"] is None
    claimed = claim(conn, kinds=["t.elsewhere"], max_attempts=4)
    assert {job.id: job.max_attempts for job in claimed} == {job_id: 4, given: 9}
    assert job_row(conn, job_id)["max_attempts"] == 4


def test_enqueue_stores_every_option(app: tickwork.App, conn: psycopg.Connection) -> None:
    job_id = app.enqueue(
        "t.mail",
        {"to": "a@example.org"},
        queue="urgent",
        priority=7,
        run_at=at(90),
        max_attempts=9,
        retry=Backoff(base=5, rate=3, max=120),
        timeout=12.5,
        concurrency_key="account-42",
    )

    row = job_row(conn, job_id)
    assert row["queue"] == "urgent"
    assert row["priority"] == 7
    assert row["run_at"] == at(90)
    assert row["max_attempts"] == 9
    assert (row["retry_base_seconds"], row["retry_rate"], row["retry_max_seconds"]) == (5, 3, 120)
    assert row["timeout_seconds"] == 12.5
    assert row["concurrency_key"] == "account-42"

    job = app.get_job(job_id)
    assert job.retry == Backoff(5, 3, 120)
    assert job.timeout == 12.5
    assert job.concurrency_key == "account-42"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"priority": -1}, "priority"),
        ({"priority": 40000}, "priority"),
        ({"max_attempts": 0}, "max_attempts"),
        ({"timeout": 0}, "timeout"),
        ({"queue": " "}, "queue"),
        ({"queue": "mail\x00"}, "queue"),
        ({"unique_key": "k\x00"}, "unique_key"),
        ({"concurrency_key": "\x00"}, "concurrency_key"),
        ({"run_at": T0.replace(tzinfo=None)}, "run_at"),
        ({"payload": {"x": float("nan")}}, "payload"),
        ({"payload": {"x": object()}}, "payload"),
    ],
)
def test_enqueue_refuses_invalid_values_naming_the_field(
    app: tickwork.App, conn: psycopg.Connection, kwargs: dict[str, Any], field: str
) -> None:
    payload = kwargs.pop("payload", {})
    with pytest.raises(InvalidInput) as error:
        app.enqueue(KIND, payload, **kwargs)
    assert error.value.field == field
    assert _count(conn) == 0


# --- many jobs -----------------------------------------------------------------------------


def test_enqueue_many_inserts_ten_thousand_in_one_statement(
    app: tickwork.App, database_url: str, conn: psycopg.Connection
) -> None:
    payloads = [{"n": n} for n in range(10_000)]
    with psycopg.connect(database_url) as own:
        counting = CountingConnection(own)
        ids = app.enqueue_many(
            KIND, payloads, queue="bulk", priority=3, conn=cast(psycopg.Connection, counting)
        )
        own.commit()

    assert len(counting.statements) == 1, "one round trip for the whole batch"
    assert len(ids) == 10_000
    assert len(set(ids)) == 10_000
    assert ids == sorted(ids)
    # ids come back in payload order: the i-th id carries the i-th payload.
    rows = conn.execute(
        "SELECT id, (payload->>'n')::int, queue, priority, run_at FROM tickwork.jobs ORDER BY id"
    ).fetchall()
    assert [r[0] for r in rows] == ids
    assert [r[1] for r in rows] == list(range(10_000))
    assert {(r[2], r[3], r[4]) for r in rows} == {("bulk", 3, T0)}


def test_enqueue_many_of_nothing_returns_no_ids(
    app: tickwork.App, conn: psycopg.Connection
) -> None:
    assert app.enqueue_many(KIND, []) == []
    assert _count(conn) == 0


def test_enqueue_many_refuses_the_whole_batch_for_one_bad_payload(
    app: tickwork.App, conn: psycopg.Connection
) -> None:
    with pytest.raises(InvalidInput) as error:
        app.enqueue_many(KIND, [{"ok": 1}, {"bad": {1, 2}}])
    assert error.value.field == "payloads[1]"
    assert _count(conn) == 0


# --- when and in which order jobs are claimable -------------------------------------------


def test_delayed_job_is_not_claimable_until_its_run_at(
    app: tickwork.App, conn: psycopg.Connection
) -> None:
    job_id = app.enqueue(KIND, {}, run_at=at(60))

    assert claim(conn, kinds=[KIND], now=T0) == []
    assert claim(conn, kinds=[KIND], now=at(59.999)) == []
    claimed = claim(conn, kinds=[KIND], now=at(60))
    assert [j.id for j in claimed] == [job_id]


def test_higher_priority_is_claimed_first(app: tickwork.App, conn: psycopg.Connection) -> None:
    low = app.enqueue(KIND, {}, priority=1)
    high = app.enqueue(KIND, {}, priority=10)
    middle = app.enqueue(KIND, {}, priority=5)

    order = [claim(conn, kinds=[KIND], limit=1)[0].id for _ in range(3)]
    assert order == [high, middle, low]


def test_jobs_are_claimed_only_from_the_queues_asked_for(
    app: tickwork.App, conn: psycopg.Connection
) -> None:
    mail = app.enqueue(KIND, {}, queue="mail")
    default = app.enqueue(KIND, {})

    assert [j.id for j in claim(conn, kinds=[KIND], queues=["mail"])] == [mail]
    assert claim(conn, kinds=[KIND], queues=["mail"]) == []
    assert claim(conn, kinds=[KIND], queues=["other"]) == []
    assert [j.id for j in claim(conn, kinds=[KIND], queues=["default"])] == [default]


# --- unique keys ---------------------------------------------------------------------------


def test_unique_key_returns_the_open_job_and_a_new_one_once_it_finished(
    app: tickwork.App, conn: psycopg.Connection
) -> None:
    first = app.enqueue(KIND, {"v": 1}, unique_key="report-2026-12-01")
    assert app.enqueue(KIND, {"v": 2}, unique_key="report-2026-12-01") == first
    assert job_row(conn, first)["payload"] == {"v": 1}, "the existing job is left as it was"

    # Still open while running.
    (running,) = claim(conn, kinds=[KIND])
    assert app.enqueue(KIND, {"v": 3}, unique_key="report-2026-12-01") == first
    assert _count(conn) == 1

    # Another kind, or another key, is another job.
    other_kind = app.enqueue("t.mail", {}, unique_key="report-2026-12-01")
    other_key = app.enqueue(KIND, {}, unique_key="report-2026-12-02")
    assert len({first, other_kind, other_key}) == 3

    # Finished: the key is free again.
    assert store.run(conn, jobs_db.complete_jobs([running], T0)) == {first}
    second = app.enqueue(KIND, {"v": 4}, unique_key="report-2026-12-01")
    assert second != first
    assert job_row(conn, second)["status"] == "available"
    assert _count(conn) == 4


def test_unique_key_is_free_again_after_cancellation(
    app: tickwork.App, conn: psycopg.Connection
) -> None:
    first = app.enqueue(KIND, {}, unique_key="k")
    app.cancel(first)
    assert app.enqueue(KIND, {}, unique_key="k") != first


# --- transactional enqueue -----------------------------------------------------------------


def test_enqueue_on_the_callers_connection_joins_its_transaction(
    app: tickwork.App, database_url: str, conn: psycopg.Connection
) -> None:
    with psycopg.connect(database_url) as caller:
        caller.execute("CREATE TABLE orders (id int PRIMARY KEY)")
        caller.execute("INSERT INTO orders VALUES (1)")
        rolled_back = app.enqueue(KIND, {"order": 1}, conn=caller)
        many_rolled_back = app.enqueue_many(KIND, [{"n": 1}, {"n": 2}], conn=caller)
        assert _count(conn) == 0, "not visible to others before commit"
        assert scalar(caller, "SELECT count(*) FROM tickwork.jobs") == 3, "visible inside"
        caller.rollback()
        assert _count(conn) == 0, "a rollback leaves no job"

        caller.execute("CREATE TABLE orders (id int PRIMARY KEY)")
        caller.execute("INSERT INTO orders VALUES (2)")
        kept = app.enqueue(KIND, {"order": 2}, conn=caller)
        assert _count(conn) == 0
        caller.commit()

    assert _count(conn) == 1
    assert job_row(conn, kept)["payload"] == {"order": 2}
    assert scalar(conn, "SELECT count(*) FROM orders") == 1
    assert kept not in (rolled_back, *many_rolled_back)


# --- asyncio API ---------------------------------------------------------------------------


async def test_enqueue_async_and_enqueue_many_async(
    aapp: tickwork.App, conn: psycopg.Connection
) -> None:
    one = await aapp.enqueue_async(
        "t.mail", {"a": 1}, priority=2, run_at=at(5), concurrency_key="c", timeout=3
    )
    many = await aapp.enqueue_many_async(KIND, [{"n": n} for n in range(50)], queue="bulk")
    again = await aapp.enqueue_async(KIND, {}, unique_key="u")
    assert await aapp.enqueue_async(KIND, {}, unique_key="u") == again

    row = job_row(conn, one)
    assert (row["queue"], row["priority"], row["run_at"]) == ("mail", 2, at(5))
    assert (row["concurrency_key"], row["timeout_seconds"], row["max_attempts"]) == ("c", 3, 3)
    assert len(many) == 50
    assert conn.execute(
        "SELECT array_agg((payload->>'n')::int ORDER BY id) FROM tickwork.jobs WHERE queue = 'bulk'"
    ).fetchone() == (list(range(50)),)
    assert [
        r[0] for r in conn.execute("SELECT id FROM tickwork.jobs WHERE queue = 'bulk' ORDER BY id")
    ] == many
    assert _count(conn) == 52


async def test_enqueue_async_joins_the_callers_transaction(
    aapp: tickwork.App, database_url: str, conn: psycopg.Connection
) -> None:
    async with await psycopg.AsyncConnection.connect(database_url) as caller:
        await aapp.enqueue_async(KIND, {}, conn=caller)
        await aapp.enqueue_many_async(KIND, [{}, {}], conn=caller)
        assert _count(conn) == 0
        await caller.rollback()
        assert _count(conn) == 0
        kept = await aapp.enqueue_async(KIND, {"kept": True}, conn=caller)
        await caller.commit()
    assert _count(conn) == 1
    assert job_row(conn, kept)["payload"] == {"kept": True}
