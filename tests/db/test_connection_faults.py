"""Connection faults tried from outside: ``tickwork worker`` processes at default leases
(30 s) while every connection is cut every 1-2 s, or PostgreSQL crashes and restarts
(``pg_ctl -m immediate restart``), with jobs draining and every-second schedules firing.
Every job runs, and its body only once (counted by the task in a file per process), no
occurrence twice, nothing is left running once the faults stop (within seconds, not the
lease time), and no worker exits. A worker paused (SIGSTOP) until its lease was recovered
has its late writes fenced when it resumes."""

from __future__ import annotations

import asyncio
import random
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

import tickwork
from tests.db.fault_app import TICK, WORK
from tests.db.fault_helpers import CutProxy, Fleet, runs, runs_by_process
from tests.support.helpers import T0, wait_until_sync
from tickwork.clock import SettableClock
from tickwork.db import connections, migrate
from tickwork.db.embedded import EmbeddedPostgres, find_bindir
from tickwork.maintenance import firing
from tickwork.schedules.definition import ScheduleDefinition
from tickwork.schedules.options import JobTemplate

JOBS = 300
FAULT_SECONDS = 10.0
RECOVERY_SECONDS = 8.0
"""Nothing is left running this soon after the faults stop; the lease (30 s) is far longer."""
DRAIN_SECONDS = 60.0
"""Every job has run by then, however loaded the machine (300 jobs of 0.2 s take 5 s here)."""


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    (tmp_path / "runs").mkdir()
    fleet = Fleet(tmp_path / "runs", tmp_path)
    yield fleet
    fleet.stop()


def _through(url: str, proxy: CutProxy) -> str:
    return make_conninfo(url, host="127.0.0.1", port=str(proxy.port))


def _proxy_to(url: str) -> CutProxy:
    params = conninfo_to_dict(url)
    return CutProxy(str(params.get("host") or "127.0.0.1"), int(params.get("port") or 5432))


def _prepare(url: str) -> list[int]:
    """Two every-second schedules in namespace ``faults`` and JOBS jobs to drain."""
    app = tickwork.App(url)
    try:
        app.sync_schedules(
            "faults",
            [
                ScheduleDefinition(
                    name=name, every=timedelta(seconds=1), job=JobTemplate(kind=TICK)
                )
                for name in ("tick-a", "tick-b")
            ],
        )
        return list(app.enqueue_many(WORK, [{} for _ in range(JOBS)]))
    finally:
        app.close()


def _stuck(conn: psycopg.Connection, since: float) -> int:
    """How many jobs still run that started before ``since`` (a monotonic time)."""
    row = conn.execute(
        "SELECT count(*) FROM tickwork.jobs WHERE status = 'running'"
        " AND started_at < now() - make_interval(secs => %s)",
        (time.monotonic() - since + 1.0,),
    ).fetchone()
    return row[0] if row else 0


def _unfinished(conn: psycopg.Connection) -> int:
    row = conn.execute(
        "SELECT count(*) FROM tickwork.jobs WHERE kind = %s AND status <> 'succeeded'", (WORK,)
    ).fetchone()
    return row[0] if row else 0


