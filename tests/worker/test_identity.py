"""A worker process's identity (issue 29, item 2): a name for people and an incarnation per
process start. Claims record the incarnation; adoption and heartbeats go by it, so two
processes sharing a name never take each other's jobs. A second live process given an
explicit name that is taken refuses to start, naming the other (host, pid, last heartbeat);
one under the default name ($POD_NAME, hostname-pid) takes a suffix; a name whose holder
stopped or went silent past the worker TTL is free again.

In-process workers against PostgreSQL for the rules, and ``tickwork worker`` processes for
the two cases from outside: two processes given one POD_NAME, the second's connections cut
until a claim fails, each running a 20 s job (each runs once); and a second process given a
live ``--name`` (it exits with one line)."""

from __future__ import annotations

import os
import re
import socket
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

import tickwork
from tests.db.fault_app import WORK
from tests.db.fault_helpers import CutProxy, Fleet, runs_by_process
from tests.support.helpers import T0, at, opened, scalar, settings, wait_until_sync
from tickwork.clock import SettableClock
from tickwork.db import jobs as jobs_db
from tickwork.db import store
from tickwork.db import workers as workers_db
from tickwork.worker.identity import NameTaken
from tickwork.worker.runner import Worker


def _app(database_url: str, clock: SettableClock) -> tickwork.App:
    app = tickwork.App(database_url, clock=clock)

    @app.task("t.long")
    async def long(job: tickwork.Job) -> None:
        return None

    return app


def _rows(conn: psycopg.Connection) -> dict[str, tuple[Any, ...]]:
    return {
        r[0]: r[1:]
        for r in conn.execute("SELECT name, incarnation, last_seen_at FROM tickwork.workers")
    }


# --- the rules, in-process -----------------------------------------------------------------


async def test_a_live_explicit_name_is_refused_with_one_line_naming_its_holder(
    database_url: str, conn: psycopg.Connection
) -> None:
    clock = SettableClock(T0)
    app = _app(database_url, clock)
    first = Worker(app, settings(database_url, name="twin"), clock=clock)
    second = Worker(app, settings(database_url, name="twin"), clock=clock)
    try:
        async with opened(first), opened(second):
            await first._register()
            clock.set(at(20))
            with pytest.raises(NameTaken) as refused:
                await second._register()
        message = str(refused.value)
        assert "\n" not in message
        assert message.startswith("--name twin: a live worker already has this name (")
        assert f"host {socket.gethostname()}, pid {os.getpid()}" in message
        assert "last heartbeat 2030-01-01T00:00:00+00:00" in message
        assert _rows(conn) == {"twin": (first.incarnation, T0)}, "the holder's row untouched"
    finally:
        await app.close_async()


async def test_a_name_is_free_again_once_its_holder_went_silent_past_the_ttl_or_stopped(
    database_url: str, conn: psycopg.Connection
) -> None:
    clock = SettableClock(T0)
    app = _app(database_url, clock)
    ttl = settings(database_url).worker_ttl_seconds
    silent = Worker(app, settings(database_url, name="pod-0"), clock=clock)
    restarted = Worker(app, settings(database_url, name="pod-0"), clock=clock)
    third = Worker(app, settings(database_url, name="pod-0"), clock=clock)
    try:
        async with opened(silent), opened(restarted), opened(third):
            await silent._register()
            clock.set(at(ttl + 1))
            await restarted._register()
            assert _rows(conn) == {"pod-0": (restarted.incarnation, at(ttl + 1))}
            clock.set(at(ttl + 2))
            await silent.heartbeat_once()  # back from its silence: it does not take the row
            assert _rows(conn) == {"pod-0": (restarted.incarnation, at(ttl + 1))}
            with pytest.raises(NameTaken):
                await third._register()
            store.run(conn, workers_db.deregister_worker(restarted.incarnation))
            await third._register()
            assert _rows(conn) == {"pod-0": (third.incarnation, at(ttl + 2))}
    finally:
        await app.close_async()


