"""The job transitions (tickwork.transitions), one way whoever asks: the App and the console
write the same audit record and raise the same errors, a request id makes an App action
idempotent as it does a console one; and the end of a schedule's job updates its schedule in
one place (the trigger jobs_ended), for a batch of successes as for one cancel."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

import tickwork
from tests.support.schedule_helpers import KIND, NS, at, every, fire, jobs, schedule
from tickwork import transitions
from tickwork.clock import SettableClock
from tickwork.db import jobs as jobs_db
from tickwork.db import store
from tickwork.errors import InvalidTransition, JobNotFound
from tickwork.model import Actor
from tickwork.schedules.options import IntervalMode

ALICE = Actor("alice", "tidy up", "req-1")


def _audit(conn: psycopg.Connection[Any]) -> list[dict[str, Any]]:
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute("SELECT * FROM tickwork.audit_log ORDER BY id").fetchall()


def test_the_app_and_the_console_record_the_same_audit_of_a_job_action(
    app: tickwork.App, conn: psycopg.Connection[Any]
) -> None:
    by_app, by_console = app.enqueue("t.job", {}), app.enqueue("t.job", {})
    app.cancel(by_app, actor="alice", reason="tidy up", request_id="req-0")
    with app.connection() as own:
        outcome = transitions.act_on_job(own, transitions.JobAction.CANCEL, by_console, ALICE, None)
    assert outcome.changed and outcome.audit_id is not None
    first, second = _audit(conn)
    assert (first["actor"], first["action"], first["reason"]) == ("alice", "cancel", "tidy up")
    assert (second["target"], second["request_id"]) == (f"job:{by_console}", "req-1")
    assert set(first["details"]) == set(second["details"]) == {"before", "after"}
    assert set(first["details"]["before"]) == set(second["details"]["after"])
    assert (first["details"]["before"]["status"], first["details"]["after"]["status"]) == (
        "available",
        "cancelled",
    )


def test_a_request_id_makes_an_app_action_idempotent(
    app: tickwork.App, conn: psycopg.Connection[Any]
) -> None:
    job_id = app.enqueue("t.job", {})
    app.cancel(job_id, actor="alice", request_id="once")
    app.retry(job_id, actor="bob")  # available again: a cancel would apply once more
    assert app.cancel(job_id, actor="alice", request_id="once") is tickwork.JobStatus.AVAILABLE
    assert [r["action"] for r in _audit(conn)] == ["cancel", "retry"]


def test_nothing_to_do_is_an_outcome_for_the_console_and_an_error_for_the_app(
    app: tickwork.App, conn: psycopg.Connection[Any]
) -> None:
    job_id = app.enqueue("t.job", {})
    app.cancel(job_id)
    with app.connection() as own:
        outcome = transitions.act_on_job(own, transitions.JobAction.CANCEL, job_id, ALICE, None)
    assert (outcome.changed, outcome.replayed) == (False, False)
    assert outcome.message == f"job {job_id} is already cancelled"
    refused = (
        f"^job {job_id} is cancelled; cancel applies only to available or running or waiting jobs$"
    )
    with pytest.raises(InvalidTransition, match=refused):
        app.cancel(job_id)
    assert len(_audit(conn)) == 1


def test_an_action_that_does_not_apply_raises_the_same_error_everywhere(
    app: tickwork.App,
) -> None:
    job_id = app.enqueue("t.job", {})
    app.cancel(job_id)
    expected = f"job {job_id} is cancelled; run_now applies only to available jobs"
    with pytest.raises(InvalidTransition, match=f"^{expected}$"):
        app.run_now(job_id, actor="alice")
    with app.connection() as own, pytest.raises(InvalidTransition, match=f"^{expected}$"):
        transitions.act_on_job(own, transitions.JobAction.RUN_NOW, job_id, ALICE, None)
    with app.connection() as own, pytest.raises(JobNotFound):
        transitions.act_on_job(own, transitions.JobAction.RETRY, 10**9, ALICE, None)


def test_may_act_refuses_before_anything_changes(
    app: tickwork.App, conn: psycopg.Connection[Any]
) -> None:
    job_id = app.enqueue("t.job", {})

    def refuse(namespace: str | None) -> None:
        assert namespace is None  # enqueued outside any schedule
        raise PermissionError("not yours")

    with app.connection() as own, pytest.raises(PermissionError):
        transitions.act_on_job(own, transitions.JobAction.CANCEL, job_id, ALICE, None, refuse)
    assert app.get_job(job_id).status is tickwork.JobStatus.AVAILABLE
    assert _audit(conn) == []


async def test_a_batch_of_successes_carries_each_schedules_newest_return_value(
    app: tickwork.App, aconn: psycopg.AsyncConnection[Any], conn: psycopg.Connection[Any]
) -> None:
    app.sync_schedules(NS, [every(name, 10, starting_deadline_seconds=60) for name in "ab"])
    await fire(aconn, at(10))
    await fire(aconn, at(20))  # a and b: occurrences 10 and 20 each
    claimed = store.run(conn, jobs_db.claim_jobs("w", ["default"], {KIND: 25}, 10, 30, at(31)))
    assert len(claimed) == 4
    results = {j.id: {"n": j.id} for j in claimed if j.schedule and j.schedule.name == "a"}
    newest_a = max(results)
    with conn.transaction():  # one statement for the batch, the schedules in the same one
        done = store.run(conn, jobs_db.complete_jobs(claimed, at(40), results))
    assert done == {j.id for j in claimed}
    a, b = schedule(conn, "a"), schedule(conn, "b")
    assert a["state"] == {"n": newest_a} and b["state"] is None
    assert a["last_success_at"] == b["last_success_at"] == at(40)
    assert a["last_job_status"] == b["last_job_status"] == "succeeded"


async def test_a_cancel_and_a_success_end_a_fixed_delay_wait_through_the_same_trigger(
    app: tickwork.App,
    aconn: psycopg.AsyncConnection[Any],
    conn: psycopg.Connection[Any],
    clock: SettableClock,
) -> None:
    app.sync_schedules(NS, [every("poll", 45, interval_mode=IntervalMode.FIXED_DELAY)])
    await fire(aconn, at(45))
    clock.set(at(60))
    app.cancel(jobs(conn, "poll")[0]["id"])
    row = schedule(conn, "poll")
    assert (row["next_run_at"], row["last_job_status"], row["last_success_at"]) == (
        at(105),
        "cancelled",
        None,
    )
    await fire(aconn, at(105))
    (job,) = store.run(conn, jobs_db.claim_jobs("w", ["default"], {KIND: 25}, 10, 30, at(106)))
    store.run(conn, jobs_db.complete_jobs([job], at(120)))
    row = schedule(conn, "poll")
    assert (row["next_run_at"], row["last_job_status"], row["last_success_at"]) == (
        at(165),
        "succeeded",
        at(120),
    )
