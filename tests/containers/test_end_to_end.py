"""Containers as jobs end to end: a Schedule object with ``spec.jobTemplate``, synced by the
real operator, fired by a real ``tickwork worker --container-jobs`` process, run as one
Kubernetes Job, and reported back on the Schedule's status.

kmock stands in for the Kubernetes API server (no real one can run here): the operator (kopf,
in a thread of the test process) and the worker process both talk to it, each with a
kubeconfig of its own (their tokens tell their requests apart: the worker's must stay within
its Role). The test plays the Job controller by patching each Job's status. Occurrences come
from the worker's own firing pass (``every: 1s``); ``concurrencyPolicy: Forbid`` and
suspending the Schedule while its Job runs make exactly one occurrence fire at a time, so the
outcome does not depend on timing.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from tests.containers.cluster import TOKEN, JobController, JobsEmulator, kubeconfig
from tests.containers.conftest import NAMESPACE, USED
from tests.containers.test_container_jobs import wait_watching
from tests.operator.harness import Cluster, OperatorFactory, cluster, row, start_operator
from tests.support.helpers import wait_status, wait_until
from tickwork.schedules.container_jobs import (
    KIND,
    LABEL_JOB_ID,
    LABEL_OCCURRENCE,
    LABEL_SCHEDULE,
    LABEL_SCHEDULE_NAMESPACE,
    job_name,
)

__all__ = ["cluster", "start_operator"]  # the operator tests' fixtures, used here

TICKWORK = str(Path(sys.executable).parent / "tickwork")
ROOT = Path(__file__).resolve().parents[2]
DEADLINE = 60.0
"""Generous: a loaded machine runs the operator, a worker process and PostgreSQL at once."""

CONTAINERS = [{"name": "main", "image": "busybox", "command": ["date"]}]
TEMPLATE: dict[str, Any] = {
    "metadata": {"labels": {"team": "data"}},
    "spec": {
        "backoffLimit": 0,
        "template": {"spec": {"restartPolicy": "Never", "containers": CONTAINERS}},
    },
}
SPEC: dict[str, Any] = {
    "every": "1s",
    "concurrencyPolicy": "Forbid",
    "job": {"maxAttempts": 2},
    "jobTemplate": TEMPLATE,
}

StartWorker = Callable[[str], Awaitable[asyncio.subprocess.Process]]


@pytest.fixture
async def controller(
    kmock: JobsEmulator, cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[JobController]:
    """The test as the Job controller. The operator (in this process) gets a kubeconfig with a
    token of its own, so that only the worker's requests are recorded; at the end, the worker
    must have used only the verbs its Role grants, on Jobs, in the Schedule's namespace."""
    del cluster  # prepared kmock's discovery and set KUBECONFIG; replaced here
    operator_config = tmp_path / "operator-kubeconfig"
    operator_config.write_text(
        kubeconfig(str(kmock.url)).replace(f"token: {TOKEN}", "token: operator")
    )
    monkeypatch.setenv("KUBECONFIG", str(operator_config))
    yield JobController(kmock)
    used = {(call.verb, call.resource, call.namespace) for call in kmock.calls}
    assert used <= USED, used


