"""Deadlines (spec.deadline, migration 0025): PostgreSQL's deadline of an occurrence against a
minute-by-minute oracle across daylight saving changes; a fired occurrence is watched, a success
by its deadline is on time, anything else is late, recorded once on its schedule and counted;
several worker processes running the duty at once decide each occurrence exactly once; the
Late state clears with the next success. Real PostgreSQL, pinned times."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg.rows import dict_row

import tickwork
from tests.support.forking import process_context
from tests.support.schedule_helpers import NS, T0, at, cron, fire
from tickwork import metrics
from tickwork.db import schedules as schedules_db
from tickwork.db import store
from tickwork.maintenance import deadlines
from tickwork.schedules.deadlines import Deadline

# Daylight saving changes (the same ones tests/schedules/test_occurrences.py checks).
TRANSITIONS = [
    ("America/New_York", "2026-03-08T07:00:00+00:00"),  # 02:00 EST -> 03:00 EDT
    ("America/New_York", "2026-11-01T06:00:00+00:00"),  # 02:00 EDT -> 01:00 EST
    ("Europe/London", "2026-03-29T01:00:00+00:00"),
    ("Europe/London", "2026-10-25T01:00:00+00:00"),
    ("Australia/Lord_Howe", "2026-04-04T15:00:00+00:00"),  # 30-minute change
    ("Australia/Lord_Howe", "2026-10-03T15:30:00+00:00"),
]
MINUTE = timedelta(minutes=1)


def oracle(occurrence: datetime, by: time, tz: ZoneInfo) -> datetime:
    """The documented rule, minute by minute: the first instant after the occurrence at which
    the wall clock reads the deadline's time of day or later (a skipped reading is reached
    when the clock jumps past it, a repeated one the first time), on the first day whose
    reading of that time is after the occurrence's."""
    reading = occurrence.astimezone(tz).replace(tzinfo=None)
    wall = datetime.combine(reading.date(), by)
    if wall <= reading:
        wall += timedelta(days=1)
    moment = occurrence.replace(second=0, microsecond=0)
    while True:
        moment += MINUTE
        if moment.astimezone(tz).replace(tzinfo=None) >= wall:
            return moment


def sql_deadline(conn: psycopg.Connection[Any], occurrence: datetime, spec: str, zone: str) -> Any:
    row = conn.execute(
        "SELECT tickwork.occurrence_deadline(%s, %s::jsonb, %s)", (occurrence, spec, zone)
    ).fetchone()
    assert row is not None
    return row[0]


@pytest.mark.parametrize(("zone", "instant"), TRANSITIONS)
def test_a_time_of_day_deadline_matches_the_oracle_across_daylight_saving(
    conn: psycopg.Connection[Any], zone: str, instant: str
) -> None:
    tz, change = ZoneInfo(zone), datetime.fromisoformat(instant)
    checked = 0
    for hours in range(-4, 3):  # occurrences from 4 hours before the change to 2 after
        for minutes in (0, 29, 45):
            occurrence = change + timedelta(hours=hours, minutes=minutes)
            for by in ("00:00", "00:30", "01:00", "01:30", "01:59", "02:00", "02:15", "02:30",
                       "03:00", "03:30", "23:59"):  # fmt: skip
                expected = oracle(occurrence, time.fromisoformat(by), tz)
                got = sql_deadline(conn, occurrence, f'{{"by": "{by}"}}', zone)
                assert got == expected, (occurrence, by)
                checked += 1
    assert checked == 7 * 3 * 11


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    transition=st.sampled_from(TRANSITIONS),
    offset=st.integers(min_value=-36 * 60, max_value=36 * 60),
    seconds=st.integers(min_value=0, max_value=59),
    hour=st.integers(min_value=0, max_value=23),
    minute=st.integers(min_value=0, max_value=59),
)
def test_any_time_of_day_deadline_near_a_change_matches_the_oracle(
    conn: psycopg.Connection[Any],
    transition: tuple[str, str],
    offset: int,
    seconds: int,
    hour: int,
    minute: int,
) -> None:
    zone, instant = transition
    occurrence = datetime.fromisoformat(instant) + timedelta(minutes=offset, seconds=seconds)
    by = time(hour, minute)
    got = sql_deadline(conn, occurrence, f'{{"by": "{by:%H:%M}"}}', zone)
    assert got == oracle(occurrence, by, ZoneInfo(zone))
    assert got > occurrence