def _check(conn: psycopg.Connection, fleet: Fleet, ids: list[int]) -> None:
    statuses = dict(
        conn.execute(
            "SELECT status::text, count(*) FROM tickwork.jobs WHERE kind = %s GROUP BY 1", (WORK,)
        ).fetchall()
    )
    assert statuses == {"succeeded": JOBS}
    ran = runs(fleet.runs)
    assert {job: n for job, n in ran.items() if n > 1} == {}, "a body ran twice"
    assert all(ran[job] == 1 for job in ids), "a job never ran"
    attempts = conn.execute(
        "SELECT count(*) FROM tickwork.jobs WHERE attempt > 1 OR last_error IS NOT NULL"
    ).fetchone()
    assert attempts == (0,), "a job was retried: its outcome was lost"
    duplicates = conn.execute(
        "SELECT schedule_name, occurrence_at FROM tickwork.jobs WHERE schedule_name IS NOT NULL"
        " GROUP BY 1, 2 HAVING count(*) > 1"
    ).fetchall()
    assert duplicates == []
    # Whatever else their state: the ticks queue behind the work jobs, and the check runs as
    # soon as the work is done, while the latest ticks may still wait for a slot.
    failed_ticks = conn.execute(
        "SELECT count(*) FROM tickwork.jobs"
        " WHERE kind = %s AND status NOT IN ('available', 'running', 'succeeded')",
        (TICK,),
    ).fetchone()
    assert failed_ticks == (0,), "a tick failed"
    assert fleet.exits() == "", "no worker exits"
    assert fleet.lines("action=lease_recovered") == [], "no lease ran out"
    assert fleet.lines("action=worker_crashed") == []


def _fired(conn: psycopg.Connection, since: datetime) -> int:
    """How many ticks were fired from ``since`` on, per the database's clock."""
    row = conn.execute(
        "SELECT count(*) FROM tickwork.jobs WHERE kind = %s AND created_at >= %s", (TICK, since)
    ).fetchone()
    return row[0] if row else 0


def _database_now(conn: psycopg.Connection) -> datetime:
    row = conn.execute("SELECT clock_timestamp()").fetchone()
    assert row is not None
    return row[0]


def _wait_settled(conn: psycopg.Connection, faults_over: float) -> None:
    """Nothing that ran during the faults is left running within seconds (the lease is
    30 s), every work job succeeds (as fast as the machine drains them), and both schedules
    fire again."""
    since = _database_now(conn)
    wait_until_sync(
        lambda: _stuck(conn, faults_over) == 0,
        timeout=RECOVERY_SECONDS,
        what="no job left running from before the faults ended (the lease is 30 s)",
    )
    wait_until_sync(
        lambda: _unfinished(conn) == 0 and _stuck(conn, faults_over) == 0,
        timeout=DRAIN_SECONDS,
        what="every job to succeed",
    )
    wait_until_sync(
        lambda: _fired(conn, since) >= 2,
        timeout=RECOVERY_SECONDS,
        what="the every-second schedules to fire again once the faults are over",
    )


def test_workers_ride_out_connections_cut_every_second_or_two(
    database_url: str, conn: psycopg.Connection, fleet: Fleet
) -> None:
    ids = _prepare(database_url)
    proxy = _proxy_to(database_url)
    try:
        for name in ("w1", "w2", "w3"):
            fleet.start(name, _through(database_url, proxy), namespaces="faults", concurrency=4)
        fleet.wait_started()
        faults_began = _database_now(conn)
        end = time.monotonic() + FAULT_SECONDS
        cut = 0
        while time.monotonic() < end:
            time.sleep(random.uniform(1.0, 2.0))
            cut += proxy.cut()
        faults_over = time.monotonic()
        assert cut >= 5 * 3, "connections of every worker were cut, again and again"
        during = _fired(conn, faults_began)
        assert during >= FAULT_SECONDS / 2, f"the schedules kept firing: {during} ticks"
        _wait_settled(conn, faults_over)
        _check(conn, fleet, ids)
        for name in fleet.processes:  # said once per outage, not once per attempt
            log = fleet.log(name)
            assert log.count("action=claim_failed") <= proxy.cuts
            assert log.count("action=heartbeat_failed") <= proxy.cuts
    finally:
        fleet.stop()  # before the proxy goes: a worker cut off takes 20 s to give up
        proxy.close()


@pytest.fixture
def restartable() -> Iterator[tuple[EmbeddedPostgres, Path]]:
    """A durable PostgreSQL of this test's own (a crash loses no acknowledged commit)."""
    bindir = find_bindir()
    if bindir is None:
        pytest.skip("pg_ctl is needed to restart PostgreSQL (no server binaries installed)")
    with tempfile.TemporaryDirectory(prefix="tickwork-faults-") as tmp:
        Path(tmp).chmod(0o777)
        server = EmbeddedPostgres(Path(tmp) / "pg")
        server.start()
        try:
            yield server, bindir
        finally:
            _pg_ctl(server, bindir, "stop", "-m", "fast")  # the restarted postmaster
            server.stop()


