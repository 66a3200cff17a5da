"""Calendars in the firing pass: an excluded occurrence never gets a job, whether fired on
time, caught up after an outage by several processes racing, backfilled or fired by hand;
next_run_at (what status and KEDA read) skips it; a FixedDelay due time inside an excluded
stretch moves past it; after endTime the schedule has no next run and fires nothing."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg
import pytest

import tickwork
from tests.support.forking import process_context
from tests.support.helpers import T0, stop_processes
from tests.support.schedule_helpers import (
    NS,
    at,
    cron,
    every,
    fire,
    fire_in_process,
    jobs,
    occurrences,
    schedule,
)
from tickwork.clock import SettableClock
from tickwork.errors import InvalidInput
from tickwork.schedules.options import IntervalMode, MisfirePolicy

HOUR = 3600
DAY = 24 * HOUR
# T0 is Tuesday 2030-01-01 00:00 UTC.
NIGHT = "* 0-5 * * *"  # no occurrence from 00:00 to 05:59
WEDNESDAY = "2030-01-02"


def hours(*values: float) -> list[Any]:
    return [at(h * HOUR) for h in values]


async def test_an_excluded_occurrence_never_fires_and_next_run_skips_it(
    app: tickwork.App, aconn: psycopg.AsyncConnection[Any], conn: psycopg.Connection[Any]
) -> None:
    app.sync_schedules(NS, [cron("hourly", "0 * * * *", exclude=(NIGHT, WEDNESDAY))])
    assert schedule(conn, "hourly")["next_run_at"] == at(6 * HOUR)
    for hour in range(1, 6):  # inside the excluded night: nothing is due
        report = await fire(aconn, at(hour * HOUR + 1))
        assert report.claimed == 0
    await fire(aconn, at(6 * HOUR + 1))
    assert occurrences(conn, "hourly") == hours(6)
    for hour in range(7, 24):
        await fire(aconn, at(hour * HOUR + 1))
    assert occurrences(conn, "hourly") == hours(*range(6, 24))
    # Wednesday is excluded whole: the next run is Thursday 06:00.
    assert schedule(conn, "hourly")["next_run_at"] == at(2 * DAY + 6 * HOUR)


def test_racing_processes_catch_up_an_outage_without_an_excluded_occurrence(
    app: tickwork.App, database_url: str, conn: psycopg.Connection[Any]
) -> None:
    """Down for three days, back with CatchUp: four processes fire at once; every kept
    occurrence fires exactly once, no excluded one at all."""
    definition = cron(
        "hourly",
        "0 * * * *",
        exclude=(NIGHT, WEDNESDAY),
        misfire_policy=MisfirePolicy.CATCH_UP,
        catch_up_limit=1000,
    )
    app.sync_schedules(NS, [definition])
    back = (T0 + timedelta(days=3, minutes=30)).isoformat()
    ctx = process_context()
    processes = [
        ctx.Process(target=fire_in_process, args=(database_url, back), daemon=True)
        for _ in range(4)
    ]
    for process in processes:
        process.start()
    try:
        for process in processes:
            process.join(timeout=120)
            assert process.exitcode == 0
    finally:
        stop_processes(processes)
    expected = [
        at(day * DAY + hour * HOUR) for day in (0, 2) for hour in range(6, 24)
    ]  # Tuesday and Thursday, 06:00-23:00; Wednesday and every night excluded
    fired = occurrences(conn, "hourly")
    assert fired == expected
    assert len(jobs(conn)) == len(expected)
    assert schedule(conn, "hourly")["next_run_at"] == at(3 * DAY + 6 * HOUR)


def test_backfill_and_a_single_fire_skip_excluded_occurrences(
    app: tickwork.App, conn: psycopg.Connection[Any], clock: SettableClock
) -> None:
    app.sync_schedules(NS, [cron("hourly", "0 * * * *", exclude=(NIGHT,))])
    clock.set(at(2 * DAY))
    report = app.backfill(NS, "hourly", at(3 * HOUR), at(8 * HOUR))
    assert (report.created, report.existing) == (3, 0)
    assert occurrences(conn, "hourly") == hours(6, 7, 8)
    revision = schedule(conn, "hourly")["revision"]
    with pytest.raises(InvalidInput, match="is not an occurrence"):
        app.fire_schedule(NS, "hourly", revision, at(DAY + 2 * HOUR))
    assert app.fire_schedule(NS, "hourly", revision, at(DAY + 9 * HOUR)) is not None


async def test_nothing_fires_after_end_time_and_the_schedule_has_no_next_run(
    app: tickwork.App, aconn: psycopg.AsyncConnection[Any], conn: psycopg.Connection[Any]
) -> None:
    app.sync_schedules(
        NS, [cron("hourly", "0 * * * *", start_time=at(2 * HOUR), end_time=at(4 * HOUR))]
    )
    assert schedule(conn, "hourly")["next_run_at"] == at(2 * HOUR)
    for hour in range(1, 8):
        await fire(aconn, at(hour * HOUR + 1))
    assert occurrences(conn, "hourly") == hours(2, 3, 4)  # both ends included
    assert schedule(conn, "hourly")["next_run_at"] is None


def test_a_schedule_synced_after_its_end_time_has_no_next_run(
    app: tickwork.App, conn: psycopg.Connection[Any]
) -> None:
    app.sync_schedules(NS, [cron("over", "0 * * * *", end_time=T0 - timedelta(days=1))])
    assert schedule(conn, "over")["next_run_at"] is None


async def test_a_fixed_delay_due_time_in_an_excluded_stretch_moves_past_it(
    app: tickwork.App,
    aconn: psycopg.AsyncConnection[Any],
    conn: psycopg.Connection[Any],
    clock: SettableClock,
) -> None:
    """Every 2h after the previous run ends; a due time inside the night moves by whole
    steps of 2h to the first one outside it."""
    definition = every(
        "delayed", 2 * HOUR, interval_mode=IntervalMode.FIXED_DELAY, exclude=(NIGHT,)
    )
    clock.set(at(-3 * HOUR))  # Monday 21:00
    app.sync_schedules(NS, [definition])
    assert schedule(conn, "delayed")["next_run_at"] == at(-HOUR)  # 23:00
    await fire(aconn, at(-HOUR))
    assert occurrences(conn, "delayed") == [at(-HOUR)]
    clock.set(at(-HOUR / 2))  # its job ends at 23:30: due at 01:30, excluded
    app.cancel(jobs(conn, "delayed")[0]["id"])
    assert schedule(conn, "delayed")["next_run_at"] == at(1.5 * HOUR)
    report = await fire(aconn, at(1.5 * HOUR + 1))
    assert report.fired == 0
    assert schedule(conn, "delayed")["next_run_at"] == at(7.5 * HOUR)  # 01:30 + 3 x 2h
    await fire(aconn, at(7.5 * HOUR))
    assert occurrences(conn, "delayed") == [at(-HOUR), at(7.5 * HOUR)]