def test_the_rule_at_a_skipped_and_a_repeated_reading(conn: psycopg.Connection[Any]) -> None:
    ny = "America/New_York"
    # 02:30 does not exist on 2026-03-08: reached when the clock jumps to 03:00 EDT (07:00Z).
    skipped = sql_deadline(conn, datetime(2026, 3, 8, 5, tzinfo=UTC), '{"by": "02:30"}', ny)
    assert skipped == datetime(2026, 3, 8, 7, tzinfo=UTC)
    # 01:30 happens twice on 2026-11-01: the first time (01:30 EDT, 05:30Z).
    twice = sql_deadline(conn, datetime(2026, 11, 1, 4, tzinfo=UTC), '{"by": "01:30"}', ny)
    assert twice == datetime(2026, 11, 1, 5, 30, tzinfo=UTC)
    # An occurrence in the second 01:00-02:00 (01:10 EST): 01:30 EST, 20 minutes later.
    second = sql_deadline(conn, datetime(2026, 11, 1, 6, 10, tzinfo=UTC), '{"by": "01:30"}', ny)
    assert second == datetime(2026, 11, 1, 6, 30, tzinfo=UTC)
    # At the deadline's own time: the next day's.
    same = sql_deadline(conn, datetime(2026, 1, 5, 6, tzinfo=UTC), '{"by": "06:00"}', "UTC")
    assert same == datetime(2026, 1, 6, 6, tzinfo=UTC)


def test_a_relative_deadline_and_values_it_does_not_know(conn: psycopg.Connection[Any]) -> None:
    occurrence = datetime(2026, 3, 8, 6, 30, tzinfo=UTC)
    within = sql_deadline(conn, occurrence, '{"succeedWithinSeconds": 5400}', "America/New_York")
    assert within == occurrence + timedelta(seconds=5400)  # real seconds, whatever the clock
    for unknown in ("{}", '{"by": 6}', '{"succeedWithinSeconds": "60"}', "null"):
        assert sql_deadline(conn, occurrence, unknown, "UTC") is None


# -- the duty ------------------------------------------------------------------------------


def _sync(app: tickwork.App, name: str = "nightly", **fields: Any) -> None:
    app.sync_schedules(NS, [cron(name, "0 5 * * *", **fields)])


def _insert_occurrence(
    conn: psycopg.Connection[Any], occurrence: datetime, name: str = "nightly"
) -> int:
    row = conn.execute(
        "INSERT INTO tickwork.jobs (kind, schedule_namespace, schedule_name, occurrence_at) "
        "VALUES ('s.job', %s, %s, %s) RETURNING id",
        (NS, name, occurrence),
    ).fetchone()
    assert row is not None
    return int(row[0])


def _end(conn: psycopg.Connection[Any], job_id: int, status: str, finished: datetime) -> None:
    conn.execute(
        "UPDATE tickwork.jobs SET status = %s, finished_at = %s WHERE id = %s",
        (status, finished, job_id),
    )


def _check(database_url: str, now: datetime) -> list[Any]:
    async def run() -> list[Any]:
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as c:
            return await deadlines.DeadlineCheck().run_once(c, now)

    return asyncio.run(run())


async def _fire(database_url: str, now: datetime) -> None:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as c:
        await fire(c, now)


def _row(app: tickwork.App, name: str = "nightly") -> schedules_db.ScheduleRow:
    return app.get_schedule(NS, name)


def _missed(name: str = "nightly") -> float:
    value = metrics.SCHEDULE_DEADLINES_MISSED.labels(NS, name)._value.get()
    return float(value)


