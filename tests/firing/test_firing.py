"""The firing pass: due occurrences become jobs with their occurrence key, in the offered
namespaces only; cron in a time zone, fixed rate, fixed delay, jitter, carried state, racing
passes, backlogs settled over several passes, and many schedules over several batches.
A schedule whose firing fails is set aside with its error while the rest fires: an unreadable
stored spec, an error while planning it, a value PostgreSQL refuses, a trigger; it backs off,
counts, logs, and a firing that works or a sync clears it; a lost connection still aborts."""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import REGISTRY

import tickwork
from tests.support.helpers import opened, running, wait_status
from tests.support.helpers import settings as worker_settings
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
from tickwork.db import schedules as schedules_db
from tickwork.db import store
from tickwork.maintenance import firing
from tickwork.model import Backoff, JobId
from tickwork.schedules import policies
from tickwork.schedules.definition import ScheduleDefinition
from tickwork.schedules.options import IntervalMode, JobTemplate
from tickwork.worker.runner import Worker


async def test_a_due_occurrence_becomes_one_job_with_its_occurrence_key(
    app: tickwork.App, aconn: psycopg.AsyncConnection[Any], conn: psycopg.Connection[Any]
) -> None:
    template = JobTemplate(
        kind="report.nightly",
        queue="reports",
        payload={"scope": "due"},
        priority=7,
        max_attempts=3,
        retry=Backoff(2, 2, 20),
        timeout_seconds=60,
        concurrency_key="reports",
    )
    app.sync_schedules(NS, [cron("nightly", "*/5 * * * *", job=template)])

    assert await fire(aconn, at(299)) == firing.FireReport()  # not due yet
    assert jobs(conn) == []

    report = await fire(aconn, at(300.2))
    assert (report.claimed, report.fired, report.skipped) == (1, 1, 0)
    (job,) = jobs(conn)
    assert (job["schedule_namespace"], job["schedule_name"]) == (NS, "nightly")
    assert job["occurrence_at"] == job["run_at"] == at(300)
    assert (job["kind"], job["queue"], job["payload"]) == (
        "report.nightly",
        "reports",
        {"scope": "due"},
    )
    assert (job["priority"], job["max_attempts"], job["timeout_seconds"]) == (7, 3, 60)
    assert (job["retry_base_seconds"], job["retry_rate"], job["retry_max_seconds"]) == (2, 2, 20)
    assert (job["concurrency_key"], job["status"]) == ("reports", "available")
    row = schedule(conn, "nightly")
    assert row["next_run_at"] == at(600)
    assert (row["last_occurrence_at"], row["last_job_id"]) == (at(300), job["id"])

    assert (await fire(aconn, at(301))).claimed == 0  # advanced: nothing due until 00:10
    assert len(jobs(conn)) == 1


async def test_a_worker_fires_only_the_namespaces_it_offers(
    app: tickwork.App, aconn: psycopg.AsyncConnection[Any], conn: psycopg.Connection[Any]
) -> None:
    for namespace in ("billing", "reports", "other"):
        app.sync_schedules(namespace, [every("tick", 60)])
    assert await fire(aconn, at(60), ()) == firing.FireReport()
    await fire(aconn, at(60), ("billing", "reports"))
    fired = {r[0] for r in conn.execute("SELECT schedule_namespace FROM tickwork.jobs")}
    assert fired == {"billing", "reports"}
    assert schedule(conn, "tick", "other")["next_run_at"] == at(60)


async def test_cron_is_read_in_the_schedule_time_zone_across_daylight_saving(
    app: tickwork.App,
    aconn: psycopg.AsyncConnection[Any],
    conn: psycopg.Connection[Any],
    clock: SettableClock,
) -> None:
    clock.set(datetime(2030, 3, 9, 12, tzinfo=UTC))
    app.sync_schedules(
        NS,
        [
            cron("berlin", "30 9 * * *", time_zone="Europe/Berlin"),
            # 2030-03-10 02:30 does not exist in New York: it fires once, at 03:00 EDT.
            cron("new-york", "30 2 * * *", time_zone="America/New_York"),
        ],
    )
    await fire(aconn, datetime(2030, 3, 11, tzinfo=UTC))
    assert occurrences(conn, "berlin") == [datetime(2030, 3, 10, 8, 30, tzinfo=UTC)]
    assert occurrences(conn, "new-york") == [datetime(2030, 3, 10, 7, 0, tzinfo=UTC)]
    assert schedule(conn, "new-york")["next_run_at"] == datetime(2030, 3, 11, 6, 30, tzinfo=UTC)