def _pg_ctl(server: EmbeddedPostgres, bindir: Path, *args: str) -> None:
    pg_ctl = [str(bindir / "pg_ctl"), "-D", str(server.cluster_dir), "-w"]
    log = ["-l", str(server.cluster_dir / "restart.log")]
    subprocess.run(["runuser", "-u", "postgres", "--", *pg_ctl, *log, *args], capture_output=True)


def test_workers_ride_out_a_postgresql_crash_and_restart(
    restartable: tuple[EmbeddedPostgres, Path], fleet: Fleet
) -> None:
    server, bindir = restartable
    url = server.conninfo
    migrate.apply(url)
    ids = _prepare(url)
    for name in ("w1", "w2"):
        fleet.start(name, url, namespaces="faults", concurrency=6)
    with psycopg.connect(url, autocommit=True) as conn:
        wait_until_sync(
            lambda: (
                conn.execute(
                    "SELECT count(*) FROM tickwork.jobs WHERE status = 'succeeded'"
                ).fetchone()
                >= (20,)
            ),
            timeout=20,
            what="the drain to begin",
        )
    _pg_ctl(server, bindir, "restart", "-m", "immediate")
    time.sleep(2.0)
    _pg_ctl(server, bindir, "restart", "-m", "immediate")
    faults_over = time.monotonic()
    with psycopg.connect(url, autocommit=True) as conn:
        _wait_settled(conn, faults_over)
        _check(conn, fleet, ids)


def test_a_paused_worker_whose_lease_was_recovered_is_fenced_when_it_resumes(
    database_url: str, conn: psycopg.Connection, fleet: Fleet
) -> None:
    app = tickwork.App(database_url)
    try:
        (job_id,) = app.enqueue_many(WORK, [{"seconds": 2.0}])
    finally:
        app.close()
    proxy = _proxy_to(database_url)
    fast = dict(lease_seconds=3, heartbeat_seconds=1, maintenance_seconds=0.5)
    try:
        first = fleet.start("w1", _through(database_url, proxy), **fast)
        # A heartbeat of w1 has extended the lease: w1 holds the job. (Its claim's commit alone
        # is not enough: paused before it read the claim's answer, w1 never holds the job.)
        wait_until_sync(
            lambda: (
                conn.execute(
                    "SELECT picked_by FROM tickwork.jobs WHERE id = %s"
                    " AND lease_expires_at > started_at + make_interval(secs => %s)",
                    (job_id, fast["lease_seconds"]),
                ).fetchone()
                == ("w1",)
            ),
            timeout=20,
            what="w1 to run the job and extend its lease",
        )
        first.send_signal(signal.SIGSTOP)
        proxy.cut()  # its connections are gone too: it retries its writes when it resumes
        fleet.start("w2", _through(database_url, proxy), **fast)
        wait_until_sync(
            lambda: (
                conn.execute(
                    "SELECT status::text, attempt, picked_by FROM tickwork.jobs WHERE id = %s",
                    (job_id,),
                ).fetchone()
                == ("succeeded", 2, "w2")
            ),
            timeout=30,
            what="the lease recovered and the job run again by w2",
        )
        before = conn.execute("SELECT * FROM tickwork.jobs WHERE id = %s", (job_id,)).fetchone()
        first.send_signal(signal.SIGCONT)
        wait_until_sync(
            lambda: (
                "job_lost" in fleet.log("w1")
                or "outcome_unconfirmed" in fleet.log("w1")
                or "version_mismatch" in fleet.log("w1")
            ),
            timeout=20,
            what="w1 to find the job no longer its own",
        )
        time.sleep(1.0)
        after = conn.execute("SELECT * FROM tickwork.jobs WHERE id = %s", (job_id,)).fetchone()
        assert after == before, "the late writes of w1 changed nothing"
        assert fleet.exits() == ""
        by_process = runs_by_process(fleet.runs)
        assert sorted(by_process.get(fleet.processes["w2"].pid, [])) == [(job_id, 2)]
    finally:
        fleet.stop()  # before the proxy goes: a worker cut off takes 20 s to give up
        proxy.close()


