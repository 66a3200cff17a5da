"""``job.spawn``: a task fans out and joins; the spawned jobs start only once the spawning task
succeeded, are cancelled when it ends dead, come back the same on a retried attempt (per key),
stay in its tenant, and bad spawns are refused naming the field, writing nothing."""

from __future__ import annotations

import threading
from typing import Any

import psycopg
import pytest

import tickwork
from tests.support.helpers import job_row, running, scalar, settings, wait_status
from tickwork.clock import SettableClock
from tickwork.errors import InvalidInput, InvalidTransition
from tickwork.model import Job, JobId, Spawn
from tickwork.worker.runner import Worker


def _worker(app: tickwork.App, database_url: str, clock: SettableClock) -> Worker:
    return Worker(app, settings(database_url, concurrency=4), clock=clock)


async def test_a_task_fans_out_and_a_join_runs_after_every_child(
    app: tickwork.App,
    database_url: str,
    clock: SettableClock,
    aconn: psycopg.AsyncConnection[Any],
) -> None:
    done: list[tuple[str, int]] = []
    lock = threading.Lock()
    spawned: list[JobId] = []

    @app.task("w.split")
    def split(job: Job) -> None:
        ids = job.spawn(
            [Spawn("w.part", {"i": i}) for i in range(20)],
            join=Spawn("w.merge", {"n": 20}),
        )
        spawned.extend(ids)
        assert scalar_sync(database_url, ids[0]) == "waiting", "not before the split succeeded"

    @app.task("w.part")
    async def part(job: Job) -> None:
        with lock:
            done.append(("part", job.payload["i"]))

    @app.task("w.merge")
    async def merge(job: Job) -> None:
        with lock:
            done.append(("merge", len(done)))

    split_id = await app.enqueue_async("w.split")
    async with running(_worker(app, database_url, clock)):
        await wait_status(aconn, split_id, "succeeded")
        await wait_status(aconn, spawned[-1], "succeeded")
    assert len(spawned) == 21
    assert sorted(i for what, i in done if what == "part") == list(range(20))
    assert done[-1] == ("merge", 20), "the join ran last, once"


def scalar_sync(database_url: str, job_id: int) -> str:
    with psycopg.connect(database_url, autocommit=True) as conn:
        return str(job_row(conn, job_id)["status"])


async def test_a_retried_attempt_gets_the_same_spawned_jobs_and_a_dead_one_cancels_them(
    app: tickwork.App,
    database_url: str,
    clock: SettableClock,
    aconn: psycopg.AsyncConnection[Any],
) -> None:
    seen: list[list[JobId]] = []

    @app.task("w.flaky", max_attempts=2, retry=tickwork.Backoff(0, 1, 0))
    async def flaky(job: Job) -> None:
        seen.append(
            await job.spawn_async([Spawn("w.child", name="a"), Spawn("w.child", after=["a"])])
        )
        raise RuntimeError("fails after spawning")

    parent = await app.enqueue_async("w.flaky")
    async with running(_worker(app, database_url, clock)):
        await wait_status(aconn, parent, "dead")
    assert len(seen) == 2 and seen[0] == seen[1], "the second attempt got the first's jobs"
    with psycopg.connect(database_url, autocommit=True) as conn:
        assert scalar(conn, "SELECT count(*) FROM tickwork.jobs WHERE kind = 'w.child'") == 2
        first, second = (job_row(conn, i) for i in seen[0])
    for row in (first, second):  # both wait for the spawning job itself
        assert row["last_error"] == f"cancelled: parent job {parent} ended dead"


async def test_spawned_jobs_stay_in_the_spawning_jobs_tenant(
    app: tickwork.App,
    database_url: str,
    clock: SettableClock,
    aconn: psycopg.AsyncConnection[Any],
) -> None:
    errors: list[str] = []
    with psycopg.connect(database_url, autocommit=True) as conn:
        theirs = scalar(
            conn,
            "INSERT INTO tickwork.jobs (kind, schedule_namespace, schedule_name)"
            " VALUES ('other', 'tenant-b', 's') RETURNING id",
        )

    @app.task("w.bad")
    async def bad(job: Job) -> None:
        for jobs in (
            [Spawn("w.x", after=[theirs])],
            [Spawn("w.x", name="a", after=["b"]), Spawn("w.x", name="b", after=["a"])],
            [Spawn("w.x", name="a"), Spawn("w.x", name="a")],
            [Spawn("w.x", after=["nobody"])],
            [Spawn("", {})],
            [],
        ):
            try:
                await job.spawn_async(jobs, key=str(len(errors)))
            except InvalidInput as exc:
                errors.append(str(exc))

    job_id = await app.enqueue_async("w.bad")
    async with running(_worker(app, database_url, clock)):
        await wait_status(aconn, job_id, "succeeded")
    assert errors == [
        f"jobs[0].after: no job {theirs} in this namespace (unknown job id)",
        "jobs[0].after: a cycle: a -> b -> a",
        "jobs[1].name: duplicate name 'a' (also jobs[0].name)",
        "jobs[0].after[0]: no job named 'nobody'",
        errors[4],
        "jobs: nothing to spawn",
    ]
    assert errors[4].startswith("jobs[0].kind: ")
    with psycopg.connect(database_url, autocommit=True) as conn:
        assert scalar(conn, "SELECT count(*) FROM tickwork.jobs WHERE kind = 'w.x'") == 0
        assert scalar(conn, "SELECT count(*) FROM tickwork.job_spawns") == 0


def test_spawn_outside_a_worker_is_refused(app: tickwork.App) -> None:
    job_id = app.enqueue("w.any")
    with pytest.raises(InvalidTransition, match="only inside a task run by a tickwork worker"):
        app.get_job(job_id).spawn([Spawn("w.child")])