async def test_the_default_name_held_by_a_live_worker_takes_a_suffix(
    database_url: str, conn: psycopg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("POD_NAME", "deploy")  # a Deployment's name given to every pod
    clock = SettableClock(T0)
    app = _app(database_url, clock)
    first = Worker(app, settings(database_url, name="deploy"), clock=clock)
    second = Worker(app, settings(database_url, name="deploy"), clock=clock)
    try:
        async with opened(first), opened(second):
            await first._register()
            await second._register()
        assert first.name == "deploy"
        assert second.name == f"deploy-{second.incarnation.hex[:8]}"
        assert second.outcomes.name == second.name
        assert {name: row[0] for name, row in _rows(conn).items()} == {
            "deploy": first.incarnation,
            second.name: second.incarnation,
        }
    finally:
        await app.close_async()


async def test_adoption_after_a_lost_claim_answer_takes_only_this_processs_jobs(
    database_url: str, conn: psycopg.Connection
) -> None:
    """Two processes named ``twin`` (the second started while the first's row had expired):
    the first runs 4 jobs; the second's claim committed 1 job but its answer was lost (a cut
    connection). Adopting, the second takes its 1 job and none of the first's 4; each
    heartbeat keeps only its own."""
    clock = SettableClock(T0)
    app = _app(database_url, clock)
    first = Worker(app, settings(database_url, name="twin", concurrency=4), clock=clock)
    second = Worker(app, settings(database_url, name="twin", concurrency=4), clock=clock)
    try:
        ids = await app.enqueue_many_async("t.long", [{}] * 5)
        async with opened(first), opened(second):
            running = await first.claim_once(4)
            assert len(running) == 4
            (lost,) = store.run(
                conn,
                jobs_db.claim_jobs(
                    "twin", ["default"], {"t.long": 25}, 10, 30, T0, incarnation=second.incarnation
                ),
            )
            await first.claimer.adopt()
            await second.claimer.adopt()
            assert sorted(first.held.ids()) == sorted(j.id for j in running)
            assert second.held.ids() == [lost.id]
            assert set(ids) == {lost.id, *first.held.ids()}

            clock.set(at(10))
            await second.heartbeat_once()
            await first.heartbeat_once()
            leases = dict(conn.execute("SELECT id, lease_expires_at FROM tickwork.jobs"))
            assert leases == dict.fromkeys(ids, at(40)), "each heartbeat extended its own"
            assert not any(h.lost for h in [*first.held, *second.held])
            assert (
                scalar(conn, "SELECT count(DISTINCT picked_by_incarnation) FROM tickwork.jobs") == 2
            )
    finally:
        await app.close_async()


# --- from outside: worker processes ------------------------------------------------------


Start = Callable[..., subprocess.Popen[str]]


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    """The worker processes of a test, each one left stopped after."""
    (tmp_path / "runs").mkdir()
    fleet = Fleet(tmp_path / "runs", tmp_path)
    yield fleet
    fleet.stop()


@pytest.fixture
def start(fleet: Fleet) -> Start:
    """``tickwork worker --app fault_app:app`` as ``key`` (its stderr in ``<tmp>/<key>.log``),
    with no name of its own unless ``env`` gives one."""

    def launch(key: str, database_url: str, **env: str) -> subprocess.Popen[str]:
        variables: dict[str, str | None] = {
            "TICKWORK_NAME": None,
            "TICKWORK_POLL_SECONDS": "0.2",
            "TICKWORK_SHUTDOWN_GRACE_SECONDS": "1",
            **env,
        }
        return fleet.start(key, database_url, variables=variables)

    return launch


def _log(tmp_path: Path, key: str) -> str:
    return (tmp_path / f"{key}.log").read_text()


def _wait_logged(tmp_path: Path, key: str, needle: str, process: subprocess.Popen[str]) -> None:
    def logged() -> bool:
        assert process.poll() is None, f"{key} exited:\n{_log(tmp_path, key)[-3000:]}"
        return needle in _log(tmp_path, key)

    wait_until_sync(logged, timeout=60, what=f"{key} to log {needle}")


def test_two_processes_given_one_pod_name_each_run_their_long_job_exactly_once_through_a_cut(
    database_url: str, conn: psycopg.Connection, tmp_path: Path, start: Start, fleet: Fleet
) -> None:
    """The issue's case: two processes given one name ($POD_NAME, as a Deployment's name
    would be), a long job in each (running until the test releases it, after the cut: at most
    60 s); the second's connections are cut until its claim fails, so its next claim adopts
    first. Each job runs exactly once, each in its own process."""
    params = conninfo_to_dict(database_url)
    proxy = CutProxy(str(params.get("host") or "127.0.0.1"), int(params.get("port") or 5432))
    try:
        first = start("first", database_url, POD_NAME="twin", TICKWORK_QUEUES="a")
        _wait_logged(tmp_path, "first", "action=worker_started", first)
        through = make_conninfo(database_url, host="127.0.0.1", port=str(proxy.port))
        second = start(
            "second", through, POD_NAME="twin", TICKWORK_QUEUES="b", TICKWORK_CONCURRENCY="2"
        )
        _wait_logged(tmp_path, "second", "action=worker_started", second)

        app = tickwork.App(database_url)
        try:
            long_job = {"seconds": 60, "until": str(tmp_path / "release")}
            in_a = app.enqueue(WORK, long_job, queue="a")
            in_b = app.enqueue(WORK, long_job, queue="b")
        finally:
            app.close()
        wait_until_sync(
            lambda: (
                scalar(conn, "SELECT count(*) FROM tickwork.jobs WHERE status = 'running'") == 2
            ),
            timeout=30,
            what="both jobs to run",
        )
        proxy.down()  # the second still has a free slot: it keeps claiming, and fails
        _wait_logged(tmp_path, "second", "action=claim_failed", second)
        proxy.up()
        _wait_logged(tmp_path, "second", "action=database_recovered", second)
        (tmp_path / "release").touch()  # the jobs ran through the cut: let them end
        wait_until_sync(
            lambda: (
                scalar(conn, "SELECT count(*) FROM tickwork.jobs WHERE status = 'succeeded'") == 2
            ),
            timeout=60,
            what="both jobs to succeed",
        )
    finally:
        fleet.stop()  # before the proxy goes: a worker cut off takes 20 s to give up
        proxy.close()

    started = {
        int(path.name.removeprefix("starts-")): path.read_text().split("\n")[:-1]
        for path in (tmp_path / "runs").glob("starts-*")
    }
    assert started == {first.pid: [f"{in_a} 1"], second.pid: [f"{in_b} 1"]}, "each started once"
    ran = runs_by_process(tmp_path / "runs")
    assert ran == {first.pid: [(in_a, 1)], second.pid: [(in_b, 1)]}, "each ran once, in its own"
    picked = dict(conn.execute("SELECT id, picked_by FROM tickwork.jobs"))
    assert picked[in_a] == "twin"
    assert picked[in_b].startswith("twin-") and len(picked[in_b]) == len("twin-") + 8
    assert "action=worker_renamed" in _log(tmp_path, "second")


def test_a_second_process_given_a_live_name_exits_with_one_line_naming_the_first(
    database_url: str, conn: psycopg.Connection, tmp_path: Path, start: Start
) -> None:
    first = start("first", database_url, TICKWORK_NAME="twin")
    _wait_logged(tmp_path, "first", "action=worker_started", first)
    app = tickwork.App(database_url)
    try:
        job = app.enqueue(WORK, {"seconds": 0})
    finally:
        app.close()
    second = start("second", database_url, TICKWORK_NAME="twin")
    assert second.wait(60) == 1
    errors = [line for line in _log(tmp_path, "second").splitlines() if "error" in line]
    assert len(errors) == 1, _log(tmp_path, "second")
    assert re.match(
        rf"tickwork: error: --name twin: a live worker already has this name \(host "
        rf"{re.escape(socket.gethostname())}, pid {first.pid}, last heartbeat "
        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00\); give each process its own name",
        errors[0],
    ), errors[0]
    wait_until_sync(
        lambda: (
            scalar(conn, "SELECT status::text FROM tickwork.jobs WHERE id = %s", (job,))
            == "succeeded"
        ),
        what="the first process to run the job",
    )
    assert first.poll() is None, "the first runs on"
