"""A container Schedule (``spec.jobTemplate``) through the real operator against kmock and a real
PostgreSQL: it syncs with the object's namespace and uid, a worker's firing pass fires a job of
the reserved kind whose payload names them, ``status.active`` names the running job's Kubernetes
Job as a CronJob's does, and ``Served`` tells that no worker runs container jobs. The job is
claimed with the claim statement every worker runs (registering the reserved kind) instead of
the built-in task, which creates the Job (the worker side, tested against kmock on its own).
The run-now annotation makes one such job too."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg

from tests.operator.harness import DEADLINE, Cluster, OperatorFactory, row
from tests.operator.test_run_now import annotate, answered
from tests.operator.test_status_truth import fire_at, register, wait_served
from tests.support.helpers import wait_until
from tickwork.db import jobs as jobs_db
from tickwork.db import store
from tickwork.schedules import container_jobs
from tickwork.schedules.container_jobs import ContainerJob

TEMPLATE: dict[str, Any] = {
    "spec": {
        "backoffLimit": 1,
        "template": {
            "spec": {
                "restartPolicy": "OnFailure",
                "containers": [{"name": "main", "image": "busybox", "command": ["date"]}],
            }
        },
    }
}


def active(cluster: Cluster, name: str) -> list[dict[str, Any]]:
    return list((cluster.get(name) or {}).get("status", {}).get("active") or [])


async def test_a_container_schedule_fires_and_its_status_names_the_job(
    cluster: Cluster, start_operator: OperatorFactory, database_url: str
) -> None:
    await start_operator(live_worker_seconds=60)
    spec = {"every": "1m", "jobTemplate": TEMPLATE, "job": {"maxAttempts": 2}}
    await cluster.create("backup", spec)
    body = await cluster.wait_ready("backup", "Synced")
    uid = body["metadata"]["uid"]
    stored = row(database_url, "backup")
    assert stored is not None
    assert stored["spec"]["jobTemplate"] == TEMPLATE
    assert stored["spec"]["jobTemplateTarget"] == {"namespace": "ns", "ownerUid": uid}

    # A worker that fires the namespace but runs no container jobs: the jobs would wait.
    register(database_url, "plain", ["s.job"])
    served = await wait_served(cluster, "backup", "False", "KindNotRegistered")
    assert f"kind {container_jobs.KIND!r}" in served["message"]
    assert "--container-jobs" in served["message"]

    occurrence = stored["next_run_at"]
    assert await fire_at(database_url, occurrence) == 1
    with psycopg.connect(database_url, autocommit=True) as conn:
        (job,) = conn.execute("SELECT id, kind, payload, max_attempts FROM tickwork.jobs")
        assert (job[1], job[3]) == (container_jobs.KIND, 2)
        assert ContainerJob.from_payload(job[2]) == ContainerJob(
            namespace="ns", schedule="backup", template=TEMPLATE, owner_uid=uid
        )
        # Pending: no Job exists yet, so the entry names none.
        await wait_until(lambda: len(active(cluster, "backup")) == 1, what="active job")
        assert active(cluster, "backup")[0] == {
            "id": job[0],
            "status": "available",
            "occurrenceAt": occurrence.strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        # Claimed by a worker registering the reserved kind (its first attempt): the Job of
        # that attempt is listed as CronJob lists its active Jobs.
        claim = jobs_db.claim_jobs(
            "containers", ["default"], {container_jobs.KIND: 3}, 1, 60, occurrence
        )
        (claimed,) = store.run(conn, claim)
    name = container_jobs.job_name("backup", occurrence, claimed.id, 1)
    await wait_until(
        lambda: [e.get("name") for e in active(cluster, "backup")] == [name],
        timeout=DEADLINE,
        what="the running job's Kubernetes Job in status.active",
    )
    (entry,) = active(cluster, "backup")
    assert entry == {
        "id": claimed.id,
        "status": "running",
        "occurrenceAt": occurrence.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": f"backup-{int(occurrence.timestamp())}",
        "namespace": "ns",
    }

    # A worker registering the reserved kind serves it.
    register(database_url, "containers", [container_jobs.KIND])
    await wait_served(cluster, "backup", "True", "WorkersAvailable")
    after = row(database_url, "backup")
    assert after is not None and after["next_run_at"] == occurrence + timedelta(minutes=1)

    # Run now from kubectl: one job of the reserved kind, its Job named after the job id.
    await cluster.patch("backup", annotate("t1"))
    answer = await answered(cluster, "t1", "backup")
    with psycopg.connect(database_url) as conn:
        kind, payload, at = conn.execute(
            "SELECT kind, payload, occurrence_at FROM tickwork.jobs WHERE id = %s",
            (answer["jobId"],),
        ).fetchone() or (None, None, None)
    assert (kind, at) == (container_jobs.KIND, None)
    assert ContainerJob.from_payload(payload).owner_uid == uid
    assert container_jobs.job_name("backup", None, answer["jobId"], 1) == (
        f"backup-x{answer['jobId']}"
    )
