"""The container-job task in an in-process worker, against kmock standing in for the
Kubernetes API server (no real one can run here) and a real PostgreSQL; the test plays the
Job controller by patching each Job's status.

Covered: the Job created (name, labels on Job and pod template, attempt annotation, owner
reference, activeDeadlineSeconds) and its completion; a failed Job retried as a new ``-a2``
Job, then dead; cancel deleting the Job (background propagation), and the Replace policy
doing the same; DeadlineExceeded as a timeout, and the worker's own deadline past it; history
limits pruning older Jobs; a foreign Job holding the name refused and left alone; a Job
created by a racing worker between list and create adopted; a Job deleted by someone else
failing the attempt; a watch re-established when the server ends it, refused (503) or
expired (410); five requests per Job (no polling); the exact verbs the worker uses.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import psycopg
import pytest

import tickwork
from tests.containers.cluster import JobController
from tests.containers.conftest import NAMESPACE, USED
from tests.support.helpers import running, settings, wait_status, wait_until
from tickwork.containers import task as container_task
from tickwork.model import Backoff
from tickwork.schedules.container_jobs import (
    ANNOTATION_ATTEMPT,
    KIND,
    LABEL_JOB_ID,
    LABEL_SCHEDULE,
    LABEL_SCHEDULE_NAMESPACE,
    ContainerJob,
    job_name,
)
from tickwork.schedules.definition import ScheduleDefinition
from tickwork.schedules.options import ConcurrencyPolicy, JobTemplate
from tickwork.worker.runner import Worker

TEMPLATE: dict[str, Any] = {
    "metadata": {"labels": {"team": "billing"}},
    "spec": {
        "backoffLimit": 2,
        "template": {
            "metadata": {"labels": {"app": "report"}},
            "spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "busybox", "command": ["true"]}],
            },
        },
    },
}
NO_DELAY = Backoff(base=0.0, rate=1.0, max=0.0)


def payload(schedule: str = "report", **overrides: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "namespace": NAMESPACE,
        "schedule": schedule,
        "template": TEMPLATE,
        "owner_uid": "uid-of-the-schedule",
        **overrides,
    }
    return ContainerJob(**fields).to_payload()


def worker(app: tickwork.App, database_url: str, **overrides: Any) -> Worker:
    return Worker(app, settings(database_url, **overrides))


async def enqueue(app: tickwork.App, body: dict[str, Any] | None = None, **fields: Any) -> int:
    fields.setdefault("retry", NO_DELAY)
    return int(await app.enqueue_async(KIND, body or payload(), **fields))


async def wait_job(controller: JobController, name: str) -> dict[str, Any]:
    await wait_until(lambda: controller.get(name) is not None, what=f"Job {name}")
    body = controller.get(name)
    assert body is not None
    return body


async def wait_watching(controller: JobController, name: str, count: int = 1) -> None:
    """Until the worker has opened ``count`` watches of the Job ``name``."""

    def watches() -> int:
        return sum(
            1
            for call in controller.server.calls
            if call.verb == "watch" and call.params.get("fieldSelector") == f"metadata.name={name}"
        )

    await wait_until(lambda: watches() >= count, what=f"{count} watches of {name}")


# --- create, complete ---------------------------------------------------------------------


async def test_a_job_creates_one_kubernetes_job_and_succeeds_when_it_completes(
    app: tickwork.App, database_url: str, controller: JobController, aconn: psycopg.AsyncConnection
) -> None:
    async with running(worker(app, database_url)):
        job_id = await enqueue(app, timeout=600)
        name = job_name("report", None, job_id, 1)
        body = await wait_job(controller, name)
        await wait_watching(controller, name)
        await controller.finish(name, "Complete")
        row = await wait_status(aconn, job_id, "succeeded")
    metadata = body["metadata"]
    labels = {
        LABEL_SCHEDULE_NAMESPACE: NAMESPACE,
        LABEL_SCHEDULE: "report",
        LABEL_JOB_ID: str(job_id),
    }
    assert metadata["labels"] == {"team": "billing", **labels}
    assert body["spec"]["template"]["metadata"]["labels"] == {"app": "report", **labels}
    assert metadata["annotations"] == {ANNOTATION_ATTEMPT: "1"}
    assert metadata["ownerReferences"] == [
        {
            "apiVersion": "tickwork.io/v1",
            "kind": "Schedule",
            "name": "report",
            "uid": "uid-of-the-schedule",
            "controller": True,
        }
    ]
    assert body["spec"]["activeDeadlineSeconds"] == 600
    assert body["spec"]["backoffLimit"] == 2
    assert controller.created() == [name]
    assert row["attempt"] == 1
    # No polling: one list (adoption), the create, one watch for the whole run, one list of
    # its pods (the termination message), one list (history) — five requests for a Job,
    # however long it runs.
    calls = [(call.verb, call.resource) for call in controller.server.calls]
    assert calls == [
        ("list", "jobs.batch"),
        ("create", "jobs.batch"),
        ("watch", "jobs.batch"),
        ("list", "pods"),
        ("list", "jobs.batch"),
    ]
    assert row["result"] == {
        "job": f"{NAMESPACE}/{name}",
        "outcome": "Complete",
        "completionTime": "2030-01-01T00:01:00Z",
        "container": "main",
        "terminationMessage": None,
    }


async def test_a_watch_ended_by_the_server_is_re_established_from_the_last_version(
    app: tickwork.App,
    database_url: str,
    controller: JobController,
    aconn: psycopg.AsyncConnection,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(container_task, "WATCH_SECONDS", 1.0)  # kmock ends each after 1 s
    async with running(worker(app, database_url)):
        job_id = await enqueue(app)
        name = job_name("report", None, job_id, 1)
        await wait_job(controller, name)
        await wait_watching(controller, name, count=3)
        await controller.finish(name, "Complete")
        await wait_status(aconn, job_id, "succeeded")
    watches = [call for call in controller.server.calls if call.verb == "watch"]
    assert all(call.params.get("resourceVersion") for call in watches)
    assert all(call.params.get("timeoutSeconds") == "1" for call in watches)
    assert controller.created() == [name]


async def test_a_refused_watch_is_retried_after_a_pause_and_a_fresh_read(
    app: tickwork.App, database_url: str, controller: JobController, aconn: psycopg.AsyncConnection
) -> None:
    controller.server.fail_next_watch()
    async with running(worker(app, database_url)):
        job_id = await enqueue(app)
        name = job_name("report", None, job_id, 1)
        await wait_job(controller, name)
        await wait_watching(controller, name, count=2)  # the first one was refused
        await controller.finish(name, "Complete")
        await wait_status(aconn, job_id, "succeeded")
    verbs = [call.verb for call in controller.server.calls]
    assert verbs == ["list", "create", "watch", "get", "watch", "list", "list"]  # pods, history


# --- failure, retry, dead -----------------------------------------------------------------


async def test_a_failed_job_is_retried_as_a_second_job_then_dead_when_out_of_attempts(
    app: tickwork.App, database_url: str, controller: JobController, aconn: psycopg.AsyncConnection
) -> None:
    async with running(worker(app, database_url)):
        job_id = await enqueue(app, max_attempts=2)
        first = job_name("report", None, job_id, 1)
        await wait_job(controller, first)
        await wait_watching(controller, first)
        await controller.finish(first, "Failed", reason="BackoffLimitExceeded", message="pods")
        second = job_name("report", None, job_id, 2)
        assert second == f"{first}-a2"
        body = await wait_job(controller, second)
        assert body["metadata"]["annotations"][ANNOTATION_ATTEMPT] == "2"
        await wait_watching(controller, second)
        await controller.finish(second, "Complete")
        await wait_status(aconn, job_id, "succeeded", attempt=2)

        doomed = await enqueue(app, max_attempts=1)
        name = job_name("report", None, doomed, 1)
        await wait_job(controller, name)
        await wait_watching(controller, name)
        await controller.finish(name, "Failed", reason="BackoffLimitExceeded", message="3 pods")
        row = await wait_status(aconn, doomed, "dead")
    assert f"Job {NAMESPACE}/{name} failed: BackoffLimitExceeded: 3 pods" in row["last_error"]
    assert controller.created() == [first, second, name]


# --- cancel and Replace -------------------------------------------------------------------


def _deleted_in_background(controller: JobController, name: str) -> bool:
    return any(
        call.name == name and call.params.get("propagationPolicy") == "Background"
        for call in controller.deletes()
    )


async def test_cancel_deletes_the_job_in_the_background_and_records_the_job_cancelled(
    app: tickwork.App, database_url: str, controller: JobController, aconn: psycopg.AsyncConnection
) -> None:
    async with running(worker(app, database_url)):
        job_id = await enqueue(app)
        name = job_name("report", None, job_id, 1)
        await wait_job(controller, name)
        await wait_watching(controller, name)
        await asyncio.to_thread(app.cancel, job_id)
        await wait_status(aconn, job_id, "cancelled")
    assert _deleted_in_background(controller, name)
    assert controller.get(name) is None


async def test_the_replace_policy_deletes_the_running_job_of_the_previous_occurrence(
    app: tickwork.App, database_url: str, controller: JobController, aconn: psycopg.AsyncConnection
) -> None:
    definition = ScheduleDefinition(
        name="report",
        every=timedelta(seconds=2),
        concurrency_policy=ConcurrencyPolicy.REPLACE,
        job=JobTemplate(kind=KIND, payload=payload(), retry=NO_DELAY),
    )
    await asyncio.to_thread(app.sync_schedules, NAMESPACE, [definition])
    async with running(worker(app, database_url, namespaces=(NAMESPACE,))):
        await wait_until(lambda: len(controller.created()) >= 1, what="the first Job")
        first = controller.created()[0]
        await wait_until(lambda: len(controller.created()) >= 2, what="the next occurrence's Job")
        await wait_until(lambda: _deleted_in_background(controller, first), what="the delete")
    cur = await aconn.execute(
        "SELECT status::text FROM tickwork.jobs ORDER BY occurrence_at LIMIT 1"
    )
    assert await cur.fetchone() == ("cancelled",)
    assert controller.get(first) is None


# --- timeout ------------------------------------------------------------------------------


async def test_deadline_exceeded_is_a_timeout_and_the_template_deadline_wins(
    app: tickwork.App, database_url: str, controller: JobController, aconn: psycopg.AsyncConnection
) -> None:
    async with running(worker(app, database_url)):
        job_id = await enqueue(app, timeout=120, max_attempts=1)
        name = job_name("report", None, job_id, 1)
        body = await wait_job(controller, name)
        assert body["spec"]["activeDeadlineSeconds"] == 120
        await wait_watching(controller, name)
        await controller.finish(name, "Failed", reason="DeadlineExceeded", message="too long")
        row = await wait_status(aconn, job_id, "dead")
        assert "timed out: Job ns/" in row["last_error"]
        assert "activeDeadlineSeconds (120s)" in row["last_error"]

        own = {**TEMPLATE, "spec": {**TEMPLATE["spec"], "activeDeadlineSeconds": 7200}}
        other = await enqueue(app, payload(template=own), timeout=120)
        body = await wait_job(controller, job_name("report", None, other, 1))
    assert body["spec"]["activeDeadlineSeconds"] == 7200


async def test_a_job_still_running_past_its_deadline_is_deleted_and_times_out(
    app: tickwork.App,
    database_url: str,
    controller: JobController,
    aconn: psycopg.AsyncConnection,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The Job controller never enforces the deadline here: the worker does, a margin later."""
    monkeypatch.setattr(container_task, "DEADLINE_MARGIN_SECONDS", 0.5)
    async with running(worker(app, database_url)):
        job_id = await enqueue(app, timeout=1, max_attempts=1)
        name = job_name("report", None, job_id, 1)
        row = await wait_status(aconn, job_id, "dead")
    assert "timed out" in row["last_error"] and "deleted" in row["last_error"]
    assert _deleted_in_background(controller, name)
    assert controller.get(name) is None


