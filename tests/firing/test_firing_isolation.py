"""One bad Schedule never stops the others: worker processes offering a namespace with bad
schedules in it (a stored priority the jobs table's smallint refuses, a stored spec this
version cannot read, a kind a trigger on tickwork.jobs refuses) and a healthy namespace fire
every occurrence of the healthy schedules of both on time; the bad ones carry their error on
their row and in ``tickwork schedules -o json``, count their failures, back off, and fire
again once a sync fixes them. The real operator (against kmock) shows a firing error as
``Ready=False FiringFailed`` with a Warning Event, until a firing works.

Real PostgreSQL, real worker processes firing on the database clock: the test waits, with
deadlines, for instants of that clock instead of driving it.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from prometheus_client.parser import text_string_to_metric_families

import tickwork
from tests.operator.harness import Cluster, OperatorFactory, row
from tests.support.cli_fork import run_tickwork
from tests.support.helpers import free_port, scalar, wait_until, wait_until_sync
from tests.support.schedule_helpers import cron, every
from tickwork.maintenance import firing
from tickwork.schedules.definition import ScheduleDefinition
from tickwork.schedules.options import JobTemplate

BAD, GOOD = "bad", "good"
KIND = "iso.tick"  # served by nobody: the jobs stay available, only firing is under test
POISON = "iso.poison"
WORKERS = ("iso-0", "iso-1")
ON_TIME = timedelta(seconds=2)
"""Most time from an occurrence to the transaction that inserted its job."""
WINDOW = timedelta(seconds=6)
"""Stretch of the database clock over which every healthy occurrence is checked."""
TICKWORK = str(Path(sys.executable).parent / "tickwork")

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


def _healthy() -> list[ScheduleDefinition]:
    """An every-second and an every-other-second cron schedule. With a starting deadline, a
    pass that comes late (a loaded machine) still fires every occurrence, so a missing one
    means firing stopped, not a misfire policy."""
    job = JobTemplate(kind=KIND)
    return [
        every("tick", 1, job=job, starting_deadline_seconds=30),
        cron("even", "*/2 * * * * *", job=job, starting_deadline_seconds=30),
    ]


def _bad(fixed: bool) -> list[ScheduleDefinition]:
    """The schedules SQL breaks below; ``fixed``: as a sync that repairs them writes them."""
    job = JobTemplate(kind=KIND, priority=1 if fixed else 0)
    return [
        every("loud", 1, job=job),
        every("unreadable", 2 if fixed else 1, job=job),
        every("poisoned", 1, job=JobTemplate(kind=KIND if fixed else POISON)),
    ]


BROKEN = ("loud", "unreadable", "poisoned")


@pytest.fixture
def workers(database_url: str, tmp_path: Path) -> Iterator[dict[str, int]]:
    """Two ``tickwork worker`` processes offering both namespaces, each with its metrics
    port and its log in ``tmp_path/<name>.log``; their ports by name. Stopped by pid."""
    ports = {name: free_port() for name in WORKERS}
    processes = []
    for name, port in ports.items():
        log = (tmp_path / f"{name}.log").open("w")
        processes.append(
            subprocess.Popen(
                [
                    TICKWORK,
                    "worker",
                    "--app=tickwork.examples:app",
                    f"--namespaces={BAD},{GOOD}",
                    f"--name={name}",
                    f"--http-port={port}",
                    "--http-host=127.0.0.1",
                ],
                env={"PATH": "/usr/bin:/bin", "TICKWORK_DATABASE_URL": database_url},
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )
        log.close()
    yield ports
    for process in processes:
        process.terminate()
    for process in processes:
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


def _db_now(conn: psycopg.Connection[Any]) -> datetime:
    now: datetime = scalar(conn, "SELECT now()")
    return now


def _wait_for_db_time(conn: psycopg.Connection[Any], instant: datetime) -> None:
    wait_until_sync(lambda: _db_now(conn) >= instant, timeout=30, what=f"database time {instant}")


def _fired(conn: psycopg.Connection[Any], namespace: str, name: str) -> dict[datetime, Any]:
    """Occurrence -> lag (due to the firing transaction) of the schedule's jobs."""
    rows = conn.execute(
        "SELECT occurrence_at, created_at - occurrence_at FROM tickwork.jobs"
        " WHERE schedule_namespace = %s AND schedule_name = %s",
        (namespace, name),
    )
    return dict(rows.fetchall())