async def test_fixed_rate_fires_every_anchored_occurrence(
    app: tickwork.App, aconn: psycopg.AsyncConnection[Any], conn: psycopg.Connection[Any]
) -> None:
    app.sync_schedules(NS, [every("tick", 10, starting_deadline_seconds=60)])
    await fire(aconn, at(10))
    await fire(aconn, at(35))  # late, within the deadline: 20 and 30 still fire
    assert occurrences(conn, "tick") == [at(10), at(20), at(30)]
    assert schedule(conn, "tick")["next_run_at"] == at(40)


async def test_fixed_delay_waits_for_the_job_to_finish(
    app: tickwork.App,
    aconn: psycopg.AsyncConnection[Any],
    conn: psycopg.Connection[Any],
    clock: SettableClock,
) -> None:
    app.sync_schedules(NS, [every("poll", 45, interval_mode=IntervalMode.FIXED_DELAY)])
    await fire(aconn, at(45))
    assert schedule(conn, "poll")["next_run_at"] is None  # wait for the job
    assert (await fire(aconn, at(1000))).claimed == 0

    # The job succeeds at 100 s (the worker's completion write): next run 45 s later.
    (job,) = store.run(conn, jobs_db.claim_jobs("w", ["default"], {KIND: 25}, 10, 30, at(50)))
    with conn.transaction():
        store.run(conn, jobs_db.complete_jobs([job], at(100)))
    assert schedule(conn, "poll")["next_run_at"] == at(145)
    assert schedule(conn, "poll")["last_success_at"] == at(100)

    # A cancelled (or dead) job ends the wait as well.
    await fire(aconn, at(150))
    (_, second) = jobs(conn, "poll")
    assert second["occurrence_at"] == at(145)
    clock.set(at(170))
    app.cancel(second["id"])
    row = schedule(conn, "poll")
    assert (row["next_run_at"], row["last_job_status"]) == (at(215), "cancelled")


async def test_jitter_delays_run_at_by_a_stable_bounded_amount(
    app: tickwork.App, aconn: psycopg.AsyncConnection[Any], conn: psycopg.Connection[Any]
) -> None:
    app.sync_schedules(NS, [every("spread", 60, jitter_seconds=30, starting_deadline_seconds=600)])
    await fire(aconn, at(600))
    fired = jobs(conn, "spread")
    assert len(fired) == 10
    for job in fired:
        delay = job["run_at"] - job["occurrence_at"]
        assert timedelta(0) <= delay <= timedelta(seconds=30)
        assert delay == policies.jitter(NS, "spread", job["occurrence_at"], 30)
    assert len({job["run_at"] - job["occurrence_at"] for job in fired}) > 1


async def test_a_return_value_is_carried_as_the_payload_of_the_next_occurrences(
    database_url: str,
    app: tickwork.App,
    aconn: psycopg.AsyncConnection[Any],
    conn: psycopg.Connection[Any],
    clock: SettableClock,
) -> None:
    template = JobTemplate(kind="s.count", payload={"n": 0})
    app.sync_schedules(NS, [every("counter", 60, job=template)])

    @app.task("s.count")
    async def count(job: tickwork.Job) -> Any:
        n = job.payload["n"]
        return None if n == 2 else {"n": n + 1}

    worker = Worker(app, worker_settings(database_url), clock=clock)
    async with running(worker):
        for minute, expected in ((1, 0), (2, 1), (3, 2), (4, 2)):
            clock.set(at(60 * minute))
            await fire(aconn, at(60 * minute))
            job = jobs(conn, "counter")[-1]
            assert job["payload"] == {"n": expected}
            await wait_status(aconn, job["id"], "succeeded")
    row = schedule(conn, "counter")
    assert row["state"] == {"n": 2}  # the None returned at n == 2 kept the state
    assert (row["last_job_status"], row["last_success_at"]) == ("succeeded", at(240))


async def test_a_return_value_that_is_not_json_is_not_carried(
    database_url: str,
    app: tickwork.App,
    aconn: psycopg.AsyncConnection[Any],
    conn: psycopg.Connection[Any],
    clock: SettableClock,
) -> None:
    app.sync_schedules(NS, [every("odd", 60, job=JobTemplate(kind="s.odd"))])

    @app.task("s.odd")
    async def odd(job: tickwork.Job) -> Any:
        return {1, 2}

    clock.set(at(60))
    await fire(aconn, at(60))
    async with running(Worker(app, worker_settings(database_url), clock=clock)):
        await wait_status(aconn, jobs(conn, "odd")[0]["id"], "succeeded")
    assert schedule(conn, "odd")["state"] is None


