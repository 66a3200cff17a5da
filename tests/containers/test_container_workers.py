"""Container jobs run by real ``tickwork worker --container-jobs`` processes, their KUBECONFIG
pointing at kmock, which stands in for the Kubernetes API server (none can run here); the test
plays the Job controller. One Job per occurrence while three workers race to fire and claim;
a worker SIGKILLed while its Job runs is replaced by one that adopts the Job, never a second;
a Job left running while no worker held its job — cancelled after a graceful stop handed it
back, or dead by lease expiry after a SIGKILL — deleted by the next worker started. Also the
command's one-line error when no Kubernetes API is configured."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

import tickwork
from tests.containers.cluster import JobController
from tests.containers.conftest import NAMESPACE
from tests.containers.test_container_jobs import NO_DELAY, payload, wait_job, wait_watching
from tests.support.helpers import wait_status, wait_until
from tickwork.schedules.container_jobs import KIND, LABEL_JOB_ID, job_name
from tickwork.schedules.definition import ScheduleDefinition
from tickwork.schedules.options import JobTemplate

TICKWORK = str(Path(sys.executable).parent / "tickwork")
ROOT = Path(__file__).resolve().parents[2]
DEADLINE = 30.0

Start = Callable[..., Awaitable[asyncio.subprocess.Process]]


@pytest.fixture
async def start_worker(
    database_url: str, controller: JobController, tmp_path: Path
) -> AsyncIterator[Start]:
    """``await start_worker(name, *flags)``: a ``tickwork worker --container-jobs`` process;
    those still alive at the end get SIGTERM, then SIGKILL, by their own pid."""
    del controller  # KUBECONFIG is set by it
    started: list[asyncio.subprocess.Process] = []
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
        "TICKWORK_DATABASE_URL": database_url,
    }

    async def start(name: str, *flags: str) -> asyncio.subprocess.Process:
        log = (tmp_path / f"{name}.log").open("w")
        process = await asyncio.create_subprocess_exec(
            TICKWORK,
            "worker",
            "--app",
            "tests.containers.worker_app:app",
            "--container-jobs",
            "--name",
            name,
            "--http-port",
            "0",
            "--poll-seconds",
            "0.2",
            "--shutdown-grace-seconds",
            "1",
            *flags,
            env=env,
            stdout=log,
            stderr=log,
        )
        started.append(process)
        return process

    yield start
    for process in started:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
    for process in started:
        try:
            await asyncio.wait_for(process.wait(), 15)
        except TimeoutError:
            process.kill()
            await process.wait()


async def _jobs(aconn: psycopg.AsyncConnection) -> list[dict[str, Any]]:
    async with aconn.cursor(row_factory=dict_row) as cur:
        await cur.execute("SELECT * FROM tickwork.jobs WHERE kind = %s ORDER BY id", (KIND,))
        return await cur.fetchall()


async def test_three_racing_worker_processes_create_one_job_per_occurrence(
    database_url: str,
    controller: JobController,
    start_worker: Start,
    aconn: psycopg.AsyncConnection,
) -> None:
    body = payload(successful_jobs_history_limit=100)  # keep every Job to count them
    definition = ScheduleDefinition(
        name="report",
        every=timedelta(seconds=1),
        job=JobTemplate(kind=KIND, payload=body, retry=NO_DELAY),
    )
    app = tickwork.App(database_url)
    await asyncio.to_thread(app.sync_schedules, NAMESPACE, [definition])
    app.close()
    for number in range(3):
        await start_worker(f"w{number}", "--namespaces", NAMESPACE)

    async def finished_enough() -> bool:  # the test as the Job controller: finish every Job
        for job in controller.jobs():
            if not job.get("status"):
                await controller.finish(job["metadata"]["name"], "Complete")
        succeeded = [row for row in await _jobs(aconn) if row["status"] == "succeeded"]
        return len(succeeded) >= 6

    await wait_until(finished_enough, timeout=DEADLINE, what="six occurrences' Jobs to finish")
    rows = [row for row in await _jobs(aconn) if row["status"] == "succeeded"]
    created = Counter(controller.created())
    assert all(count == 1 for count in created.values()), created
    for row in rows:
        expected = job_name("report", row["occurrence_at"], row["id"], 1)
        assert created[expected] == 1, (expected, created)
        jobs = controller.of_job(row["id"])
        assert [job["metadata"]["name"] for job in jobs] == [expected]
        assert row["attempt"] == 1
    occurrences = [row["occurrence_at"] for row in rows]
    assert len(set(occurrences)) == len(occurrences)
    # Every Job there is belongs to one tickwork job, one each.
    owners = Counter(job["metadata"]["labels"][LABEL_JOB_ID] for job in controller.jobs())
    assert set(owners.values()) == {1}


async def test_a_worker_killed_while_its_job_runs_is_replaced_by_one_that_adopts_the_job(
    database_url: str,
    controller: JobController,
    start_worker: Start,
    aconn: psycopg.AsyncConnection,
) -> None:
    flags = ("--lease-seconds", "2", "--heartbeat-seconds", "0.5", "--maintenance-seconds", "0.5")
    first = await start_worker("doomed", *flags)
    app = tickwork.App(database_url)
    job_id = await app.enqueue_async(KIND, payload(), retry=NO_DELAY, max_attempts=3)
    await app.close_async()
    name = job_name("report", None, job_id, 1)
    await wait_job(controller, name)
    await wait_watching(controller, name)
    first.send_signal(signal.SIGKILL)
    await first.wait()

    await start_worker("heir", *flags)
    # Its lease expires, the job is recovered (attempt 2) and the heir adopts the running Job.
    await wait_status(aconn, job_id, "running", attempt=2, timeout=DEADLINE)
    await wait_watching(controller, name, count=2)
    await controller.finish(name, "Complete")
    row = await wait_status(aconn, job_id, "succeeded", timeout=DEADLINE)
    assert row["picked_by"] == "heir"
    assert controller.created() == [name]  # the heir created nothing
    assert controller.names() == [name]


async def test_a_job_cancelled_while_no_worker_holds_it_has_its_job_deleted_by_the_next_worker(
    database_url: str,
    controller: JobController,
    start_worker: Start,
    aconn: psycopg.AsyncConnection,
    tmp_path: Path,
) -> None:
    flags = ("--maintenance-seconds", "0.5")
    # Without --namespaces it reconciles no namespace: the heir's first pass is the one seen.
    stopped = await start_worker("stopped", *flags)
    app = tickwork.App(database_url)
    job_id = await app.enqueue_async(KIND, payload(), retry=NO_DELAY)
    name = job_name("report", None, job_id, 1)
    await wait_job(controller, name)
    await wait_watching(controller, name)
    stopped.send_signal(signal.SIGTERM)
    assert await stopped.wait() == 0
    await wait_status(aconn, job_id, "available")  # handed back; its Job runs on
    assert await asyncio.to_thread(app.cancel, job_id) == "cancelled"
    await app.close_async()
    assert controller.get(name) is not None and controller.deletes() == []

    await start_worker("heir", "--namespaces", NAMESPACE, *flags)
    await wait_until(lambda: controller.get(name) is None, timeout=DEADLINE, what="Job deleted")
    deletes = [(call.namespace, call.name, call.params) for call in controller.deletes()]
    assert deletes == [(NAMESPACE, name, {"propagationPolicy": "Background"})]
    await _wait_logged(tmp_path / "heir.log", "reason=cancelled")


async def test_a_job_dead_by_lease_expiry_has_its_job_deleted_by_the_next_worker(
    database_url: str,
    controller: JobController,
    start_worker: Start,
    aconn: psycopg.AsyncConnection,
    tmp_path: Path,
) -> None:
    flags = ("--lease-seconds", "2", "--heartbeat-seconds", "0.5", "--maintenance-seconds", "0.5")
    killed = await start_worker("killed", *flags)
    app = tickwork.App(database_url)
    job_id = await app.enqueue_async(KIND, payload(), retry=NO_DELAY, max_attempts=1)
    await app.close_async()
    name = job_name("report", None, job_id, 1)
    await wait_job(controller, name)
    await wait_watching(controller, name)
    killed.send_signal(signal.SIGKILL)
    await killed.wait()

    async def lease_expired() -> bool:
        cursor = await aconn.execute(
            "SELECT lease_expires_at < now() FROM tickwork.jobs WHERE id = %s", (job_id,)
        )
        row = await cursor.fetchone()
        return bool(row and row[0])

    await wait_until(lease_expired, timeout=DEADLINE, what="the lease to expire")
    # Its first maintenance pass recovers the lease (dead: the last attempt), then reconciles.
    await start_worker("heir", "--namespaces", NAMESPACE, *flags)
    await wait_until(lambda: controller.get(name) is None, timeout=DEADLINE, what="Job deleted")
    await wait_status(aconn, job_id, "dead")
    assert [call.name for call in controller.deletes()] == [name]
    await _wait_logged(tmp_path / "heir.log", "reason=dead")


async def _wait_logged(path: Path, reason: str) -> None:
    def logged() -> bool:
        return any(
            "action=kubernetes_job_orphan_deleted" in line and reason in line
            for line in path.read_text().splitlines()
        )

    await wait_until(logged, timeout=DEADLINE, what=f"the deletion logged with {reason}")


async def test_container_jobs_without_a_kubernetes_api_is_one_line_error(
    database_url: str, tmp_path: Path
) -> None:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")
    }
    env.update(
        PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
        HOME=str(tmp_path),  # no ~/.kube/config
        KUBECONFIG=str(tmp_path / "missing"),
    )
    process = await asyncio.create_subprocess_exec(
        TICKWORK,
        "worker",
        "--app",
        "tests.containers.worker_app:app",
        "--container-jobs",
        "--database-url",
        database_url,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(process.communicate(), DEADLINE)
    lines = err.decode().strip().splitlines()
    assert process.returncode != 0
    assert len(lines) == 1, lines
    assert "--container-jobs: no Kubernetes API to talk to" in lines[0]
    assert "Traceback" not in err.decode()