def _row(conn: psycopg.Connection[Any], name: str) -> tuple[str | None, int, datetime | None]:
    row = conn.execute(
        "SELECT firing_error, firing_failures, firing_retry_at FROM tickwork.schedules"
        " WHERE namespace = %s AND name = %s",
        (BAD, name),
    ).fetchone()
    assert row is not None
    return row[0], row[1], row[2]


def _failures_exported(ports: dict[str, int], name: str) -> float:
    """tickwork_schedule_firing_failures_total of bad/``name``, summed over the workers."""
    total = 0.0
    for port in ports.values():
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            text = response.read().decode()
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == "tickwork_schedule_firing_failures_total" and sample.labels == {
                    "schedule_namespace": BAD,
                    "schedule": name,
                }:
                    total += sample.value
    return total


def _tickwork(database_url: str, *args: str) -> str:
    result = run_tickwork(args, {"PATH": "/usr/bin:/bin", "TICKWORK_DATABASE_URL": database_url})
    assert result.returncode == 0, result.stderr
    return result.stdout


def _schedules_json(database_url: str) -> dict[tuple[str, str], dict[str, Any]]:
    listed = json.loads(_tickwork(database_url, "schedules", "-o", "json"))
    return {(s["namespace"], s["name"]): s for s in listed}


def _ticks(start: datetime, end: datetime, step: int) -> list[datetime]:
    """The instants of [start, end) on whole seconds divisible by ``step``."""
    first = start.replace(microsecond=0) + timedelta(seconds=1)
    return [
        first + timedelta(seconds=s)
        for s in range(int((end - first).total_seconds()))
        if (first + timedelta(seconds=s)).second % step == 0
    ]


def test_bad_schedules_are_set_aside_while_every_healthy_occurrence_fires_on_time(
    database_url: str, conn: psycopg.Connection[Any], workers: dict[str, int], tmp_path: Path
) -> None:
    app = tickwork.App(database_url)
    try:
        app.sync_schedules(GOOD, _healthy())
        app.sync_schedules(BAD, [*_healthy(), *_bad(fixed=False)])
        # Rows as an older version could have stored them (a new revision each: no worker
        # could have a cached definition of them), and a trigger refusing one kind.
        for name, path, value in (("loud", "job,priority", "40000"), ("unreadable", "every", "5")):
            conn.execute(
                "UPDATE tickwork.schedules SET spec = jsonb_set(spec, %s::text[], %s::jsonb),"
                " revision = revision + 1 WHERE namespace = %s AND name = %s",
                ("{" + path + "}", value, BAD, name),
            )
        conn.execute(POISON_TRIGGER)

        wait_until_sync(
            lambda: scalar(conn, "SELECT count(*) FROM tickwork.workers") == len(WORKERS),
            timeout=30,
            what="the workers to register",
        )
        start = _db_now(conn) + timedelta(seconds=1)
        # Watch the bad rows through the window: each failure and the retry it set.
        seen: dict[str, dict[int, datetime]] = {name: {} for name in BROKEN}
        end = start + WINDOW
        while _db_now(conn) < end + ON_TIME:
            for name in BROKEN:
                _, failures, retry_at = _row(conn, name)
                if failures and retry_at is not None:
                    seen[name].setdefault(failures, retry_at)
            time.sleep(0.05)

        for namespace in (GOOD, BAD):
            for definition, step in zip(_healthy(), (1, 2), strict=True):
                fired = _fired(conn, namespace, definition.name)
                due = _ticks(start, end, step)
                missing = [t for t in due if t not in fired]
                assert not missing, f"{namespace}/{definition.name} did not fire {missing}"
                late = {t: fired[t] for t in due if fired[t] > ON_TIME}
                assert not late, f"{namespace}/{definition.name} fired late: {late}"

        listed = _schedules_json(database_url)
        assert all(listed[GOOD, d.name]["firing_error"] is None for d in _healthy())
        errors = {name: listed[BAD, name]["firing_error"] or "" for name in BROKEN}
        assert "smallint out of range" in errors["loud"] or "spec.job.priority" in errors["loud"]
        assert errors["unreadable"] == (
            "spec.every: must be a string, not a number (5) (the stored spec cannot be read by "
            "this version)"
        )
        assert errors["poisoned"].startswith(
            "refused by PostgreSQL: poison jobs are not welcome (sqlstate P0001"
        )
        assert ", inserting the job of occurrence " in errors["poisoned"]
        text = _tickwork(database_url, "schedules", "--namespace", BAD).splitlines()
        assert "FIRING ERROR" in text[0]
        states = {line.split()[1]: line.split()[3] for line in text[1:]}
        assert states == {**dict.fromkeys(BROKEN, "failing"), "tick": "active", "even": "active"}
        assert any("spec.every: must be a string" in line for line in text)
        assert any("refused by PostgreSQL: poison jobs" in line for line in text)
        for name in BROKEN:
            assert _fired(conn, BAD, name) == {}
            # The workers retry meanwhile (and a retry names the occurrence it tried): the
            # same cause, at most as many failures, as the row read after the listing.
            error, failures, _ = _row(conn, name)
            assert error is not None
            cause = error.partition(", inserting the job")[0]
            assert listed[BAD, name]["firing_error"].partition(", inserting the job")[0] == cause
            assert 1 <= listed[BAD, name]["firing_failures"] <= failures
            # 1 s, 2 s, 4 s...: each retry comes no earlier than its backoff after the last.
            assert failures >= 3, (name, seen[name])
            retries = sorted(seen[name].items())
            for (n, retry), (m, later) in itertools.pairwise(retries):
                if m == n + 1:
                    assert later - retry >= timedelta(seconds=2 ** (m - 1)), (name, retries)
            # Counted by the worker that failed it, just after its commit: wait for the two
            # to agree (a retry may come in between).
            wait_until_sync(
                lambda name=name: _failures_exported(workers, name) == _row(conn, name)[1],
                timeout=10,
                what=f"the failures of {name} to be exported",
            )
        # Each failure was logged by the worker that met it, naming namespace and schedule.
        logged = "".join((tmp_path / f"{worker}.log").read_text() for worker in WORKERS)
        failed = [line for line in logged.splitlines() if "action=schedule_firing_failed" in line]
        for name in BROKEN:
            assert any(f"namespace={BAD} schedule={BAD}/{name} " in line for line in failed), name
        assert all(f"namespace={BAD} " in line for line in failed), "only bad schedules failed"

        # The fix: a sync writes good definitions (new revisions), which clears the errors.
        conn.execute("DROP TRIGGER refuse_poison ON tickwork.jobs")
        app.sync_schedules(BAD, [*_healthy(), *_bad(fixed=True)])
        assert all(_row(conn, name) == (None, 0, None) for name in BROKEN)
        wait_until_sync(
            lambda: all(_fired(conn, BAD, name) for name in BROKEN),
            timeout=15,
            what="the repaired schedules to fire",
        )
        listed = _schedules_json(database_url)
        assert all(listed[BAD, name]["firing_error"] is None for name in BROKEN)
        priorities = conn.execute(
            "SELECT DISTINCT priority FROM tickwork.jobs WHERE schedule_name = 'loud'"
        ).fetchall()
        assert priorities == [(1,)]
    finally:
        app.close()


