"""Backfill (the jobs of a past range, through the occurrence keys: idempotent, and only the
missing ones over a range already fired), manual triggers, and the audit of both."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

import tickwork
from tests.support.helpers import claim
from tests.support.schedule_helpers import (
    KIND,
    NS,
    at,
    cron,
    every,
    fire,
    jobs,
    occurrences,
    schedule,
)
from tickwork.clock import SettableClock
from tickwork.db import jobs as jobs_db
from tickwork.db import store
from tickwork.errors import InvalidInput, InvalidTransition, ScheduleNotFound
from tickwork.schedules.operations import MAX_BACKFILL, BackfillReport
from tickwork.schedules.options import ConcurrencyPolicy, IntervalMode, JobTemplate


def _audit(conn: psycopg.Connection[Any]) -> list[dict[str, Any]]:
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute("SELECT * FROM tickwork.audit_log ORDER BY id").fetchall()


def test_backfill_creates_the_jobs_of_every_occurrence_in_the_range(
    app: tickwork.App, conn: psycopg.Connection[Any], clock: SettableClock
) -> None:
    app.sync_schedules(NS, [cron("hourly", "0 * * * *")])
    clock.set(at(86400))
    report = app.backfill(NS, "hourly", at(3 * 3600), at(6 * 3600), actor="alice", reason="gap")
    assert report == BackfillReport(created=4, existing=0)  # both ends included
    assert occurrences(conn, "hourly") == [at(h * 3600) for h in (3, 4, 5, 6)]
    assert {job["run_at"] for job in jobs(conn)} == set(occurrences(conn, "hourly"))
    (entry,) = _audit(conn)
    assert (entry["actor"], entry["action"], entry["target"]) == (
        "alice",
        "backfill",
        "schedule:ns/hourly",
    )
    assert (entry["reason"], entry["details"]["created"]) == ("gap", 4)


def test_backfill_twice_creates_nothing_twice(
    app: tickwork.App, conn: psycopg.Connection[Any], clock: SettableClock
) -> None:
    app.sync_schedules(NS, [every("tick", 60)])
    clock.set(at(3600))
    assert app.backfill(NS, "tick", at(0), at(599)) == BackfillReport(created=10, existing=0)
    assert app.backfill(NS, "tick", at(0), at(599)) == BackfillReport(created=0, existing=10)
    assert app.backfill(NS, "tick", at(300), at(900)) == BackfillReport(created=6, existing=5)
    assert len(jobs(conn)) == 16


async def test_backfill_over_a_fired_range_creates_only_the_missing_ones(
    app: tickwork.App,
    aconn: psycopg.AsyncConnection[Any],
    conn: psycopg.Connection[Any],
    clock: SettableClock,
) -> None:
    app.sync_schedules(NS, [every("tick", 60, starting_deadline_seconds=10)])
    await fire(aconn, at(60))
    await fire(aconn, at(300))  # 120 ... 240 missed (Latest fires 240), 300 on time
    assert occurrences(conn, "tick") == [at(60), at(300)]
    clock.set(at(400))
    report = app.backfill(NS, "tick", at(60), at(300))
    assert report == BackfillReport(created=3, existing=2)
    assert occurrences(conn, "tick") == [at(60 * k) for k in range(1, 6)]
    await fire(aconn, at(360))  # firing goes on as before
    assert occurrences(conn, "tick")[-1] == at(360)


SERIAL = [ConcurrencyPolicy.FORBID, ConcurrencyPolicy.BUFFER_ONE, ConcurrencyPolicy.REPLACE]


def _claim_one_by_one(conn: psycopg.Connection[Any], count: int) -> list[Any]:
    """Claim as a worker with room for 10 would, ``count`` times, completing each job claimed
    before the next claim; the occurrences in the order they were claimed."""
    order = []
    for _ in range(count):
        claimed = claim(conn, kinds=[KIND], limit=10, now=at(7200))
        assert len(claimed) == 1, "one at a time"
        assert claim(conn, kinds=[KIND], limit=10, now=at(7200)) == [], "none beside it"
        assert claimed[0].schedule is not None
        order.append(claimed[0].schedule.occurrence_at)
        store.run(conn, jobs_db.complete_jobs(claimed, at(7200)))
    return order


@pytest.mark.parametrize("policy", SERIAL)
def test_backfill_of_a_forbid_buffer_one_or_replace_schedule_runs_one_at_a_time_in_order(
    app: tickwork.App, conn: psycopg.Connection[Any], clock: SettableClock, policy: Any
) -> None:
    """Each job under the schedule's key, claimed oldest occurrence first although jitter (up
    to 5 minutes on a per-minute schedule) would have reordered their due times; none
    cancelled (Replace too); carried state as the firing gives it."""
    app.sync_schedules(
        NS, [cron("tick", "* * * * *", concurrency_policy=policy, jitter_seconds=300)]
    )
    conn.execute("UPDATE tickwork.schedules SET state = '{\"cursor\": 9}'")
    clock.set(at(3600))
    assert app.backfill(NS, "tick", at(60), at(600)).created == 10
    rows = jobs(conn)
    assert {row["concurrency_key"] for row in rows} == {"schedule:ns/tick"}
    assert {row["payload"]["cursor"] for row in rows} == {9}
    run_ats = [row["run_at"] for row in rows]
    assert run_ats == sorted(run_ats)
    assert [row["id"] for row in rows] == sorted(row["id"] for row in rows)
    assert all(row["run_at"] - row["occurrence_at"] <= timedelta(seconds=300) for row in rows)
    assert _claim_one_by_one(conn, 10) == [at(60 * k) for k in range(1, 11)]
    assert {row["status"] for row in jobs(conn)} == {"succeeded"}


def test_backfill_keeps_the_template_concurrency_key(
    app: tickwork.App, conn: psycopg.Connection[Any], clock: SettableClock
) -> None:
    template = JobTemplate(kind=KIND, concurrency_key="reports")
    app.sync_schedules(
        NS, [every("tick", 60, concurrency_policy=ConcurrencyPolicy.FORBID, job=template)]
    )
    clock.set(at(3600))
    assert app.backfill(NS, "tick", at(60), at(180)).created == 3
    assert {row["concurrency_key"] for row in jobs(conn)} == {"reports"}


def test_backfill_of_an_allow_schedule_runs_side_by_side(
    app: tickwork.App, conn: psycopg.Connection[Any], clock: SettableClock
) -> None:
    app.sync_schedules(NS, [every("tick", 60, jitter_seconds=5)])
    clock.set(at(3600))
    assert app.backfill(NS, "tick", at(60), at(180)).created == 3
    for job in jobs(conn):
        assert job["concurrency_key"] is None
        assert timedelta(0) <= job["run_at"] - job["occurrence_at"] <= timedelta(seconds=5)
    assert len(claim(conn, kinds=[KIND], limit=10, now=at(3600))) == 3


async def test_a_forbid_schedule_fires_nothing_while_its_backfill_is_open(
    app: tickwork.App,
    aconn: psycopg.AsyncConnection[Any],
    conn: psycopg.Connection[Any],
    clock: SettableClock,
) -> None:
    """Backfilled jobs are the schedule's jobs: its regular firing skips (and counts) an
    occurrence while one of them is pending or running, and fires again once they ended."""
    app.sync_schedules(NS, [every("tick", 60, concurrency_policy=ConcurrencyPolicy.FORBID)])
    clock.set(at(30))
    assert app.backfill(NS, "tick", at(-600), at(0)).created == 11
    await fire(aconn, at(60))
    assert schedule(conn, "tick")["skipped_occurrences"] == 1
    _claim_one_by_one(conn, 11)
    await fire(aconn, at(120))
    assert occurrences(conn, "tick")[-1] == at(120)


async def test_a_replace_schedule_replaces_its_backfill_unless_suspended(
    app: tickwork.App,
    aconn: psycopg.AsyncConnection[Any],
    conn: psycopg.Connection[Any],
    clock: SettableClock,
) -> None:
    """The regular firing of a Replace schedule cancels what is left of a backfill, as it
    cancels any previous job; suspended, it fires nothing and the backfill runs through."""
    replace = every("tick", 60, concurrency_policy=ConcurrencyPolicy.REPLACE)
    app.sync_schedules(NS, [dataclasses.replace(replace, suspend=True)])
    clock.set(at(30))
    assert app.backfill(NS, "tick", at(-600), at(0)).created == 11
    await fire(aconn, at(60))
    assert {row["status"] for row in jobs(conn)} == {"available"}
    app.sync_schedules(NS, [replace])
    await fire(aconn, at(120))
    statuses = [row["status"] for row in jobs(conn)]
    assert statuses == ["cancelled"] * 11 + ["available"]


def test_backfill_refuses_what_it_cannot_do(
    app: tickwork.App, conn: psycopg.Connection[Any], clock: SettableClock
) -> None:
    app.sync_schedules(
        NS,
        [
            every("second", 1),
            every("delay", 60, interval_mode=IntervalMode.FIXED_DELAY),
            every("gone", 60),
        ],
    )
    app.sync_schedules(
        NS, [every("second", 1), every("delay", 60, interval_mode=IntervalMode.FIXED_DELAY)]
    )
    clock.set(at(10 * 86400))
    with pytest.raises(InvalidInput) as refused:
        app.backfill(NS, "second", at(0), at(1440))
    assert str(refused.value) == (
        "end: 1,441 occurrences from 2030-01-01T00:00:00+00:00 to 2030-01-01T00:24:00+00:00;"
        " at most 1,000 in one call — split the range"
    )
    with pytest.raises(InvalidInput, match=r"^end: more than 10,000 occurrences from"):
        app.backfill(NS, "second", at(0), at(9 * 86400))
    assert app.backfill(NS, "second", at(1), at(MAX_BACKFILL)).created == MAX_BACKFILL == 1000
    with pytest.raises(InvalidInput, match="future"):
        app.backfill(NS, "second", at(0), at(11 * 86400))
    with pytest.raises(InvalidInput, match="before start"):
        app.backfill(NS, "second", at(60), at(0))
    with pytest.raises(InvalidInput, match="FixedDelay"):
        app.backfill(NS, "delay", at(0), at(600))
    with pytest.raises(InvalidTransition, match="disabled"):
        app.backfill(NS, "gone", at(0), at(600))
    with pytest.raises(ScheduleNotFound):
        app.backfill(NS, "nope", at(0), at(600))
    assert [row["action"] for row in _audit(conn)] == ["disable", "backfill"]  # gone's prune


# --- trigger and run_now --------------------------------------------------------------------------


def test_trigger_creates_one_job_now_outside_the_timetable_and_audits_it(
    app: tickwork.App, conn: psycopg.Connection[Any], clock: SettableClock
) -> None:
    template = JobTemplate(kind="report", payload={"scope": "all"}, priority=4)
    app.sync_schedules(NS, [cron("nightly", "0 2 * * *", job=template, suspend=True)])
    clock.set(at(100))
    job_id = app.trigger(NS, "nightly", actor="bob", reason="rerun", request_id="req-1")
    (job,) = jobs(conn)
    assert job["id"] == job_id
    assert (job["schedule_namespace"], job["schedule_name"], job["occurrence_at"]) == (
        NS,
        "nightly",
        None,
    )
    assert (job["kind"], job["payload"], job["priority"], job["run_at"]) == (
        "report",
        {"scope": "all"},
        4,
        at(100),
    )
    assert (
        app.trigger(NS, "nightly", actor="bob") != job_id
    )  # no occurrence key: a new job each time
    row = schedule(conn, "nightly")
    assert row["last_occurrence_at"] is None
    (entry, _) = _audit(conn)
    assert (entry["actor"], entry["action"], entry["target"]) == (
        "bob",
        "trigger",
        "schedule:ns/nightly",
    )
    assert (entry["reason"], entry["request_id"], entry["details"]) == (
        "rerun",
        "req-1",
        {"job_id": job_id},
    )


def test_trigger_refuses_unknown_and_disabled_schedules(app: tickwork.App) -> None:
    app.sync_schedules(NS, [cron("a", "0 * * * *")])
    app.sync_schedules(NS, [])
    with pytest.raises(InvalidTransition):
        app.trigger(NS, "a", actor="bob")
    with pytest.raises(ScheduleNotFound):
        app.trigger(NS, "b", actor="bob")


async def test_run_now_releases_a_jittered_occurrence_and_audits_it(
    app: tickwork.App,
    aconn: psycopg.AsyncConnection[Any],
    conn: psycopg.Connection[Any],
    clock: SettableClock,
) -> None:
    app.sync_schedules(NS, [every("tick", 600, jitter_seconds=300)])
    await fire(aconn, at(600))
    (job,) = jobs(conn)
    clock.set(at(600))
    app.run_now(job["id"], actor="carol", reason="now please")
    assert jobs(conn)[0]["run_at"] == at(600)
    (entry,) = _audit(conn)
    assert (entry["actor"], entry["action"], entry["target"]) == (
        "carol",
        "run_now",
        f"job:{job['id']}",
    )