async def test_the_worker_fires_the_namespaces_it_offers_on_its_own(
    database_url: str, app: tickwork.App, conn: psycopg.Connection[Any]
) -> None:
    # The database clock: sync now, the first occurrence is at most 1 s away.
    real = tickwork.App(database_url)
    real.sync_schedules(NS, [every("tick", 1)])
    real.sync_schedules("elsewhere", [every("tick", 1)])
    worker = Worker(real, worker_settings(database_url, namespaces=(NS,)))
    try:
        async with running(worker):
            for _ in range(200):
                if len(jobs(conn)) >= 2:
                    break
                await asyncio.sleep(0.05)
    finally:
        real.close()
    fired = jobs(conn)
    assert len(fired) >= 2
    assert {job["schedule_namespace"] for job in fired} == {NS}
    lag = max(job["created_at"] - job["occurrence_at"] for job in fired)
    assert lag < timedelta(seconds=1)


async def test_a_worker_without_notifications_sees_a_sync_within_its_poll_interval(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    """Behind a transaction pooler without --listen-url no sync notification comes: the
    firing loop looks again every --poll-seconds, not only at its 30 s cap. (No pooler is
    needed to show it: --pooler transaction alone keeps the worker from LISTENing.)"""
    poll_seconds = 0.5
    real = tickwork.App(database_url)
    worker = Worker(
        real,
        worker_settings(
            database_url, namespaces=(NS,), pooler="transaction", poll_seconds=poll_seconds
        ),
    )
    try:
        async with running(worker):
            await asyncio.sleep(4 * poll_seconds)  # its first pass found nothing: it sleeps
            real.sync_schedules(NS, [every("tick", 1)])
            for _ in range(200):  # 10 s: well under the 30 s cap
                if jobs(conn):
                    break
                await asyncio.sleep(0.05)
    finally:
        real.close()
    assert jobs(conn), "the new schedule did not fire within 10 s of its sync"


async def test_racing_passes_make_one_job_per_occurrence(
    app: tickwork.App, database_url: str, conn: psycopg.Connection[Any]
) -> None:
    backlog = 3600  # a deadline keeps the backlog: every occurrence still fires
    app.sync_schedules(
        NS, [every(f"s{i}", 1, starting_deadline_seconds=backlog) for i in range(40)]
    )
    connections = [
        await psycopg.AsyncConnection.connect(database_url, autocommit=True) for _ in range(4)
    ]
    try:
        small = firing.FiringConfig(batch=5)
        reports = await asyncio.gather(
            *(firing.run_once(c, [NS], at(30), config=small) for c in connections)
        )
    finally:
        for c in connections:
            await c.close()
    assert sum(r.fired for r in reports) == 40 * 30
    counts = conn.execute(
        "SELECT count(*), count(DISTINCT (schedule_name, occurrence_at)) FROM tickwork.jobs"
    ).fetchone()
    assert counts == (1200, 1200)


async def test_a_backlog_is_settled_over_several_passes(
    app: tickwork.App, aconn: psycopg.AsyncConnection[Any], conn: psycopg.Connection[Any]
) -> None:
    within = 3600  # a deadline keeps the backlog: every occurrence still fires
    app.sync_schedules(
        NS, [every("busy", 1, starting_deadline_seconds=within), every("quiet", 3600)]
    )
    config = firing.FiringConfig(chunk=100, budget=150)
    report = await firing.run_once(aconn, [NS], at(1000), config=config)
    assert report.fired == 1000
    assert occurrences(conn, "busy") == [at(s) for s in range(1, 1001)]
    assert schedule(conn, "busy")["next_run_at"] == at(1001)


async def test_more_due_schedules_than_a_batch_are_fired_batch_after_batch(
    app: tickwork.App, aconn: psycopg.AsyncConnection[Any], conn: psycopg.Connection[Any]
) -> None:
    app.sync_schedules(NS, [every(f"s{i:02}", 60) for i in range(23)])
    report = await firing.run_once(aconn, [NS], at(60), config=firing.FiringConfig(batch=5))
    assert (report.claimed, report.fired) == (23, 23)
    assert len(jobs(conn)) == 23


async def test_suspended_and_disabled_schedules_do_not_fire(
    app: tickwork.App, aconn: psycopg.AsyncConnection[Any], conn: psycopg.Connection[Any]
) -> None:
    app.sync_schedules(NS, [every("paused", 60, suspend=True), every("gone", 60)])
    app.sync_schedules(NS, [every("paused", 60, suspend=True)])
    assert (await fire(aconn, at(600))).claimed == 0
    assert jobs(conn) == []


async def test_the_cache_follows_revisions(
    app: tickwork.App,
    aconn: psycopg.AsyncConnection[Any],
    conn: psycopg.Connection[Any],
    clock: SettableClock,
) -> None:
    cache = firing.DefinitionCache()
    app.sync_schedules(NS, [every("a", 60, job=JobTemplate(kind=KIND, payload={"v": 1}))])
    await firing.run_once(aconn, [NS], at(60), cache=cache)
    clock.set(at(61))
    app.sync_schedules(NS, [every("a", 60, job=JobTemplate(kind=KIND, payload={"v": 2}))])
    await firing.run_once(aconn, [NS], at(120), cache=cache)
    assert [job["payload"] for job in jobs(conn, "a")] == [{"v": 1}, {"v": 2}]
    assert cache.get(NS, "a", spec_key(conn, "a")) is not None


def spec_key(conn: psycopg.Connection[Any], name: str) -> str:
    """The key the firing claim reads for the stored spec of ``name``."""
    row = conn.execute(
        "SELECT spec_key FROM tickwork.schedules WHERE namespace = %s AND name = %s",
        (NS, name),
    ).fetchone()
    assert row is not None
    return str(row[0])


async def test_schedules_with_equal_specs_share_one_parsed_definition(
    app: tickwork.App, aconn: psycopg.AsyncConnection[Any], conn: psycopg.Connection[Any]
) -> None:
    app.sync_schedules(NS, [every(f"s{i}", 60) for i in range(5)] + [every("other", 120)])
    cache = firing.DefinitionCache()
    report = await firing.run_once(aconn, [NS], at(600), cache=cache)
    assert report.fired == 6
    shared = cache.get(NS, "s0", spec_key(conn, "s0"))
    assert shared is not None and shared is cache.get(NS, "s4", spec_key(conn, "s4"))
    assert cache.get(NS, "other", spec_key(conn, "other")) is not shared
    names = {job["schedule_name"] for job in jobs(conn)}
    assert names == {"s0", "s1", "s2", "s3", "s4", "other"}, "each job carries its own name"


async def test_hashed_cron_fields_are_parsed_per_name(
    app: tickwork.App, aconn: psycopg.AsyncConnection[Any], conn: psycopg.Connection[Any]
) -> None:
    template = JobTemplate(kind=KIND)
    app.sync_schedules(
        NS, [ScheduleDefinition(name=n, job=template, schedule="H * * * *") for n in "ab"]
    )
    cache = firing.DefinitionCache()
    await firing.run_once(aconn, [NS], at(7200), cache=cache)
    a, b = (cache.get(NS, n, spec_key(conn, n)) for n in "ab")
    assert spec_key(conn, "a") == spec_key(conn, "b")
    assert a is not None and b is not None and a is not b
    assert a.definition.name == "a" and b.definition.name == "b"


async def test_the_stored_spec_key_follows_the_spec_and_not_the_firings(
    app: tickwork.App, aconn: psycopg.AsyncConnection[Any], conn: psycopg.Connection[Any]
) -> None:
    """The claim and the warming read the spec key stored with the row (migration 0016): it
    is the hash of the spec as stored, written with the spec, untouched by a firing."""

    def keys() -> dict[str, tuple[str, str]]:
        rows = conn.execute(
            "SELECT name, spec_key, md5(spec::text) FROM tickwork.schedules WHERE namespace = %s",
            (NS,),
        ).fetchall()
        return {name: (stored, computed) for name, stored, computed in rows}

    app.sync_schedules(NS, [every("a", 60), every("b", 60), every("c", 120)])
    first = keys()
    assert all(stored == computed for stored, computed in first.values())
    assert first["a"] == first["b"] != first["c"], "equal specs, equal keys"

    assert (await fire(aconn, at(120))).fired == 3
    assert keys() == first, "a firing's advance leaves the key as it was"

    app.sync_schedules(NS, [every("a", 30), every("b", 60), every("c", 120)])
    second = keys()
    assert second["a"][0] != first["a"][0] and second["a"][0] == second["a"][1]
    assert second["b"] == first["b"] and second["c"] == first["c"]


async def test_warming_parses_the_schedules_due_next_ahead_of_time(
    app: tickwork.App, aconn: psycopg.AsyncConnection[Any], conn: psycopg.Connection[Any]
) -> None:
    app.sync_schedules(NS, [every("soon", 60), every("later", 3600)])
    cache = firing.DefinitionCache()
    forever = time.monotonic() + 60

    cut = await firing.warm(aconn, [NS], cache, at(600), time.monotonic() - 1)
    assert cut == firing.Warmed(0, None)
    soon, later = spec_key(conn, "soon"), spec_key(conn, "later")
    assert cache.get(NS, "soon", soon) is None, "a deadline already passed parses nothing"

    assert await firing.warm(aconn, [NS], cache, at(600), forever) == firing.Warmed(1, at(600))
    assert cache.get(NS, "soon", soon) is not None
    assert cache.get(NS, "later", later) is None, "not due before the horizon"
    again = await firing.warm(aconn, [NS], cache, at(600), forever)
    assert again == firing.Warmed(0, at(600)), "cached already"


async def test_warming_after_a_horizon_reads_only_what_is_due_after_it(
    app: tickwork.App, aconn: psycopg.AsyncConnection[Any], conn: psycopg.Connection[Any]
) -> None:
    # A loop warming again while busy lists only the schedules due after the horizon it
    # covered before: a spec due before it is not read again, one due after it is parsed.
    app.sync_schedules(NS, [cron("first", "1 * * * *"), cron("second", "2 * * * *")])
    cache = firing.DefinitionCache()
    forever = time.monotonic() + 60
    read = await firing.warm(aconn, [NS], cache, at(120), forever, after=at(60))
    assert read == firing.Warmed(1, at(120))
    assert cache.get(NS, "first", spec_key(conn, "first")) is None, "covered before: not read"
    assert cache.get(NS, "second", spec_key(conn, "second")) is not None
    limited = firing.DefinitionCache(size=1)
    assert (await firing.warm(aconn, [NS], limited, at(3600), forever)).until is None, (
        "the cache's size cut the listing short: the next warming starts over"
    )


async def test_the_worker_completion_write_records_schedule_successes(
    database_url: str,
    app: tickwork.App,
    aconn: psycopg.AsyncConnection[Any],
    conn: psycopg.Connection[Any],
    clock: SettableClock,
) -> None:
    app.sync_schedules(NS, [every("a", 60, job=JobTemplate(kind="s.ok"))])

    @app.task("s.ok")
    async def ok(job: tickwork.Job) -> str:
        return "done"

    await fire(aconn, at(60))
    clock.set(at(61))
    worker = Worker(app, worker_settings(database_url), clock=clock)
    async with opened(worker):
        (job,) = await worker.claim_once(10)
        await worker.slots.run_job(job)
        await worker.outcomes.complete(list(worker.outcomes.done))
    row = schedule(conn, "a")
    assert (row["state"], row["state_job_id"]) == ("done", job.id)
    assert (row["last_job_status"], row["last_success_at"]) == ("succeeded", at(61))
    assert row["last_job_id"] == JobId(job.id)


async def test_changing_a_fixed_delay_schedule_while_its_job_runs_keeps_waiting_for_it(
    app: tickwork.App,
    aconn: psycopg.AsyncConnection[Any],
    conn: psycopg.Connection[Any],
    clock: SettableClock,
) -> None:
    app.sync_schedules(NS, [every("poll", 45, interval_mode=IntervalMode.FIXED_DELAY)])
    await fire(aconn, at(45))
    clock.set(at(50))
    app.sync_schedules(NS, [every("poll", 30, interval_mode=IntervalMode.FIXED_DELAY)])
    row = schedule(conn, "poll")
    assert (row["revision"], row["next_run_at"]) == (2, None)
    clock.set(at(60))
    app.cancel(jobs(conn, "poll")[0]["id"])
    assert schedule(conn, "poll")["next_run_at"] == at(90)  # the new delay


# --- isolation: one bad schedule never stops the others -------------------------------------

POISON = "poison.kind"

POISON_TRIGGER = f"""
CREATE FUNCTION public.refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.kind = '{POISON}' THEN
        RAISE EXCEPTION 'poison jobs are not welcome';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER refuse_poison BEFORE INSERT ON tickwork.jobs
    FOR EACH ROW EXECUTE FUNCTION public.refuse_poison();
"""


def _store(conn: psycopg.Connection[Any], name: str, path: str, value: str) -> None:
    """Change a stored spec behind sync's back, as an older version could have stored it (a
    new revision, so no cached definition is used)."""
    conn.execute(
        "UPDATE tickwork.schedules SET spec = jsonb_set(spec, %s::text[], %s::jsonb),"
        " revision = revision + 1 WHERE namespace = %s AND name = %s",
        ("{" + path + "}", value, NS, name),
    )


def _failing(conn: psycopg.Connection[Any], name: str) -> tuple[str | None, int, Any]:
    row = schedule(conn, name)
    return row["firing_error"], row["firing_failures"], row["firing_retry_at"]


def _failures_counted(name: str) -> float:
    value = REGISTRY.get_sample_value(
        "tickwork_schedule_firing_failures_total", {"schedule_namespace": NS, "schedule": name}
    )
    return value or 0.0


async def test_each_kind_of_bad_schedule_is_set_aside_and_the_rest_of_its_batch_fires(
    app: tickwork.App,
    aconn: psycopg.AsyncConnection[Any],
    conn: psycopg.Connection[Any],
    caplog: pytest.LogCaptureFixture,
) -> None:
    healthy = [every(f"ok{i}", 60) for i in range(20)]
    app.sync_schedules(
        NS,
        [
            *healthy,
            every("unreadable", 60),
            every("loud", 60),
            every("poisoned", 60, job=JobTemplate(kind=POISON)),
        ],
    )
    _store(conn, "unreadable", "every", "5")
    _store(conn, "loud", "job,priority", "40000")  # the jobs column is a smallint
    conn.execute(POISON_TRIGGER)
    counted = {name: _failures_counted(name) for name in ("unreadable", "loud", "poisoned")}

    with caplog.at_level(logging.ERROR, logger="tickwork.maintenance.firing"):
        report = await fire(aconn, at(60))

    assert (report.claimed, report.fired, report.failed) == (23, 20, 3)
    assert all(occurrences(conn, d.name) == [at(60)] for d in healthy)
    for name in ("unreadable", "loud", "poisoned"):
        assert _failing(conn, name)[1:] == (1, at(61)), name
        assert schedule(conn, name)["next_run_at"] == at(60), "the occurrence is kept"
        assert jobs(conn, name) == []
        assert _failures_counted(name) == counted[name] + 1
    assert _failing(conn, "unreadable")[0] == (
        "spec.every: must be a string, not a number (5) (the stored spec cannot be read by "
        "this version)"
    )
    loud = _failing(conn, "loud")[0] or ""
    # Refused by PostgreSQL, or (once sync and this version check the limit) by validation.
    assert "smallint out of range (sqlstate 22003)" in loud or "spec.job.priority" in loud
    assert _failing(conn, "poisoned")[0] == (
        "refused by PostgreSQL: poison jobs are not welcome (sqlstate P0001, in PL/pgSQL "
        "function refuse_poison() line 4 at RAISE), inserting the job of occurrence "
        "2030-01-01T00:01:00+00:00"
    )
    logged = {
        (r.namespace, r.schedule): r.error  # type: ignore[attr-defined]
        for r in caplog.records
        if getattr(r, "action", None) == "schedule_firing_failed"
    }
    assert logged == {
        (NS, f"{NS}/{name}"): _failing(conn, name)[0] for name in ("unreadable", "loud", "poisoned")
    }

    # Not claimed before their retry; the healthy ones go on firing on time meanwhile.
    report = await fire(aconn, at(60.9))
    assert report.claimed == 0
    report = await fire(aconn, at(120))
    assert (report.claimed, report.fired, report.failed) == (23, 20, 3)
    assert all(occurrences(conn, d.name) == [at(60), at(120)] for d in healthy)
    assert [_failing(conn, n)[1:] for n in ("unreadable", "loud", "poisoned")] == [(2, at(122))] * 3


async def test_the_retry_backs_off_from_one_second_doubling_to_five_minutes(
    app: tickwork.App, aconn: psycopg.AsyncConnection[Any], conn: psycopg.Connection[Any]
) -> None:
    app.sync_schedules(NS, [every("bad", 60), every("good", 3600)])
    _store(conn, "bad", "every", "5")
    now = at(60)
    delays = []
    for _ in range(12):
        assert (await fire(aconn, now)).failed == 1
        retry_at = _failing(conn, "bad")[2]
        delays.append((retry_at - now).total_seconds())
        assert (await fire(aconn, retry_at - timedelta(milliseconds=1))).claimed == 0
        alarm = await store.arun(aconn, schedules_db.next_due([NS], now))
        assert alarm.next_run_at == retry_at, "the loop sleeps until the retry, not its past run"
        now = retry_at
    assert delays == [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]
    assert _failing(conn, "bad")[1] == 12


async def test_a_firing_that_works_or_a_changed_definition_clears_the_error(
    app: tickwork.App,
    aconn: psycopg.AsyncConnection[Any],
    conn: psycopg.Connection[Any],
    clock: SettableClock,
) -> None:
    app.sync_schedules(NS, [every("poisoned", 60, job=JobTemplate(kind=POISON)), every("bad", 60)])
    _store(conn, "bad", "job,priority", "40000")
    conn.execute(POISON_TRIGGER)
    assert (await fire(aconn, at(60))).failed == 2

    conn.execute("DROP TRIGGER refuse_poison ON tickwork.jobs")
    report = await fire(aconn, at(61))
    assert (report.claimed, report.fired, report.failed) == (2, 1, 1)
    assert occurrences(conn, "poisoned") == [at(60)], "the kept occurrence fires late, once"
    assert _failing(conn, "poisoned") == (None, 0, None)

    clock.set(at(62))
    app.sync_schedules(NS, [every("poisoned", 60, job=JobTemplate(kind=POISON)), every("bad", 60)])
    assert _failing(conn, "bad") == (None, 0, None), "the fix (a new revision) clears it"
    assert (await fire(aconn, at(120))).fired == 2
    assert [job["priority"] for job in jobs(conn, "bad")] == [0]


async def test_an_error_while_planning_one_schedule_sets_only_that_one_aside(
    app: tickwork.App, aconn: psycopg.AsyncConnection[Any], conn: psycopg.Connection[Any]
) -> None:
    far = datetime(9999, 6, 1, tzinfo=UTC)
    app.sync_schedules(NS, [cron("yearly", "0 0 1 1 *"), every("minutely", 60)])
    conn.execute(
        "UPDATE tickwork.schedules SET next_run_at = %s WHERE name = %s",
        (datetime(9999, 1, 1, tzinfo=UTC), "yearly"),
    )
    conn.execute(
        "UPDATE tickwork.schedules SET next_run_at = %s WHERE name = %s", (far, "minutely")
    )
    report = await fire(aconn, far)
    assert (report.claimed, report.fired, report.failed) == (2, 1, 1)
    assert occurrences(conn, "minutely") == [far]
    assert (
        _failing(conn, "yearly")[0] == "planning it failed: ValueError: year 10000 is out of range"
    )


async def test_a_lost_connection_still_rolls_the_whole_batch_back(
    app: tickwork.App, database_url: str, conn: psycopg.Connection[Any]
) -> None:
    app.sync_schedules(NS, [every("a", 60), every("cut", 60, job=JobTemplate(kind=POISON))])
    conn.execute(
        f"""
        CREATE FUNCTION public.cut() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF NEW.kind = '{POISON}' THEN PERFORM pg_terminate_backend(pg_backend_pid()); END IF;
            RETURN NEW;
        END $$;
        CREATE TRIGGER cut BEFORE INSERT ON tickwork.jobs
            FOR EACH ROW EXECUTE FUNCTION public.cut();
        """
    )
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as doomed:
        with pytest.raises(psycopg.OperationalError):
            await fire(doomed, at(60))
    assert jobs(conn) == []
    assert [_failing(conn, name) for name in ("a", "cut")] == [(None, 0, None)] * 2
    assert schedule(conn, "a")["next_run_at"] == at(60)


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(culprits=st.sets(st.integers(0, 29), max_size=5), batch=st.integers(1, 30))
def test_any_culprits_in_any_batch_are_found_and_only_they_are_set_aside(
    app: tickwork.App,
    conn: psycopg.Connection[Any],
    database_url: str,
    culprits: set[int],
    batch: int,
) -> None:
    names = [f"s{i:02}" for i in range(30)]
    app.sync_schedules(NS, [every(name, 60) for name in names])  # the same each example
    conn.execute("DROP TRIGGER IF EXISTS refuse_poison ON tickwork.jobs")
    conn.execute("DROP FUNCTION IF EXISTS public.refuse_poison()")
    conn.execute(POISON_TRIGGER)
    conn.execute("DELETE FROM tickwork.jobs")
    conn.execute(
        "UPDATE tickwork.schedules SET next_run_at = %s, firing_error = NULL,"
        " firing_failures = 0, firing_retry_at = NULL, revision = revision + 1,"
        " spec = jsonb_set(spec, '{job,kind}', to_jsonb(CASE WHEN name = ANY(%s)"
        " THEN %s ELSE %s END))",
        (at(60), [names[i] for i in culprits], POISON, KIND),
    )

    async def pass_() -> firing.FireReport:
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as c:
            return await firing.run_once(c, [NS], at(60), config=firing.FiringConfig(batch=batch))

    report = asyncio.run(pass_())

    assert (report.fired, report.failed) == (30 - len(culprits), len(culprits))
    failing = {
        r[0]
        for r in conn.execute("SELECT name FROM tickwork.schedules WHERE firing_error IS NOT NULL")
    }
    assert failing == {names[i] for i in culprits}
    fired = {r[0] for r in conn.execute("SELECT schedule_name FROM tickwork.jobs")}
    assert fired == set(names) - failing


async def test_a_constraint_the_job_breaks_is_named_in_the_error(
    app: tickwork.App, aconn: psycopg.AsyncConnection[Any], conn: psycopg.Connection[Any]
) -> None:
    conn.execute(
        "ALTER TABLE tickwork.jobs ADD CONSTRAINT jobs_modest_priority CHECK (priority < 50)"
    )
    app.sync_schedules(NS, [every("eager", 60, job=JobTemplate(kind=KIND, priority=90))])
    app.sync_schedules("other", [every("calm", 60)])
    report = await fire(aconn, at(60), (NS, "other"))
    assert (report.fired, report.failed) == (1, 1)
    assert _failing(conn, "eager")[0] == (
        'refused by PostgreSQL: new row for relation "jobs" violates check constraint '
        '"jobs_modest_priority" (sqlstate 23514, table jobs, constraint jobs_modest_priority), '
        "inserting the job of occurrence 2030-01-01T00:01:00+00:00"
    )


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    counts=st.lists(st.integers(0, 12), min_size=1, max_size=6),
    batch=st.integers(1, 6),
    offsets=st.lists(st.integers(0, 59), min_size=12, max_size=12),
)
def test_racing_passes_over_namespaces_of_any_size_fire_each_due_schedule_once(
    app: tickwork.App,
    conn: psycopg.Connection[Any],
    database_url: str,
    counts: list[int],
    batch: int,
    offsets: list[int],
) -> None:
    """The namespaces with due schedules share each claim's candidates (a flood in one, none
    in another, more namespaces than a batch): two racing passes still fire every due
    schedule exactly once, and the schedules of namespaces not offered not at all."""
    conn.execute("DELETE FROM tickwork.jobs")
    conn.execute("DELETE FROM tickwork.schedules")
    namespaces = [f"{NS}-{k}" for k in range(len(counts))]
    for namespace, count in zip(namespaces, counts, strict=True):
        app.sync_schedules(
            namespace, [cron(f"s{i:02}", f"{offsets[i]} 1 * * * *") for i in range(count)]
        )
    app.sync_schedules("not-offered", [cron("s00", "0 1 * * * *")])

    async def pass_() -> firing.FireReport:
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as c:
            config = firing.FiringConfig(batch=batch)
            return await firing.run_once(c, namespaces, at(119), config=config)

    async def race() -> list[firing.FireReport]:
        return list(await asyncio.gather(pass_(), pass_()))

    reports = asyncio.run(race())
    fired = conn.execute(
        "SELECT schedule_namespace, schedule_name, count(*) FROM tickwork.jobs"
        " GROUP BY 1, 2 ORDER BY 1, 2"
    ).fetchall()
    expected = [
        (namespace, f"s{i:02}", 1)
        for namespace, count in zip(namespaces, counts, strict=True)
        for i in range(count)
    ]
    assert [tuple(row) for row in fired] == expected
    assert sum(r.fired for r in reports) == sum(counts)


async def test_warming_parses_each_distinct_spec_due_not_the_first_rows_due(
    app: tickwork.App, aconn: psycopg.AsyncConnection[Any], conn: psycopg.Connection[Any]
) -> None:
    # Many schedules share the spec due first; the distinct specs due after them are warmed
    # too, though the cache holds fewer entries than there are schedules due.
    app.sync_schedules(
        NS,
        [cron(f"a{i:02}", "1 * * * *") for i in range(20)]
        + [cron(f"b{i}", f"{2 + i} * * * *") for i in range(3)],
    )
    cache = firing.DefinitionCache(size=5)
    warmed = await firing.warm(aconn, [NS], cache, at(3600), time.monotonic() + 60)
    assert warmed.parsed == 4
    for name in ("a00", "a19", "b0", "b1", "b2"):
        assert cache.get(NS, name, spec_key(conn, name)) is not None, name
