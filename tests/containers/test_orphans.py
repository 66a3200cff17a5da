"""The container-jobs reconciler (``containers/orphans.py``) driven pass by pass
(``run_once`` at a pinned ``now``) against kmock standing in for the Kubernetes API server (no
real one can run here) and a real PostgreSQL; the test creates the Jobs and sets the jobs'
statuses itself.

Covered: an active Job whose tickwork job is succeeded, dead, cancelled or gone is deleted
(background propagation), logged and counted by reason; the Jobs of available and running jobs,
finished Jobs, Jobs without a job id and Jobs in other namespaces are kept (Jobs being deleted:
test_manifests.py); a namespace is reconciled once per interval by one worker of the fleet, and
only a namespace of the worker's own; lists read in pages; a namespace refused (403) skipped
while the others are reconciled; a Job deleted meanwhile not counted.
"""

from __future__ import annotations

import logging
from typing import Any

import psycopg
import pytest
from prometheus_client import REGISTRY

import tickwork
from tests.containers.cluster import JobController
from tests.containers.conftest import NAMESPACE
from tests.containers.test_container_jobs import enqueue
from tests.support.helpers import at
from tickwork.containers import kube, orphans
from tickwork.containers.manifests import GONE, Orphan
from tickwork.schedules.container_jobs import LABEL_JOB_ID

COUNTER = "tickwork_container_jobs_orphans_deleted_total"


def reconciler(client: kube.Client, worker: str = "w1", *namespaces: str) -> orphans.OrphanJobs:
    config = orphans.OrphanJobsConfig(worker=worker, namespaces=namespaces or (NAMESPACE,))
    return orphans.OrphanJobs(client, config)


def body(name: str, job_id: int | str | None, **status: Any) -> dict[str, Any]:
    """A Job as a worker creates it (labelled with its tickwork job's id, unless None)."""
    labels = {} if job_id is None else {LABEL_JOB_ID: str(job_id)}
    spec = {"template": {"spec": {"restartPolicy": "Never", "containers": []}}}
    made: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
    }
    if status:
        made["status"] = status
    return made


async def job_with_status(app: tickwork.App, aconn: psycopg.AsyncConnection, status: str) -> int:
    job_id = await enqueue(app)
    await aconn.execute(
        "UPDATE tickwork.jobs SET status = %s, finished_at = now(), "
        "lease_expires_at = CASE WHEN %s = 'running' THEN now() + interval '1 hour' END "
        "WHERE id = %s",
        (status, status, job_id),
    )
    return job_id


def counted(reason: str) -> float:
    return REGISTRY.get_sample_value(COUNTER, {"reason": reason}) or 0.0


async def test_active_jobs_of_finished_or_gone_jobs_are_deleted_and_the_others_kept(
    app: tickwork.App,
    client: kube.Client,
    controller: JobController,
    aconn: psycopg.AsyncConnection,
    caplog: pytest.LogCaptureFixture,
) -> None:
    ids = {s: await job_with_status(app, aconn, s) for s in ("succeeded", "dead", "cancelled")}
    pending = await job_with_status(app, aconn, "available")
    running = await job_with_status(app, aconn, "running")
    gone = await job_with_status(app, aconn, "succeeded")
    await aconn.execute("DELETE FROM tickwork.jobs WHERE id = %s", (gone,))  # retention
    for status, job_id in ids.items():
        await controller.create(body(status, job_id))
    await controller.create(body("gone", gone))
    await controller.create(body("pending", pending))  # handed back: the next attempt adopts it
    await controller.create(body("running", running))
    failed = {"conditions": [{"type": "Failed", "status": "True"}]}
    await controller.create(body("cancelled-finished", ids["cancelled"], **failed))
    await controller.create(body("unlabelled", None))
    await controller.create(body("not-a-job-id", "abc"))
    await controller.create(body("other-namespace", ids["cancelled"]), namespace="other")
    before = {reason: counted(reason) for reason in (*ids, GONE)}
    caplog.set_level(logging.INFO, logger=orphans.__name__)

    deleted = await reconciler(client).run_once(aconn, at(0))

    assert {d.orphan for d in deleted} == {
        *(Orphan(status, job_id, status) for status, job_id in ids.items()),
        Orphan("gone", gone, GONE),
    }
    assert {d.namespace for d in deleted} == {NAMESPACE}
    assert controller.names() == [
        "cancelled-finished",
        "not-a-job-id",
        "pending",
        "running",
        "unlabelled",
    ]
    assert controller.names("other") == ["other-namespace"]
    for call in controller.deletes():
        assert call.params == {"propagationPolicy": "Background"}
    assert {reason: counted(reason) - before[reason] for reason in before} == {
        "succeeded": 1,
        "dead": 1,
        "cancelled": 1,
        GONE: 1,
    }
    logged = {
        (r.job_id, r.kubernetes_job, r.namespace, r.reason)  # type: ignore[attr-defined]
        for r in caplog.records
        if getattr(r, "action", None) == "kubernetes_job_orphan_deleted"
    }
    assert logged == {(d.orphan.job_id, d.orphan.name, NAMESPACE, d.orphan.reason) for d in deleted}
    # One list (the labelled Jobs) and the deletes: no request per Job kept.
    assert [c.verb for c in controller.server.calls] == ["list"] + ["delete"] * 4
    assert controller.server.calls[0].params["labelSelector"] == LABEL_JOB_ID