def test_a_fired_occurrence_is_watched_and_a_success_in_time_is_not_late(
    app: tickwork.App, conn: psycopg.Connection[Any], database_url: str
) -> None:
    _sync(app, deadline=Deadline(succeed_within_seconds=600))
    asyncio.run(_fire(database_url, at(5 * 3600)))  # the 05:00 occurrence, fired by a worker
    with conn.cursor(row_factory=dict_row) as cur:
        watched = cur.execute("SELECT * FROM tickwork.occurrence_deadlines").fetchall()
    assert [(w["occurrence_at"], w["deadline_at"]) for w in watched] == [
        (at(5 * 3600), at(5 * 3600 + 600))
    ]
    _end(conn, watched[0]["job_id"], "succeeded", at(5 * 3600 + 599))
    assert _check(database_url, at(5 * 3600 + 599)) == []  # not passed yet: undecided
    decided = _check(database_url, at(5 * 3600 + 600))
    assert [(d.job_id, d.late) for d in decided] == [(watched[0]["job_id"], False)]
    row = _row(app)
    assert (row.deadlines_missed, row.late) == (0, False)
    assert _check(database_url, at(9 * 3600)) == []  # decided once


@pytest.mark.parametrize("outcome", ["late success", "dead", "still running", "deleted"])
def test_an_occurrence_without_a_success_by_its_deadline_is_late_once(
    app: tickwork.App, conn: psycopg.Connection[Any], database_url: str, outcome: str
) -> None:
    _sync(app, deadline=Deadline(by="06:00"), time_zone="Europe/London")
    occurrence = T0 + timedelta(hours=5)
    job = _insert_occurrence(conn, occurrence)
    deadline = T0 + timedelta(hours=6)  # January: London is UTC
    if outcome == "late success":
        _end(conn, job, "succeeded", deadline + timedelta(seconds=1))
    elif outcome == "dead":
        _end(conn, job, "dead", deadline - timedelta(minutes=1))
    elif outcome == "deleted":  # retention (or a history limit of 0) deleted it first
        _end(conn, job, "dead", deadline - timedelta(minutes=1))
        conn.execute("DELETE FROM tickwork.jobs WHERE id = %s", (job,))
    before = _missed()

    decided = _check(database_url, deadline + timedelta(seconds=3))

    assert [(d.job_id, d.occurrence_at, d.deadline_at, d.late) for d in decided] == [
        (job, occurrence, deadline, True)
    ]
    row = _row(app)
    assert (row.deadlines_missed, row.late_occurrence_at, row.late_job_id) == (1, occurrence, job)
    assert row.late_deadline_at == deadline
    assert row.late is (outcome != "late success")  # its own success came after the deadline
    assert _missed() == before + 1
    assert _check(database_url, deadline + timedelta(hours=1)) == []
    assert _row(app).deadlines_missed == 1


def test_late_clears_with_the_next_success(
    app: tickwork.App, conn: psycopg.Connection[Any], database_url: str
) -> None:
    _sync(app, deadline=Deadline(succeed_within_seconds=60))
    first = _insert_occurrence(conn, at(0))
    _end(conn, first, "dead", at(30))
    _check(database_url, at(61))
    assert _row(app).late
    second = _insert_occurrence(conn, at(3600))
    _end(conn, second, "succeeded", at(3610))
    assert not _row(app).late
    assert _row(app).deadlines_missed == 1


def test_a_schedule_without_a_deadline_is_not_watched(
    app: tickwork.App, conn: psycopg.Connection[Any]
) -> None:
    _sync(app)
    _insert_occurrence(conn, at(0))
    conn.execute("INSERT INTO tickwork.jobs (kind) VALUES ('plain')")
    count = conn.execute("SELECT count(*) FROM tickwork.occurrence_deadlines").fetchone()
    assert count == (0,)


