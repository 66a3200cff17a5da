"""Misfire policies (with a starting deadline, and on resume after a suspension) and overlap
policies, through the firing pass, with the skipped occurrences counted per schedule."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

import tickwork
from tests.support.schedule_helpers import KIND, NS, at, every, fire, jobs, occurrences, schedule
from tickwork.clock import SettableClock
from tickwork.db import jobs as jobs_db
from tickwork.db import store
from tickwork.model import Job
from tickwork.schedules.options import ConcurrencyPolicy, MisfirePolicy


def _claim(conn: psycopg.Connection[Any], now_seconds: float) -> list[Job]:
    return store.run(
        conn, jobs_db.claim_jobs("w", ["default"], {KIND: 25}, 10, 30, at(now_seconds))
    )


# --- misfires ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "fired", "skipped"),
    [
        (MisfirePolicy.SKIP, [], 10),
        (MisfirePolicy.LATEST, [600], 9),
        (MisfirePolicy.CATCH_UP, [480, 540, 600], 7),
    ],
)
async def test_occurrences_past_their_deadline_follow_the_misfire_policy(
    app: tickwork.App,
    aconn: psycopg.AsyncConnection[Any],
    conn: psycopg.Connection[Any],
    policy: MisfirePolicy,
    fired: list[int],
    skipped: int,
) -> None:
    app.sync_schedules(
        NS,
        [every("s", 60, starting_deadline_seconds=30, misfire_policy=policy, catch_up_limit=3)],
    )
    report = await fire(aconn, at(640))  # every occurrence 60 ... 600 is over 30 s late
    assert occurrences(conn, "s") == [at(s) for s in fired]
    assert report.skipped == skipped
    row = schedule(conn, "s")
    assert (row["skipped_occurrences"], row["next_run_at"]) == (skipped, at(660))


async def test_latest_fires_no_miss_when_an_occurrence_is_on_time(
    app: tickwork.App, aconn: psycopg.AsyncConnection[Any], conn: psycopg.Connection[Any]
) -> None:
    app.sync_schedules(NS, [every("s", 60, starting_deadline_seconds=30)])
    await fire(aconn, at(610))  # 600 is 10 s late: on time
    assert occurrences(conn, "s") == [at(600)]
    assert schedule(conn, "s")["skipped_occurrences"] == 9


@pytest.mark.parametrize(
    ("policy", "fired", "skipped"),
    [
        (MisfirePolicy.SKIP, [600], 9),
        (MisfirePolicy.LATEST, [600], 9),
        (MisfirePolicy.CATCH_UP, [420, 480, 540, 600], 6),
    ],
)
async def test_without_a_deadline_superseded_occurrences_are_missed(
    app: tickwork.App,
    aconn: psycopg.AsyncConnection[Any],
    conn: psycopg.Connection[Any],
    policy: MisfirePolicy,
    fired: list[int],
    skipped: int,
) -> None:
    app.sync_schedules(NS, [every("s", 60, misfire_policy=policy, catch_up_limit=3)])
    report = await fire(aconn, at(640))  # 60 ... 540 each have a later occurrence due
    assert occurrences(conn, "s") == [at(s) for s in fired]
    assert report.skipped == skipped
    assert schedule(conn, "s")["skipped_occurrences"] == skipped


@pytest.mark.parametrize(
    ("policy", "fired_while_suspended", "skipped"),
    [
        (MisfirePolicy.SKIP, [], 4),
        (MisfirePolicy.LATEST, [300], 3),
        (MisfirePolicy.CATCH_UP, [240, 300], 2),
    ],
)
async def test_resume_after_suspend_starts_from_now_under_the_misfire_policy(
    app: tickwork.App,
    aconn: psycopg.AsyncConnection[Any],
    conn: psycopg.Connection[Any],
    clock: SettableClock,
    policy: MisfirePolicy,
    fired_while_suspended: list[int],
    skipped: int,
) -> None:
    def definition(suspend: bool) -> Any:
        return every("s", 60, suspend=suspend, misfire_policy=policy, catch_up_limit=2)

    app.sync_schedules(NS, [definition(False)])
    await fire(aconn, at(60))
    clock.set(at(90))
    assert app.sync_schedules(NS, [definition(True)]).updated == ["s"]
    assert (await fire(aconn, at(300))).claimed == 0  # suspended: nothing fires
    clock.set(at(330))
    app.sync_schedules(NS, [definition(False)])
    assert schedule(conn, "s")["missed_before"] == at(330)

    await fire(aconn, at(331))  # 120 ... 300 happened while suspended
    assert occurrences(conn, "s") == [at(60)] + [at(s) for s in fired_while_suspended]
    row = schedule(conn, "s")
    assert (row["skipped_occurrences"], row["next_run_at"]) == (skipped, at(360))
    assert row["missed_before"] is None

    await fire(aconn, at(360))  # after the resume, on time as usual
    assert occurrences(conn, "s")[-1] == at(360)


# --- overlap -------------------------------------------------------------------------------------


async def test_allow_fires_whatever_is_open(
    app: tickwork.App, aconn: psycopg.AsyncConnection[Any], conn: psycopg.Connection[Any]
) -> None:
    app.sync_schedules(NS, [every("s", 60)])
    await fire(aconn, at(60))
    _claim(conn, 61)
    await fire(aconn, at(120))
    await fire(aconn, at(180))
    assert occurrences(conn, "s") == [at(60), at(120), at(180)]


async def test_forbid_skips_and_counts_while_a_job_is_open(
    app: tickwork.App,
    aconn: psycopg.AsyncConnection[Any],
    conn: psycopg.Connection[Any],
    clock: SettableClock,
) -> None:
    app.sync_schedules(NS, [every("s", 60, concurrency_policy=ConcurrencyPolicy.FORBID)])
    await fire(aconn, at(60))
    await fire(aconn, at(120))  # pending
    (first,) = _claim(conn, 121)
    await fire(aconn, at(180))  # running
    assert occurrences(conn, "s") == [at(60)]
    assert schedule(conn, "s")["skipped_occurrences"] == 2

    store.run(conn, jobs_db.complete_jobs([first], at(190)))
    report = await fire(aconn, at(300))  # 240 and 300 due, nothing open: only one fires
    assert (report.fired, report.skipped) == (1, 1)
    assert occurrences(conn, "s") == [at(60), at(300)]
    assert schedule(conn, "s")["skipped_occurrences"] == 3


async def test_buffer_one_keeps_one_occurrence_waiting_behind_the_running_job(
    app: tickwork.App, aconn: psycopg.AsyncConnection[Any], conn: psycopg.Connection[Any]
) -> None:
    app.sync_schedules(NS, [every("s", 60, concurrency_policy=ConcurrencyPolicy.BUFFER_ONE)])
    await fire(aconn, at(60))
    (running,) = _claim(conn, 61)
    await fire(aconn, at(120))  # buffered behind the running one
    await fire(aconn, at(180))  # one is waiting already: skipped
    await fire(aconn, at(240))
    assert occurrences(conn, "s") == [at(60), at(120)]
    assert {job["concurrency_key"] for job in jobs(conn, "s")} == {"schedule:ns/s"}
    assert schedule(conn, "s")["skipped_occurrences"] == 2

    assert _claim(conn, 250) == []  # the buffered job waits for the running one
    store.run(conn, jobs_db.complete_jobs([running], at(260)))
    (buffered,) = _claim(conn, 261)
    assert buffered.schedule is not None and buffered.schedule.occurrence_at == at(120)
    await fire(aconn, at(300))  # nothing waiting now: buffered again
    assert occurrences(conn, "s")[-1] == at(300)


async def test_replace_cancels_the_open_job_and_fires(
    app: tickwork.App, aconn: psycopg.AsyncConnection[Any], conn: psycopg.Connection[Any]
) -> None:
    app.sync_schedules(NS, [every("s", 60, concurrency_policy=ConcurrencyPolicy.REPLACE)])
    await fire(aconn, at(60))
    (running,) = _claim(conn, 61)
    report = await fire(aconn, at(180))  # 120 and 180 due: the latest replaces the running job
    assert (report.fired, report.skipped) == (1, 1)
    old, new = jobs(conn, "s")
    # The running job is asked to stop; it runs on until its worker records it cancelled.
    assert (old["status"], old["cancel_requested_at"]) == ("running", at(180))
    assert "replaced" in old["last_error"]
    assert (new["occurrence_at"], new["status"]) == (at(180), "available")
    assert store.run(conn, jobs_db.extend_leases([running], 30, at(185))) == {running.id: True}
    assert store.run(conn, jobs_db.record_cancelled(running, at(186)))
    assert [j["status"] for j in jobs(conn, "s")] == ["cancelled", "available"]
    row = schedule(conn, "s")
    assert (row["last_job_id"], row["skipped_occurrences"]) == (new["id"], 1)


async def test_replace_waits_for_a_job_held_by_someone_else(
    app: tickwork.App,
    aconn: psycopg.AsyncConnection[Any],
    conn: psycopg.Connection[Any],
    database_url: str,
) -> None:
    app.sync_schedules(NS, [every("s", 60, concurrency_policy=ConcurrencyPolicy.REPLACE)])
    await fire(aconn, at(60))
    (job,) = jobs(conn, "s")
    with psycopg.connect(database_url) as holder:
        holder.execute("SELECT 1 FROM tickwork.jobs WHERE id = %s FOR UPDATE", (job["id"],))
        report = await fire(aconn, at(120))
        assert (report.deferred, report.fired) == (1, 0)
        assert schedule(conn, "s")["next_run_at"] == at(120)
        holder.rollback()
    report = await fire(aconn, at(120))
    assert (report.deferred, report.fired) == (0, 1)
    assert [j["status"] for j in jobs(conn, "s")] == ["cancelled", "available"]