async def test_the_operator_shows_a_firing_error_as_ready_false_until_a_firing_works(
    cluster: Cluster, start_operator: OperatorFactory, database_url: str
) -> None:
    await start_operator()
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(POISON_TRIGGER)
    await cluster.create("poisoned", {"every": "1m", "job": {"kind": POISON}})
    await cluster.create("fine", {"every": "1m", "job": {"kind": KIND}})
    await cluster.wait_ready("poisoned", "Synced")
    await cluster.wait_ready("fine", "Synced")

    stored = row(database_url, "poisoned")
    assert stored is not None
    due = stored["next_run_at"]
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        report = await firing.run_once(conn, ["ns"], due)
    assert (report.fired, report.failed) == (1, 1)

    await cluster.wait_ready("poisoned", "FiringFailed")
    condition = cluster.ready("poisoned") or {}
    assert condition["status"] == "False"
    assert condition["message"] == (
        "firing failed, retried with backoff: refused by PostgreSQL: poison jobs are not "
        "welcome (sqlstate P0001, in PL/pgSQL function refuse_poison() line 4 at RAISE), "
        f"inserting the job of occurrence {due.isoformat()}"
    )
    assert (cluster.ready("fine") or {})["reason"] == "Synced"
    await wait_until(
        lambda: any(e.get("reason") == "FiringFailed" for e in cluster.events("poisoned")),
        what="a Warning Event FiringFailed",
    )

    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("DROP TRIGGER refuse_poison ON tickwork.jobs")
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        report = await firing.run_once(conn, ["ns"], due + timedelta(seconds=1))
    assert (report.fired, report.failed) == (1, 0)
    await cluster.wait_ready("poisoned", "Synced")