def test_one_insert_of_many_occurrences_watches_those_of_schedules_with_a_deadline(
    app: tickwork.App, conn: psycopg.Connection[Any]
) -> None:
    """The deadlines are noted once per statement (migration 0030): of one INSERT holding
    occurrences of a schedule with a deadline, of one without, of a schedule that does not
    exist and a job of no schedule, only the first's are watched, each with its own deadline."""
    app.sync_schedules(
        NS,
        [
            cron("nightly", "0 5 * * *", deadline=Deadline(succeed_within_seconds=600)),
            cron("hourly", "0 * * * *"),
        ],
    )
    rows = conn.execute(
        "INSERT INTO tickwork.jobs (kind, schedule_namespace, schedule_name, occurrence_at) "
        "SELECT 's.job', %s, name, %s::timestamptz + make_interval(days => day) "
        "FROM unnest(%s::text[]) AS name CROSS JOIN generate_series(0, 2) AS day "
        "UNION ALL SELECT 'plain', NULL, NULL, NULL RETURNING id, schedule_name, occurrence_at",
        (NS, at(5 * 3600), ["nightly", "hourly", "gone"]),
    ).fetchall()
    nightly = {job_id: occurrence for job_id, name, occurrence in rows if name == "nightly"}
    watched = conn.execute(
        "SELECT job_id, occurrence_at, deadline_at FROM tickwork.occurrence_deadlines"
    ).fetchall()
    assert len(rows) == 10 and len(nightly) == 3
    assert sorted(watched) == sorted(
        (job_id, occurrence, occurrence + timedelta(seconds=600))
        for job_id, occurrence in nightly.items()
    )


def _race(database_url: str, now: str, results: Any, barrier: Any) -> None:
    async def run() -> int:
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as c:
            barrier.wait()
            check = deadlines.DeadlineCheck(deadlines.DeadlineCheckConfig(batch=7))
            decided = await check.run_once(c, datetime.fromisoformat(now))
            return sum(1 for d in decided if d.late)

    results.put(asyncio.run(run()))


def test_workers_racing_on_the_duty_decide_each_occurrence_once(
    app: tickwork.App, conn: psycopg.Connection[Any], database_url: str
) -> None:
    names = [f"s{i}" for i in range(5)]
    app.sync_schedules(
        NS, [cron(n, "0 5 * * *", deadline=Deadline(succeed_within_seconds=60)) for n in names]
    )
    jobs = [
        _insert_occurrence(conn, at(minute * 60), name) for minute in range(40) for name in names
    ]
    for job in jobs[::3]:  # a third succeed in time, the rest are late
        _end(conn, job, "succeeded", T0)
    late = len(jobs) - len(jobs[::3])
    spawn = process_context()
    results, barrier = spawn.Queue(), spawn.Barrier(4)
    processes = [
        spawn.Process(target=_race, args=(database_url, at(3 * 3600).isoformat(), results, barrier))
        for _ in range(4)
    ]
    for process in processes:
        process.start()
    counts = [results.get(timeout=120) for _ in processes]
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0
    assert sum(counts) == late
    assert sum(_row(app, n).deadlines_missed for n in names) == late
    left = conn.execute("SELECT count(*) FROM tickwork.occurrence_deadlines").fetchone()
    assert left == (0,)


def test_the_duty_is_registered_with_the_fleet(database_url: str) -> None:
    from tests.support.helpers import settings as worker_settings
    from tickwork.maintenance.duties import fleet_duties

    names = [d.name for d in fleet_duties(worker_settings(database_url), metrics.JobMeters())]
    assert "check_deadlines" in names
    with psycopg.connect(database_url) as c:
        assert c.execute(
            "SELECT count(*) FROM tickwork.duties WHERE name = 'check_deadlines'"
        ).fetchone() == (1,)


def test_the_row_reads_the_new_columns(app: tickwork.App) -> None:
    _sync(app)
    with app.connection() as c:
        (row,) = store.run(c, schedules_db.list_schedules(NS, "nightly"))
    assert (row.dead_streak, row.deadlines_missed, row.late) == (0, 0, False)