async def test_a_namespace_is_reconciled_once_per_interval_by_one_worker_of_the_fleet(
    app: tickwork.App,
    client: kube.Client,
    controller: JobController,
    aconn: psycopg.AsyncConnection,
) -> None:
    first, second = reconciler(client, "w1"), reconciler(client, "w2")
    interval = first.config.interval

    def lists() -> int:
        return sum(1 for call in controller.server.calls if call.verb == "list")

    assert await first.run_once(aconn, at(0)) == []
    assert lists() == 1
    await second.run_once(aconn, at(0))  # the duty is taken for the interval
    await first.run_once(aconn, at(interval - 1))
    assert lists() == 1
    job_id = await job_with_status(app, aconn, "cancelled")
    await controller.create(body("late", job_id))
    deleted = await second.run_once(aconn, at(interval))
    assert [d.orphan for d in deleted] == [Orphan("late", job_id, "cancelled")]
    assert lists() == 2
    row = await (
        await aconn.execute(
            "SELECT last_run_by FROM tickwork.duties WHERE name = %s",
            (orphans.DUTY_PREFIX + NAMESPACE,),
        )
    ).fetchone()
    assert row == ("w2",)


async def test_lists_are_read_in_pages(
    app: tickwork.App,
    client: kube.Client,
    controller: JobController,
    aconn: psycopg.AsyncConnection,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(kube, "PAGE", 2)
    for number in range(5):
        job_id = await job_with_status(app, aconn, "cancelled")
        await controller.create(body(f"job-{number}", job_id))

    deleted = await reconciler(client).run_once(aconn, at(0))

    assert sorted(d.orphan.name for d in deleted) == [f"job-{n}" for n in range(5)]
    pages = [call.params for call in controller.server.calls if call.verb == "list"]
    assert [page.get("continue") for page in pages] == [None, "2", "4"]
    assert {page["limit"] for page in pages} == {"2"}


async def test_a_namespace_refused_is_skipped_and_the_others_reconciled(
    app: tickwork.App,
    client: kube.Client,
    controller: JobController,
    aconn: psycopg.AsyncConnection,
    caplog: pytest.LogCaptureFixture,
) -> None:
    controller.server.forbidden.add("no-role")
    job_id = await job_with_status(app, aconn, "dead")
    await controller.create(body("orphan", job_id))

    deleted = await reconciler(client, "w1", "no-role", NAMESPACE).run_once(aconn, at(0))

    assert [d.orphan for d in deleted] == [Orphan("orphan", job_id, "dead")]
    action = "kubernetes_reconcile_failed"
    failures = [r for r in caplog.records if getattr(r, "action", None) == action]
    assert [r.namespace for r in failures] == ["no-role"]  # type: ignore[attr-defined]
    assert "403" in failures[0].getMessage()


async def test_a_job_deleted_meanwhile_is_not_counted(
    app: tickwork.App,
    client: kube.Client,
    controller: JobController,
    aconn: psycopg.AsyncConnection,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    job_id = await job_with_status(app, aconn, "cancelled")
    await controller.create(body("raced", job_id))
    delete = kube.Jobs.delete

    async def deleted_first(self: kube.Jobs, namespace: str, name: str) -> bool:
        async with controller.server.delete(controller.url(namespace, name)) as response:
            assert response.status < 300  # its worker deleted it between list and delete
        return await delete(self, namespace, name)

    monkeypatch.setattr(kube.Jobs, "delete", deleted_first)
    before = counted("cancelled")

    assert await reconciler(client).run_once(aconn, at(0)) == []
    assert counted("cancelled") == before
    assert controller.names() == []