@pytest.fixture
async def start_worker(
    database_url: str, controller: JobController, tmp_path: Path
) -> AsyncIterator[StartWorker]:
    """``await start_worker(name)``: a ``tickwork worker --container-jobs`` process firing and
    serving the namespace, its KUBECONFIG pointing at kmock (with the token that marks its
    requests); SIGTERM, then SIGKILL, by its own pid at the end."""
    config = tmp_path / "worker-kubeconfig"
    config.write_text(kubeconfig(str(controller.server.url)))
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
        "TICKWORK_DATABASE_URL": database_url,
        "KUBECONFIG": str(config),
    }
    env.pop("KUBERNETES_SERVICE_HOST", None)
    started: list[asyncio.subprocess.Process] = []

    async def start(name: str) -> asyncio.subprocess.Process:
        log = (tmp_path / f"{name}.log").open("w")
        process = await asyncio.create_subprocess_exec(
            TICKWORK,
            "worker",
            "--app",
            "tests.containers.worker_app:app",
            "--container-jobs",
            "--namespaces",
            NAMESPACE,
            "--name",
            name,
            "--http-port",
            "0",
            "--poll-seconds",
            "0.2",
            "--shutdown-grace-seconds",
            "1",
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


def status(cluster: Cluster, name: str) -> dict[str, Any]:
    return dict((cluster.get(name) or {}).get("status") or {})


async def jobs(aconn: psycopg.AsyncConnection[Any]) -> list[dict[str, Any]]:
    async with aconn.cursor(row_factory=dict_row) as cur:
        await cur.execute("SELECT * FROM tickwork.jobs WHERE kind = %s ORDER BY id", (KIND,))
        return await cur.fetchall()


async def set_suspended(cluster: Cluster, database_url: str, name: str, suspended: bool) -> None:
    """Suspend or resume the Schedule through its object; wait for the operator's sync."""
    await cluster.patch(name, {"spec": {"suspend": suspended}})
    await wait_until(
        lambda: (row(database_url, name) or {}).get("suspended") is suspended,
        timeout=DEADLINE,
        what=f"{name}: suspended = {suspended} in PostgreSQL",
    )


async def one_occurrence(
    cluster: Cluster,
    controller: JobController,
    database_url: str,
    aconn: psycopg.AsyncConnection[Any],
    schedule: str,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Wait for the worker to fire an occurrence and create its Job, then suspend the
    Schedule (Forbid already holds further occurrences back while that job runs). Returns the
    tickwork job's row and the Job."""
    before = set(controller.names())
    await wait_until(
        lambda: set(controller.names()) - before,
        timeout=DEADLINE,
        what="the worker to fire an occurrence and create its Job",
    )
    await set_suspended(cluster, database_url, schedule, True)
    (new,) = set(controller.names()) - before
    open_jobs = [job for job in await jobs(aconn) if job["status"] in ("available", "running")]
    assert len(open_jobs) == 1, open_jobs  # Forbid: one at a time
    (job,) = open_jobs
    running = await wait_status(aconn, job["id"], "running", timeout=DEADLINE)
    assert new == job_name(schedule, running["occurrence_at"], running["id"], running["attempt"])
    body = controller.get(new)
    assert body is not None
    return running, body


async def test_a_schedule_with_a_job_template_runs_each_occurrence_as_one_kubernetes_job(
    cluster: Cluster,
    start_operator: OperatorFactory,
    controller: JobController,
    start_worker: StartWorker,
    database_url: str,
    aconn: psycopg.AsyncConnection[Any],
) -> None:
    await start_operator()
    await cluster.create("backup", SPEC)
    uid = (await cluster.wait_ready("backup", "Synced"))["metadata"]["uid"]
    await start_worker("containers")

    job, body = await one_occurrence(cluster, controller, database_url, aconn, "backup")
    name = body["metadata"]["name"]
    assert job["occurrence_at"] is not None  # fired from the timetable, not run now
    assert job["max_attempts"] == 2
    # Exactly one Job, in the Schedule's namespace, owned by the Schedule object.
    assert controller.created() == [name]
    assert controller.names() == [name]
    metadata = body["metadata"]
    assert metadata["namespace"] == NAMESPACE
    assert metadata["ownerReferences"] == [
        {
            "apiVersion": "tickwork.io/v1",
            "kind": "Schedule",
            "name": "backup",
            "uid": uid,
            "controller": True,
        }
    ]
    assert metadata["labels"] == {
        "team": "data",
        LABEL_SCHEDULE_NAMESPACE: NAMESPACE,
        LABEL_SCHEDULE: "backup",
        LABEL_JOB_ID: str(job["id"]),
        LABEL_OCCURRENCE: str(int(job["occurrence_at"].timestamp())),
    }
    assert body["spec"]["template"]["spec"]["containers"] == CONTAINERS
    assert body["spec"]["backoffLimit"] == 0

    # The operator lists the running Job as CronJob lists its active Jobs.
    reference = {"apiVersion": "batch/v1", "kind": "Job", "name": name, "namespace": NAMESPACE}
    await wait_until(
        lambda: (
            [
                {key: entry.get(key) for key in reference}
                for entry in status(cluster, "backup").get("active") or []
            ]
            == [reference]
        ),
        timeout=DEADLINE,
        what="status.active to name the running Job",
    )
    assert status(cluster, "backup").get("lastSuccessfulTime") is None

    # The Job completes: the tickwork job succeeds and the status says so.
    await wait_watching(controller, name)
    await controller.finish(name, "Complete")
    succeeded = await wait_status(aconn, job["id"], "succeeded", timeout=DEADLINE)
    assert succeeded["attempt"] == 1
    await wait_until(
        lambda: (
            status(cluster, "backup").get("lastSuccessfulTime") is not None
            and not status(cluster, "backup").get("active")
        ),
        timeout=DEADLINE,
        what="status.lastSuccessfulTime set and status.active empty",
    )
    stored = row(database_url, "backup")
    assert stored is not None and stored["last_success_at"] is not None
    assert status(cluster, "backup")["lastSuccessfulTime"] == stored["last_success_at"].strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )
    assert controller.created() == [name]  # nothing else fired while suspended
    assert [row["id"] for row in await jobs(aconn)] == [job["id"]]


async def test_the_successful_jobs_history_limit_keeps_only_the_newest_job(
    cluster: Cluster,
    start_operator: OperatorFactory,
    controller: JobController,
    start_worker: StartWorker,
    database_url: str,
    aconn: psycopg.AsyncConnection[Any],
) -> None:
    await start_operator()
    await cluster.create("report", {**SPEC, "successfulJobsHistoryLimit": 1})
    await cluster.wait_ready("report", "Synced")
    await start_worker("containers")

    names = []
    for number, start in enumerate(("2030-01-01T00:00:00Z", "2030-01-01T01:00:00Z")):
        if number:
            await set_suspended(cluster, database_url, "report", False)
        job, body = await one_occurrence(cluster, controller, database_url, aconn, "report")
        name = body["metadata"]["name"]
        names.append(name)
        await wait_watching(controller, name)
        await controller.finish(name, "Complete", start=start)
        await wait_status(aconn, job["id"], "succeeded", timeout=DEADLINE)

    first, second = names
    assert first != second
    # The second Job's attempt pruned the first (background propagation: its pods go too).
    await wait_until(
        lambda: controller.names() == [second],
        timeout=DEADLINE,
        what=f"only the newest Job {second} to remain",
    )
    deletes = controller.deletes()
    assert [call.name for call in deletes] == [first]
    assert controller.created() == [first, second]
    assert [job["status"] for job in await jobs(aconn)] == ["succeeded", "succeeded"]
