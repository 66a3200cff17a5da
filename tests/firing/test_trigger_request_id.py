"""A trigger's request id is decided under the schedule's row lock (``operations.trigger``, the
one path of the App, the command line, the console and the run-now annotation): a request id
already recorded for the schedule returns the earlier job and creates nothing, whoever asks,
from however many processes at once, and after retention has deleted the job."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

import tickwork
from tests.support.forking import process_context
from tests.support.helpers import stop_processes, wait_until_sync
from tests.support.schedule_helpers import NS, cron, jobs
from tickwork.admin import actions
from tickwork.db import schedules as schedules_db
from tickwork.db import store
from tickwork.errors import ScheduleNotFound
from tickwork.model import Actor
from tickwork.schedules import operations


def _triggers(conn: psycopg.Connection[Any]) -> list[dict[str, Any]]:
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(
            "SELECT actor, request_id, details FROM tickwork.audit_log"
            " WHERE action = 'trigger' ORDER BY id"
        ).fetchall()


def test_a_request_id_seen_before_returns_its_job_and_creates_none(
    app: tickwork.App, conn: psycopg.Connection[Any]
) -> None:
    app.sync_schedules(NS, [cron("nightly", "0 2 * * *"), cron("other", "0 3 * * *")])
    first = app.trigger(NS, "nightly", actor="bob", request_id="tok-1")
    assert app.trigger(NS, "nightly", actor="alice", request_id="tok-1") == first
    second = app.trigger(NS, "nightly", actor="bob", request_id="tok-2")
    assert second != first
    # A request id is the schedule's own: another schedule's tok-1 is a request of its own.
    other = app.trigger(NS, "other", actor="bob", request_id="tok-1")
    assert len({first, second, other}) == 3
    assert len(jobs(conn)) == 3
    assert [(t["request_id"], t["details"]["job_id"]) for t in _triggers(conn)] == [
        ("tok-1", first),
        ("tok-2", second),
        ("tok-1", other),
    ]


def test_the_request_id_outlives_the_job_and_a_disabled_schedule(
    app: tickwork.App, conn: psycopg.Connection[Any]
) -> None:
    app.sync_schedules(NS, [cron("nightly", "0 2 * * *")])
    first = app.trigger(NS, "nightly", actor="bob", request_id="tok-1")
    conn.execute("DELETE FROM tickwork.jobs")  # what retention does to a finished job
    assert app.trigger(NS, "nightly", actor="bob", request_id="tok-1") == first
    app.sync_schedules(NS, [])  # pruned: disabled
    assert app.trigger(NS, "nightly", actor="bob", request_id="tok-1") == first
    assert jobs(conn) == []
    assert len(_triggers(conn)) == 1


def test_the_console_and_the_app_share_one_request_id_space(
    app: tickwork.App, conn: psycopg.Connection[Any]
) -> None:
    app.sync_schedules(NS, [cron("nightly", "0 2 * * *")])
    job_id = app.trigger(NS, "nightly", actor="cli", request_id="INC-7")
    with conn.transaction():
        outcome = actions.trigger(conn, NS, "nightly", Actor("web", None, "INC-7"), None, None)
    assert (outcome.job_id, outcome.replayed, outcome.changed) == (job_id, True, False)
    assert len(jobs(conn)) == 1


def _trigger_in_process(database_url: str, request_id: str, results: Any) -> None:
    with psycopg.connect(database_url) as conn, conn.transaction():
        outcome = operations.trigger(conn, NS, "nightly", Actor("p", None, request_id), None)
    results.put((outcome.job_id, outcome.replayed))


@pytest.fixture
def spawn() -> Iterator[Any]:
    ctx = process_context()
    started: list[Any] = []
    results = ctx.Queue()

    def launch(*args: Any) -> None:
        process = ctx.Process(target=_trigger_in_process, args=(*args, results), daemon=True)
        process.start()
        started.append(process)

    launch.results = results  # type: ignore[attr-defined]
    yield launch
    stop_processes(started)


def test_two_processes_with_one_request_id_make_one_job(
    app: tickwork.App, conn: psycopg.Connection[Any], database_url: str, spawn: Any
) -> None:
    app.sync_schedules(NS, [cron("nightly", "0 2 * * *")])
    # The test holds the schedule's row lock, so both processes are inside trigger, waiting
    # on it, before either can look for the request id.
    holder = psycopg.connect(database_url)
    holder.execute("BEGIN")
    assert store.run(holder, schedules_db.lock_schedule(NS, "nightly")) is not None
    spawn(database_url, "tok")
    spawn(database_url, "tok")

    def both_waiting() -> bool:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE wait_event_type = 'Lock' AND datname = current_database()"
        ).fetchone()
        return row is not None and row[0] == 2

    wait_until_sync(both_waiting, what="both processes to wait on the schedule's row lock")
    holder.rollback()
    holder.close()
    results = sorted(spawn.results.get(timeout=20) for _ in range(2))
    ((job_a, replayed_a), (job_b, replayed_b)) = results
    assert job_a == job_b
    assert sorted((replayed_a, replayed_b)) == [False, True]
    assert [job["id"] for job in jobs(conn)] == [job_a]
    assert len(_triggers(conn)) == 1


def test_an_unknown_schedule_is_refused_before_any_replay(app: tickwork.App) -> None:
    with pytest.raises(ScheduleNotFound):
        app.trigger(NS, "nope", actor="bob", request_id="tok")