# --- history limits -----------------------------------------------------------------------


def _finished_job(name: str, schedule: str, job_id: int) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": {
                LABEL_SCHEDULE_NAMESPACE: NAMESPACE,
                LABEL_SCHEDULE: schedule,
                LABEL_JOB_ID: str(job_id),
            },
        },
        "spec": TEMPLATE["spec"],
    }


async def test_history_limits_prune_the_oldest_finished_jobs_of_the_schedule_only(
    app: tickwork.App, database_url: str, controller: JobController, aconn: psycopg.AsyncConnection
) -> None:
    # Earlier Jobs of the schedule: three succeeded, two failed, one still running; and a
    # succeeded Job of another schedule, which is never touched.
    olds = {
        "old-ok-1": ("Complete", "2029-01-01T00:00:01Z"),
        "old-ok-2": ("Complete", "2029-01-01T00:00:02Z"),
        "old-ok-3": ("Complete", "2029-01-01T00:00:03Z"),
        "old-bad-1": ("Failed", "2029-01-01T00:00:01Z"),
        "old-bad-2": ("Failed", "2029-01-01T00:00:02Z"),
    }
    for number, (name, (condition, start)) in enumerate(olds.items(), start=1000):
        await controller.create(_finished_job(name, "report", number))
        await controller.finish(name, condition, start=start)
    await controller.create(_finished_job("old-running", "report", 2000))
    await controller.create(_finished_job("other-ok", "other", 3000))
    await controller.finish("other-ok", "Complete", start="2028-01-01T00:00:00Z")

    body = payload(successful_jobs_history_limit=2, failed_jobs_history_limit=1)
    async with running(worker(app, database_url)):
        job_id = await enqueue(app, body)
        name = job_name("report", None, job_id, 1)
        await wait_job(controller, name)
        await wait_watching(controller, name)
        await controller.finish(name, "Complete", start="2030-01-01T00:00:00Z")
        await wait_status(aconn, job_id, "succeeded")
        await wait_until(lambda: controller.get("old-ok-2") is None, what="the pruning")
    assert controller.names() == sorted([name, "old-ok-3", "old-bad-2", "old-running", "other-ok"])
    pruned = {call.name for call in controller.deletes()}
    assert pruned == {"old-ok-1", "old-ok-2", "old-bad-1"}
    assert all(
        call.params.get("propagationPolicy") == "Background" for call in controller.deletes()
    )


