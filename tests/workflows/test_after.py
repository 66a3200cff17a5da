"""``after=[ids]``: a job waits, unclaimed, until all its parents succeeded; a parent that ends
dead or cancelled cancels it (and its own dependents) naming the parent; bad ids, other
tenants' jobs and bad values are refused naming the field."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

import tickwork
from tests.support.helpers import T0, claim, job_row, scalar
from tickwork.db import jobs as jobs_db
from tickwork.db import store
from tickwork.errors import InvalidInput
from tickwork.model import Job

KIND = "w.step"


def _claim(conn: psycopg.Connection[Any], limit: int = 100) -> list[Job]:
    return claim(conn, kinds=[KIND], limit=limit)


def _succeed(conn: psycopg.Connection[Any], jobs: list[Job]) -> None:
    done = store.run(conn, jobs_db.complete_jobs(jobs, T0))
    assert done == {j.id for j in jobs}


def _status(conn: psycopg.Connection[Any], job_id: int) -> str:
    return str(job_row(conn, job_id)["status"])


def test_a_dependent_waits_unclaimed_until_every_parent_succeeded(
    app: tickwork.App, conn: psycopg.Connection[Any]
) -> None:
    a = app.enqueue(KIND, {"n": "a"})
    b = app.enqueue(KIND, {"n": "b"})
    join = app.enqueue(KIND, {"n": "join"}, after=[a, b])
    assert _status(conn, join) == "waiting"
    assert job_row(conn, join)["parents_left"] == 2

    first = _claim(conn)
    assert {j.id for j in first} == {a, b}, "the waiting job is not claimed"
    _succeed(conn, [j for j in first if j.id == a])
    assert _status(conn, join) == "waiting"
    assert job_row(conn, join)["parents_left"] == 1
    assert _claim(conn) == []

    _succeed(conn, [j for j in first if j.id == b])
    assert _status(conn, join) == "available"
    assert [j.id for j in _claim(conn)] == [join]


def test_after_succeeded_parents_starts_available(
    app: tickwork.App, conn: psycopg.Connection[Any]
) -> None:
    a = app.enqueue(KIND)
    _succeed(conn, _claim(conn))
    later = app.enqueue(KIND, after=[a, a])
    assert _status(conn, later) == "available"
    assert scalar(conn, "SELECT count(*) FROM tickwork.job_dependencies") == 1


@pytest.mark.parametrize("ending", ["dead", "cancelled"])
def test_a_parent_that_fails_cancels_its_dependents_down_the_chain(
    app: tickwork.App, conn: psycopg.Connection[Any], ending: str
) -> None:
    parent = app.enqueue(KIND)
    other = app.enqueue(KIND)
    child = app.enqueue(KIND, after=[parent, other])
    grandchild = app.enqueue(KIND, after=[child])
    if ending == "dead":
        (job,) = [j for j in _claim(conn) if j.id == parent]
        assert store.run(conn, jobs_db.mark_job_dead(job, "boom", T0))
    else:
        app.cancel(parent)
    row = job_row(conn, child)
    assert row["status"] == "cancelled"
    assert row["last_error"] == f"cancelled: parent job {parent} ended {ending}"
    assert row["finished_at"] is not None
    row = job_row(conn, grandchild)
    assert row["status"] == "cancelled"
    assert row["last_error"] == f"cancelled: parent job {child} ended cancelled"
    assert _status(conn, other) in ("available", "running"), "a sibling parent is left alone"


def test_after_a_parent_already_dead_is_cancelled_at_once(
    app: tickwork.App, conn: psycopg.Connection[Any]
) -> None:
    parent = app.enqueue(KIND)
    app.cancel(parent)
    child = app.enqueue(KIND, after=[parent])
    row = job_row(conn, child)
    assert (row["status"], row["last_error"]) == (
        "cancelled",
        f"cancelled: parent job {parent} ended cancelled",
    )


def test_a_waiting_job_can_be_cancelled_and_takes_its_dependents(
    app: tickwork.App, conn: psycopg.Connection[Any]
) -> None:
    parent = app.enqueue(KIND)
    child = app.enqueue(KIND, after=[parent])
    grandchild = app.enqueue(KIND, after=[child])
    assert app.cancel(child) == "cancelled"
    assert _status(conn, grandchild) == "cancelled"
    _succeed(conn, _claim(conn))
    assert _status(conn, child) == "cancelled", "a parent's success revives nothing"


def test_a_thousand_dependents_of_one_parent_are_released_by_its_completion(
    app: tickwork.App, conn: psycopg.Connection[Any]
) -> None:
    parent = app.enqueue(KIND)
    children = app.enqueue_many(KIND, [{"i": i} for i in range(1000)], after=[parent])
    assert len(set(children)) == 1000
    (job,) = _claim(conn)
    assert scalar(conn, "SELECT count(*) FROM tickwork.jobs WHERE status = 'waiting'") == 1000
    _succeed(conn, [job])
    assert scalar(conn, "SELECT count(*) FROM tickwork.jobs WHERE status = 'available'") == 1000
    claimed = _claim(conn, limit=2000)
    assert sorted(j.id for j in claimed) == sorted(children)


def test_a_rolled_back_enqueue_leaves_no_edge(
    app: tickwork.App, database_url: str, conn: psycopg.Connection[Any]
) -> None:
    parent = app.enqueue(KIND)
    with psycopg.connect(database_url) as tx:
        app.enqueue(KIND, after=[parent], conn=tx)
        tx.rollback()
    assert scalar(conn, "SELECT count(*) FROM tickwork.job_dependencies") == 0


def test_after_an_unknown_job_or_another_tenants_job_is_refused(
    app: tickwork.App, conn: psycopg.Connection[Any]
) -> None:
    with pytest.raises(InvalidInput, match=r"after: no job 999999 in this namespace"):
        app.enqueue(KIND, after=[999999])
    conn.execute(
        "INSERT INTO tickwork.jobs (kind, schedule_namespace, schedule_name)"
        " VALUES ('other', 'tenant-b', 's')"
    )
    theirs = scalar(conn, "SELECT max(id) FROM tickwork.jobs")
    with pytest.raises(InvalidInput, match=rf"after: no job {theirs} in this namespace"):
        app.enqueue(KIND, after=[theirs])
    assert scalar(conn, "SELECT count(*) FROM tickwork.jobs") == 1, "nothing was written"


@pytest.mark.parametrize(
    ("after", "field", "reason"),
    [
        ("12", "after", "a list of job ids"),
        ([1, "2"], "after[1]", "a positive integer"),
        ([True], "after[0]", "a positive integer"),
        ([0], "after[0]", "a positive integer"),
        ([-4], "after[0]", "a positive integer"),
        (list(range(1, 10_002)), "after", "at most 10000"),
    ],
)
def test_bad_after_values_are_refused_naming_the_field(
    app: tickwork.App, after: Any, field: str, reason: str
) -> None:
    with pytest.raises(InvalidInput) as caught:
        app.enqueue(KIND, after=after)
    assert str(caught.value).startswith(f"{field}: ")
    assert reason in str(caught.value)


def test_unique_key_with_after_is_refused(app: tickwork.App) -> None:
    parent = app.enqueue(KIND)
    with pytest.raises(InvalidInput, match="unique_key: cannot be combined with after"):
        app.enqueue(KIND, after=[parent], unique_key="k")
