"""``status.active`` lists a few open jobs per schedule; ``status.activeCount`` counts them all,
whatever the number of schedules and jobs (a real PostgreSQL; no kmock needed)."""

from __future__ import annotations

from typing import Any

import psycopg

import tickwork
from tests.support.schedule_helpers import NS, at, every, fire
from tickwork.db import jobs as jobs_db
from tickwork.db import schedules as schedules_db
from tickwork.db import store
from tickwork.operator import status
from tickwork.operator.board import ACTIVE_SHOWN


async def test_every_schedule_gets_its_exact_count_and_at_most_the_shown_jobs(
    app: tickwork.App, aconn: psycopg.AsyncConnection[Any], conn: psycopg.Connection[Any]
) -> None:
    app.sync_schedules(NS, [every(name, 10, starting_deadline_seconds=3600) for name in "ab"])
    app.sync_schedules("other", [every("c", 10, starting_deadline_seconds=3600)])
    for seconds in range(10, 10 * (ACTIVE_SHOWN + 3) + 1, 10):
        await fire(aconn, at(seconds), (NS, "other"))
    open_per_schedule = ACTIVE_SHOWN + 3
    (first_of_a,) = conn.execute(
        "SELECT min(id) FROM tickwork.jobs WHERE schedule_name = 'a'"
    ).fetchone()
    app.cancel(first_of_a)
    app.sync_schedules(
        NS, [every(n, 10, starting_deadline_seconds=3600) for n in ("a", "b", "idle")]
    )

    listed = store.run(conn, jobs_db.open_job_list([NS], ACTIVE_SHOWN))

    by_schedule: dict[str, list[jobs_db.OpenJob]] = {}
    for job in listed:
        by_schedule.setdefault(job.name, []).append(job)
    assert set(by_schedule) == {"a", "b"}  # not the other namespace's
    assert [len(by_schedule[n]) for n in "ab"] == [ACTIVE_SHOWN, ACTIVE_SHOWN]
    assert {j.open_count for j in by_schedule["a"]} == {open_per_schedule - 1}
    assert {j.open_count for j in by_schedule["b"]} == {open_per_schedule}
    assert [j.id for j in by_schedule["b"]] == sorted(j.id for j in by_schedule["b"])
    rows = {r.name: r for r in store.run(conn, schedules_db.list_schedules(NS))}
    assert status.facts(rows["a"], by_schedule["a"])["activeCount"] == open_per_schedule - 1
    assert len(status.facts(rows["a"], by_schedule["a"])["active"]) == ACTIVE_SHOWN
    assert status.facts(rows["idle"], [])["activeCount"] == 0
    assert status.facts(None, [])["activeCount"] is None  # no row: absent