# --- a stranger holding the name ----------------------------------------------------------


async def test_a_foreign_job_holding_the_name_fails_the_attempt_and_is_left_untouched(
    app: tickwork.App, database_url: str, controller: JobController, aconn: psycopg.AsyncConnection
) -> None:
    job_id = await enqueue(app, max_attempts=1)  # no worker yet
    name = job_name("report", None, job_id, 1)
    await controller.create(_finished_job(name, "report", 999))
    await controller.create(_finished_job("unlabelled", "report", 0))
    before = controller.get(name)
    async with running(worker(app, database_url)):
        row = await wait_status(aconn, job_id, "dead")
    assert (
        f"Job {NAMESPACE}/{name} already exists and belongs to tickwork job 999 "
        f"(label tickwork.io/job-id), not to job {job_id}: not adopted"
    ) in row["last_error"]
    assert controller.get(name) == before
    touched = [call for call in controller.server.calls if call.name == name]
    assert [call.verb for call in touched] == ["create", "get"]


async def test_a_job_created_by_a_racing_worker_after_the_list_is_adopted_not_duplicated(
    app: tickwork.App, database_url: str, controller: JobController, aconn: psycopg.AsyncConnection
) -> None:
    """The race between the list and the create: the create answers AlreadyExists, the Job
    read back carries this job's id, so it is adopted."""
    job_id = await enqueue(app)  # no worker yet
    name = job_name("report", None, job_id, 1)
    await controller.create(_finished_job(name, "report", job_id))
    controller.server.unlisted.add(name)
    async with running(worker(app, database_url)):
        await wait_watching(controller, name)
        await controller.finish(name, "Complete")
        await wait_status(aconn, job_id, "succeeded")
    touched = [call.verb for call in controller.server.calls if call.name == name]
    assert touched[:2] == ["create", "get"]  # refused as AlreadyExists, then read
    assert controller.names() == [name]


