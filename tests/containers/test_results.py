"""A container job's result: its Kubernetes Job's outcome and the termination message of its
first container, read from the Job's pods (kmock holds the pods the test creates, as the Job
controller would). A failed Job's message ends the attempt's error; pods that cannot be read
leave the message out and never fail the job. The pure part (which pod, which container,
which selector) is tested without a server."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

import tickwork
from tests.containers.cluster import JobController
from tests.containers.conftest import NAMESPACE
from tests.containers.test_container_jobs import enqueue, wait_job, wait_watching, worker
from tests.support.helpers import running, wait_status
from tickwork.containers import kube, termination
from tickwork.schedules.container_jobs import job_name


def pod(
    job: str,
    name: str,
    phase: str,
    started: str,
    messages: dict[str, str],
    *,
    last_state: bool = False,
) -> dict[str, Any]:
    state = "lastState" if last_state else "state"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"job-name": job}},
        "status": {
            "phase": phase,
            "startTime": started,
            "containerStatuses": [
                {"name": container, state: {"terminated": {"exitCode": 0, "message": text}}}
                for container, text in messages.items()
            ],
        },
    }


async def create_pod(controller: JobController, body: dict[str, Any]) -> None:
    async with controller.server.post(f"/api/v1/namespaces/{NAMESPACE}/pods", json=body) as r:
        assert r.status < 300, await r.text()


async def test_a_succeeded_job_returns_its_outcome_and_first_containers_message(
    app: tickwork.App, database_url: str, controller: JobController, aconn: psycopg.AsyncConnection
) -> None:
    async with running(worker(app, database_url)):
        job_id = await enqueue(app)
        name = job_name("report", None, job_id, 1)
        await wait_job(controller, name)
        await wait_watching(controller, name)
        older = pod(name, "p1", "Failed", "2030-01-01T00:00:01Z", {"main": "disk full"})
        await create_pod(controller, older)
        done = pod(name, "p2", "Succeeded", "2030-01-01T00:00:30Z", {"sidecar": "bye", "main": ""})
        done["status"]["containerStatuses"][1]["state"]["terminated"]["message"] = (
            '{"tables": 10} <b>\n'
        )
        await create_pod(controller, done)
        await create_pod(controller, pod("another-job", "p3", "Succeeded", "2030", {"main": "x"}))
        await controller.finish(name, "Complete")
        row = await wait_status(aconn, job_id, "succeeded")
    assert row["result"] == {
        "job": f"{NAMESPACE}/{name}",
        "outcome": "Complete",
        "completionTime": "2030-01-01T00:01:00Z",
        "container": "main",
        "terminationMessage": '{"tables": 10} <b>',
    }
    assert row["result_error"] is None
    pods = [c for c in controller.server.calls if c.resource == "pods"]
    assert [(c.verb, c.params.get("labelSelector")) for c in pods] == [("list", f"job-name={name}")]


async def test_a_failed_jobs_message_ends_the_attempts_error(
    app: tickwork.App, database_url: str, controller: JobController, aconn: psycopg.AsyncConnection
) -> None:
    async with running(worker(app, database_url)):
        job_id = await enqueue(app, max_attempts=1)
        name = job_name("report", None, job_id, 1)
        await wait_job(controller, name)
        await wait_watching(controller, name)
        await create_pod(controller, pod(name, "p1", "Failed", "2030", {"main": "table 7: no"}))
        await controller.finish(name, "Failed", reason="BackoffLimitExceeded", message="gave up")
        row = await wait_status(aconn, job_id, "dead")
    assert row["last_error"].endswith(
        f"Job {NAMESPACE}/{name} failed: BackoffLimitExceeded: gave up; "
        "its container said: table 7: no"
    )
    assert row["result"] is None


async def test_pods_that_cannot_be_read_leave_the_message_out(
    app: tickwork.App,
    database_url: str,
    controller: JobController,
    aconn: psycopg.AsyncConnection,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def forbidden(self: kube.Jobs, namespace: str, selector: str) -> list[Any]:
        raise kube.ApiError(403, "Forbidden", 'pods is forbidden in the namespace "ns"')

    monkeypatch.setattr(kube.Jobs, "pods", forbidden)
    async with running(worker(app, database_url)):
        job_id = await enqueue(app)
        name = job_name("report", None, job_id, 1)
        await wait_job(controller, name)
        await wait_watching(controller, name)
        await controller.finish(name, "Complete")
        row = await wait_status(aconn, job_id, "succeeded")
    assert row["result"]["terminationMessage"] is None
    assert row["result"]["outcome"] == "Complete"
    (logged,) = [
        r for r in caplog.records if getattr(r, "action", None) == "kubernetes_pods_unread"
    ]
    assert "403 Forbidden" in logged.getMessage()


# --- pure ---------------------------------------------------------------------------------

JOB: dict[str, Any] = {
    "metadata": {"name": "j"},
    "spec": {"template": {"spec": {"containers": [{"name": "main"}, {"name": "side"}]}}},
}


def test_the_selector_is_the_jobs_own_else_its_name() -> None:
    selected = {**JOB, "spec": {**JOB["spec"], "selector": {"matchLabels": {"b": "2", "a": "1"}}}}
    assert termination.pod_selector(selected) == "a=1,b=2"
    assert termination.pod_selector(JOB) == "job-name=j"
    assert termination.pod_selector({"spec": {"selector": "junk"}}) == "job-name="


def test_the_message_comes_from_the_newest_pod_that_ended_as_the_job() -> None:
    pods = [
        pod("j", "a", "Succeeded", "2030-01-01T00:00:01Z", {"main": "old success"}),
        pod("j", "b", "Failed", "2030-01-01T00:00:09Z", {"main": "newest failure"}),
        pod("j", "c", "Succeeded", "2030-01-01T00:00:05Z", {"main": "new success"}),
    ]
    assert termination.message(JOB, pods, succeeded=True) == "new success"
    assert termination.message(JOB, pods, succeeded=False) == "newest failure"
    restarted = [pod("j", "a", "Running", "2030", {"main": "before restart"}, last_state=True)]
    assert termination.message(JOB, restarted, succeeded=True) == "before restart"
    long = [pod("j", "a", "Succeeded", "2030", {"main": "m" * 10_000})]
    assert termination.message(JOB, long, succeeded=True) == "m" * 4096


@pytest.mark.parametrize(
    ("job", "pods"),
    [
        (JOB, []),
        (JOB, [pod("j", "a", "Succeeded", "2030", {"side": "only the sidecar spoke"})]),
        (JOB, [pod("j", "a", "Succeeded", "2030", {"main": "   "})]),
        (JOB, [{"status": {"containerStatuses": "junk"}}, {"status": None}, {}]),
        ({"spec": {"template": {"spec": {"containers": []}}}}, [pod("j", "a", "S", "", {"": ""})]),
        ({}, []),
    ],
)
def test_no_message_when_there_is_none(job: dict[str, Any], pods: list[Any]) -> None:
    assert termination.message(job, pods, succeeded=True) is None