def test_a_multi_host_url_reaches_the_server_that_answers(
    database_url: str, conn: psycopg.Connection, fleet: Fleet
) -> None:
    """HA PostgreSQL: libpq tries the hosts in turn and keeps the read-write one."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        dead_port = closed.getsockname()[1]
    live_port = conninfo_to_dict(database_url).get("port") or 5432
    url = make_conninfo(
        database_url,
        host="127.0.0.1,127.0.0.1",
        port=f"{dead_port},{live_port}",
        target_session_attrs="read-write",
    )
    connections.check(url)
    app = tickwork.App(url)
    try:
        job_id = app.enqueue(WORK, {"seconds": 0})
    finally:
        app.close()
    fleet.start("w1", url)
    wait_until_sync(
        lambda: (
            conn.execute(
                "SELECT status::text FROM tickwork.jobs WHERE id = %s", (job_id,)
            ).fetchone()
            == ("succeeded",)
        ),
        timeout=20,
        what="the job to run through the multi-host URL",
    )
    assert fleet.exits() == ""


def test_a_crash_right_after_a_firing_pass_loses_none_of_it(
    restartable: tuple[EmbeddedPostgres, Path],
) -> None:
    """A crash right after a firing pass keeps all of it or none of it. Each round fires the
    next minute of 40 schedules and crashes PostgreSQL at once (SIGQUIT to every process:
    ``restart -m immediate``); then every schedule either has its occurrence's job and has
    moved past it, or has neither, and the next pass fires whatever was missing, once. The
    firing commit waits for its WAL flush, so no acknowledged pass is lost."""
    server, bindir = restartable
    url = server.conninfo
    migrate.apply(url)
    clock = SettableClock(T0)
    app = tickwork.App(url, clock=clock)
    try:
        app.sync_schedules(
            "crash",
            [
                ScheduleDefinition(f"s{i:02}", JobTemplate(kind=TICK), schedule="* * * * *")
                for i in range(40)
            ],
        )
    finally:
        app.close()

    async def pass_at(now: datetime) -> firing.FireReport:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            return await firing.run_once(conn, ["crash"], now)

    read = (
        "SELECT s.name, s.next_run_at, count(j.id) FROM tickwork.schedules s"
        " LEFT JOIN tickwork.jobs j ON j.schedule_namespace = s.namespace"
        " AND j.schedule_name = s.name AND j.occurrence_at = %s"
        " WHERE s.namespace = 'crash' GROUP BY 1, 2"
    )
    lost = 0
    for minute in range(1, 4):
        occurrence = T0 + timedelta(minutes=minute)
        assert asyncio.run(pass_at(occurrence)).fired == 40
        _pg_ctl(server, bindir, "restart", "-m", "immediate")
        with psycopg.connect(url, autocommit=True) as conn:
            after_crash = conn.execute(read, (occurrence,)).fetchall()
        moved = {name for name, next_run_at, _ in after_crash if next_run_at > occurrence}
        with_job = {name for name, _, count in after_crash if count == 1}
        assert moved == with_job, "a schedule moved on without its job, or the reverse"
        lost += 40 - len(moved)
        asyncio.run(pass_at(occurrence))  # whatever was missing fires, and nothing twice
        with psycopg.connect(url, autocommit=True) as conn:
            again = conn.execute(read, (occurrence,)).fetchall()
        assert sorted(count for _, _, count in again) == [1] * 40
        assert all(next_run_at > occurrence for _, next_run_at, _ in again)
    assert lost == 0, "a firing pass whose commit was acknowledged was lost"