async def test_a_job_deleted_by_someone_else_fails_the_attempt_and_the_retry_makes_another(
    app: tickwork.App, database_url: str, controller: JobController, aconn: psycopg.AsyncConnection
) -> None:
    async with running(worker(app, database_url)):
        job_id = await enqueue(app, max_attempts=2)
        first = job_name("report", None, job_id, 1)
        await wait_job(controller, first)
        await wait_watching(controller, first)
        async with controller.server.delete(controller.url(NAMESPACE, first)) as response:
            assert response.status < 300
        second = job_name("report", None, job_id, 2)
        await wait_job(controller, second)
        await wait_watching(controller, second)
        await controller.finish(second, "Complete")
        row = await wait_status(aconn, job_id, "succeeded", attempt=2)
    assert f"Job {NAMESPACE}/{first} was deleted before it finished" in row["last_error"]


# --- the verbs the worker's Role must grant -----------------------------------------------


async def test_the_worker_uses_exactly_its_verbs_on_jobs_and_pods_in_the_namespace(
    app: tickwork.App,
    database_url: str,
    controller: JobController,
    aconn: psycopg.AsyncConnection,
) -> None:
    """A run that uses every request the worker can send: list (adoption, pruning), create,
    watch, get (a watch the server expired: 410 Gone, read again), delete (cancel). kmock's
    request log then holds exactly these verbs on jobs.batch in the payload's namespace: what
    the chart's Role grants, nothing more."""
    controller.server.expire_next_watch = True
    async with running(worker(app, database_url)):
        done = await enqueue(app)
        name = job_name("report", None, done, 1)
        await wait_job(controller, name)
        await wait_watching(controller, name, count=2)  # the first one expired
        await controller.finish(name, "Complete")
        await wait_status(aconn, done, "succeeded")
        stopped = await enqueue(app)
        other = job_name("report", None, stopped, 1)
        await wait_job(controller, other)
        await wait_watching(controller, other)
        await asyncio.to_thread(app.cancel, stopped)
        await wait_status(aconn, stopped, "cancelled")
    used = {(call.verb, call.resource, call.namespace) for call in controller.server.calls}
    assert used == USED
    gets = [call.name for call in controller.server.calls if call.verb == "get"]
    assert gets == [name]


# --- a worker shutting down ---------------------------------------------------------------


async def test_a_stopping_worker_hands_its_job_back_at_once_and_the_next_adopts_its_job(
    app: tickwork.App, database_url: str, controller: JobController, aconn: psycopg.AsyncConnection
) -> None:
    """No grace period spent, no attempt counted, the Job not deleted: a rolling update of the
    workers costs a container job nothing. (``running`` allows 10 s to stop: far less than
    the 600 s grace.)"""
    async with running(worker(app, database_url, shutdown_grace_seconds=600.0)):
        job_id = await enqueue(app, max_attempts=1)
        name = job_name("report", None, job_id, 1)
        await wait_job(controller, name)
        await wait_watching(controller, name)
    row = await wait_status(aconn, job_id, "available", attempt=0)
    assert row["last_error"] is None
    assert controller.get(name) is not None
    assert not controller.deletes()

    async with running(worker(app, database_url, name="w2")):
        await wait_watching(controller, name, count=2)
        await controller.finish(name, "Complete")
        row = await wait_status(aconn, job_id, "succeeded", attempt=1)
    assert row["picked_by"] == "w2"
    assert controller.created() == [name]  # adopted by the next worker, not created again
