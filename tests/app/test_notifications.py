"""The notifications enqueues send on ``tickwork_jobs``, counted by a test connection that
LISTENs: an enqueue in a transaction of its own sends one after its commit (enqueue_many one
for the whole burst), an enqueue in the caller's transaction one per queue at that commit
(the trigger), a job due later none, ``App(notify=False)`` and ``tickwork.notify_jobs = off``
none. Each count ends at a marker notification sent after the action (notifications arrive in
commit order), so no test waits for something not to happen."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

import tickwork
from tests.support.helpers import scalar

KIND = "t.note"
MARKER = "--marker--"


@pytest.fixture
def listener(database_url: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(database_url, autocommit=True) as listening:
        listening.execute("LISTEN tickwork_jobs")
        yield listening


def _sent(
    listener: psycopg.Connection[Any], conn: psycopg.Connection[Any], action: Callable[[], Any]
) -> list[str]:
    """The payloads notified on tickwork_jobs while ``action`` ran (and committed)."""
    action()
    conn.execute("SELECT pg_notify('tickwork_jobs', %s)", (MARKER,))
    payloads = []
    for note in listener.notifies(timeout=30):
        if note.payload == MARKER:
            return payloads
        payloads.append(note.payload)
    raise AssertionError(f"the marker never came; got {payloads}")


def _app(database_url: str, **options: Any) -> tickwork.App:
    app = tickwork.App(database_url, **options)  # the database clock decides what is due

    @app.task(KIND)
    def note(job: tickwork.Job) -> None:
        return None

    @app.task("t.mail", queue="mail")
    def mail(job: tickwork.Job) -> None:
        return None

    return app


@pytest.fixture
def app(database_url: str) -> Iterator[tickwork.App]:
    app = _app(database_url)
    yield app
    app.close()


def test_a_burst_of_enqueue_many_sends_one_notification(
    app: tickwork.App, listener: psycopg.Connection[Any], conn: psycopg.Connection[Any]
) -> None:
    sent = _sent(listener, conn, lambda: app.enqueue_many(KIND, [{"n": n} for n in range(1000)]))
    assert sent == ["default"]
    assert scalar(conn, "SELECT count(*) FROM tickwork.jobs") == 1000


def test_each_enqueue_of_its_own_notifies_its_queue_once(
    app: tickwork.App, listener: psycopg.Connection[Any], conn: psycopg.Connection[Any]
) -> None:
    def enqueue() -> None:
        app.enqueue(KIND, {"n": 1})
        app.enqueue("t.mail", {"n": 2})
        app.enqueue_many("t.mail", [{"n": 3}, {"n": 4}])

    assert _sent(listener, conn, enqueue) == ["default", "mail", "mail"]


async def test_async_enqueues_notify_after_their_commit(
    app: tickwork.App, listener: psycopg.Connection[Any], conn: psycopg.Connection[Any]
) -> None:
    await app.enqueue_async(KIND, {})
    await app.enqueue_many_async("t.mail", [{}] * 50)
    try:
        assert _sent(listener, conn, lambda: None) == ["default", "mail"]
    finally:
        await app.close_async()


def test_enqueues_in_the_callers_transaction_notify_once_per_queue_at_its_commit(
    app: tickwork.App, listener: psycopg.Connection[Any], conn: psycopg.Connection[Any]
) -> None:
    with app.connection() as tx:
        for n in range(5):
            app.enqueue(KIND, {"n": n}, conn=tx)
        app.enqueue_many(KIND, [{}] * 100, conn=tx)
        app.enqueue_many("t.mail", [{}] * 3, conn=tx)
        assert _sent(listener, conn, lambda: None) == []  # nothing before the commit
    assert sorted(_sent(listener, conn, lambda: None)) == ["default", "mail"]


def test_a_rolled_back_transactional_enqueue_notifies_nobody(
    app: tickwork.App, listener: psycopg.Connection[Any], conn: psycopg.Connection[Any]
) -> None:
    def rolled_back() -> None:
        with psycopg.connect(app.database_url) as tx:
            app.enqueue(KIND, {}, conn=tx)
            tx.rollback()

    assert _sent(listener, conn, rolled_back) == []


def test_jobs_due_later_send_no_notification(
    app: tickwork.App, listener: psycopg.Connection[Any], conn: psycopg.Connection[Any]
) -> None:
    later = datetime.now(UTC) + timedelta(hours=1)

    def enqueue() -> None:
        app.enqueue(KIND, {}, run_at=later)
        app.enqueue_many(KIND, [{}] * 10, run_at=later)
        with app.connection() as tx:
            app.enqueue(KIND, {}, run_at=later, conn=tx)

    assert _sent(listener, conn, enqueue) == []
    assert scalar(conn, "SELECT count(*) FROM tickwork.jobs") == 12


def test_an_existing_unique_job_sends_no_second_notification(
    app: tickwork.App, listener: psycopg.Connection[Any], conn: psycopg.Connection[Any]
) -> None:
    def enqueue() -> None:
        first = app.enqueue(KIND, {}, unique_key="once")
        assert app.enqueue(KIND, {}, unique_key="once") == first

    assert _sent(listener, conn, enqueue) == ["default"]


def test_an_app_with_notify_off_sends_none(
    database_url: str, listener: psycopg.Connection[Any], conn: psycopg.Connection[Any]
) -> None:
    quiet = _app(database_url, notify=False)
    try:
        sent = _sent(
            listener,
            conn,
            lambda: (quiet.enqueue(KIND, {}), quiet.enqueue_many("t.mail", [{}] * 10)),
        )
    finally:
        quiet.close()
    assert sent == []
    assert scalar(conn, "SELECT count(*) FROM tickwork.jobs WHERE status = 'available'") == 11


def test_the_notify_jobs_setting_off_silences_the_trigger(
    app: tickwork.App, listener: psycopg.Connection[Any], conn: psycopg.Connection[Any]
) -> None:
    def enqueue() -> None:
        with app.connection() as tx:
            tx.execute("SET LOCAL tickwork.notify_jobs = off")
            app.enqueue(KIND, {}, conn=tx)
        with app.connection() as tx:  # SET LOCAL ended with its transaction
            app.enqueue("t.mail", {}, conn=tx)

    assert _sent(listener, conn, enqueue) == ["mail"]


def test_a_notification_refused_after_the_commit_keeps_the_job(
    app: tickwork.App,
    listener: psycopg.Connection[Any],
    conn: psycopg.Connection[Any],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """PostgreSQL refuses a NOTIFY payload of 8000 bytes or more: a queue name that long makes
    the notification fail after the job is committed. The job stays (the enqueue returns its
    id, nothing half-done) and the failure is logged; workers of that queue find it by
    polling."""
    queue = "q" * 8000
    job_id = app.enqueue(KIND, {}, queue=queue)
    assert scalar(conn, "SELECT queue FROM tickwork.jobs WHERE id = %s", (job_id,)) == queue
    assert [r.action for r in caplog.records if hasattr(r, "action")] == ["notify_failed"]
    assert app.enqueue(KIND, {}) > job_id  # the pooled connection is usable again
    assert _sent(listener, conn, lambda: None) == ["default"]


async def test_an_async_notification_refused_after_the_commit_keeps_the_job(
    app: tickwork.App, conn: psycopg.Connection[Any], caplog: pytest.LogCaptureFixture
) -> None:
    queue = "q" * 8000
    try:
        job_id = await app.enqueue_async(KIND, {}, queue=queue)
        assert await app.enqueue_async(KIND, {}) > job_id  # the connection is usable again
    finally:
        await app.close_async()
    assert scalar(conn, "SELECT queue FROM tickwork.jobs WHERE id = %s", (job_id,)) == queue
    assert [r.action for r in caplog.records if hasattr(r, "action")] == ["notify_failed"]
