"""Container schedules (``spec.jobTemplate``) on a real PostgreSQL: each occurrence is one job
of the reserved kind whose payload is the ContainerJob the worker reads, through the same
firing, backfill, trigger and overlap paths as any schedule (time zone, misfire, Replace)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import psycopg

import tickwork
from tests.support.schedule_helpers import NS, at, cron, every, fire, jobs, schedule
from tickwork.clock import SettableClock
from tickwork.db import admin as admin_db
from tickwork.db import jobs as jobs_db
from tickwork.db import store
from tickwork.model import Job
from tickwork.schedules import container_jobs, policies
from tickwork.schedules.container_jobs import ContainerJob
from tickwork.schedules.definition import ScheduleDefinition
from tickwork.schedules.options import (
    ConcurrencyPolicy,
    ContainerTemplate,
    JobTemplate,
    MisfirePolicy,
)

TEMPLATE: dict[str, Any] = {
    "metadata": {"labels": {"team": "data"}},
    "spec": {
        "backoffLimit": 0,
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "busybox", "command": ["date"]}],
            }
        },
    },
}
JOB = JobTemplate(kind=container_jobs.KIND, queue="containers", max_attempts=3, timeout_seconds=600)


def container(**fields: Any) -> ContainerTemplate:
    return ContainerTemplate(copy.deepcopy(TEMPLATE), **fields)


def payload(name: str, namespace: str = NS, owner: str | None = None) -> dict[str, Any]:
    return ContainerJob(
        namespace=namespace, schedule=name, template=TEMPLATE, owner_uid=owner
    ).to_payload()


def claim(conn: psycopg.Connection[Any], seconds: float) -> list[Job]:
    op = jobs_db.claim_jobs("w", ["containers"], {container_jobs.KIND: 25}, 10, 30, at(seconds))
    return store.run(conn, op)


async def test_an_occurrence_becomes_one_container_job_with_its_payload(
    app: tickwork.App,
    aconn: psycopg.AsyncConnection[Any],
    conn: psycopg.Connection[Any],
    clock: SettableClock,
) -> None:
    clock.set(datetime(2030, 3, 9, 12, tzinfo=UTC))
    # 02:30 does not exist in New York on 2030-03-10: it fires once, at 03:00 EDT.
    definition = cron(
        "backup", "30 2 * * *", time_zone="America/New_York", job=JOB, container=container()
    )
    app.sync_schedules(NS, [definition])
    await fire(aconn, datetime(2030, 3, 11, tzinfo=UTC))
    (job,) = jobs(conn, "backup")
    assert job["occurrence_at"] == datetime(2030, 3, 10, 7, tzinfo=UTC)
    assert (job["kind"], job["queue"], job["max_attempts"], job["timeout_seconds"]) == (
        container_jobs.KIND,
        "containers",
        3,
        600,
    )
    assert job["payload"] == payload("backup")
    read = ContainerJob.from_payload(job["payload"])  # what the worker reads
    assert (read.namespace, read.schedule, read.owner_uid) == (NS, "backup", None)
    assert (read.successful_jobs_history_limit, read.failed_jobs_history_limit) == (3, 1)
    # The Job's name the worker will create, and the status will show, for its first attempt.
    assert container_jobs.job_name("backup", job["occurrence_at"], job["id"], 1) == (
        f"backup-{int(job['occurrence_at'].timestamp())}"
    )


async def test_the_operators_namespace_and_owner_reach_the_payload(
    app: tickwork.App, aconn: psycopg.AsyncConnection[Any], conn: psycopg.Connection[Any]
) -> None:
    """A Schedule of Kubernetes namespace team-a syncing into schedule namespace NS: its Jobs go
    to team-a, owned by the object."""
    definition = every("backup", 60, job=JOB, container=container()).owned_by("team-a", "u-1")
    app.sync_schedules(NS, [definition])
    await fire(aconn, at(60))
    (job,) = jobs(conn, "backup")
    assert job["payload"] == payload("backup", "team-a", "u-1")
    assert (job["schedule_namespace"], job["schedule_name"]) == (NS, "backup")


async def test_misfire_latest_fires_one_container_job_after_an_outage(
    app: tickwork.App, aconn: psycopg.AsyncConnection[Any], conn: psycopg.Connection[Any]
) -> None:
    definition = every(
        "backup", 60, job=JOB, container=container(), misfire_policy=MisfirePolicy.LATEST
    )
    app.sync_schedules(NS, [definition])
    report = await fire(aconn, at(600))
    assert (report.fired, report.skipped) == (1, 9)
    (job,) = jobs(conn, "backup")
    assert (job["occurrence_at"], job["kind"]) == (at(600), container_jobs.KIND)


async def test_replace_cancels_the_running_container_job_and_fires_a_new_one(
    app: tickwork.App, aconn: psycopg.AsyncConnection[Any], conn: psycopg.Connection[Any]
) -> None:
    """The running job is asked to stop (its worker deletes the Job); the new one carries the
    same kind of payload."""
    definition = every(
        "backup",
        60,
        job=JOB,
        container=container(),
        concurrency_policy=ConcurrencyPolicy.REPLACE,
    )
    app.sync_schedules(NS, [definition])
    await fire(aconn, at(60))
    (running,) = claim(conn, 61)
    assert running.kind == container_jobs.KIND
    report = await fire(aconn, at(120))
    assert report.fired == 1
    old, new = jobs(conn, "backup")
    assert (old["status"], old["cancel_requested_at"]) == ("running", at(120))
    assert (new["status"], new["kind"], new["payload"]) == (
        "available",
        container_jobs.KIND,
        payload("backup"),
    )


async def test_forbid_skips_while_the_container_job_runs(
    app: tickwork.App, aconn: psycopg.AsyncConnection[Any], conn: psycopg.Connection[Any]
) -> None:
    definition = every(
        "backup", 60, job=JOB, container=container(), concurrency_policy=ConcurrencyPolicy.FORBID
    )
    app.sync_schedules(NS, [definition])
    await fire(aconn, at(60))
    claim(conn, 61)
    report = await fire(aconn, at(120))
    assert (report.fired, report.skipped) == (0, 1)
    assert len(jobs(conn, "backup")) == 1


def test_backfill_and_trigger_make_container_jobs(
    app: tickwork.App, conn: psycopg.Connection[Any], clock: SettableClock
) -> None:
    app.sync_schedules(NS, [cron("backup", "0 * * * *", job=JOB, container=container())])
    clock.set(at(86400))
    report = app.backfill(NS, "backup", at(3600), at(3 * 3600), actor="alice")
    assert (report.created, report.existing) == (3, 0)
    assert app.backfill(NS, "backup", at(3600), at(3 * 3600), actor="alice").created == 0
    job_id = app.trigger(NS, "backup", actor="bob", request_id="r-1")
    assert app.trigger(NS, "backup", actor="bob", request_id="r-1") == job_id  # one per id
    found = jobs(conn, "backup")
    assert [j["occurrence_at"] for j in found] == [at(3600), at(7200), at(10800), None]
    assert {j["kind"] for j in found} == {container_jobs.KIND}
    assert all(j["payload"] == payload("backup") for j in found)
    # A trigger has no occurrence: its Job is named after the job id.
    assert container_jobs.job_name("backup", None, job_id, 1) == f"backup-x{job_id}"


def test_a_schedule_changed_to_a_container_gets_a_new_revision(
    app: tickwork.App, conn: psycopg.Connection[Any]
) -> None:
    app.sync_schedules(NS, [every("backup", 60)])
    assert schedule(conn, "backup")["revision"] == 1
    changed = every("backup", 60, job=JOB, container=container())
    report = app.sync_schedules(NS, [changed])
    assert report.updated == ["backup"]
    row = schedule(conn, "backup")
    assert row["revision"] == 2
    assert row["spec"]["jobTemplate"] == TEMPLATE
    assert "kind" not in row["spec"]["job"]
    assert app.sync_schedules(NS, [changed]).unchanged == ["backup"]
    new_owner = changed.owned_by("team-a", "u-2")
    assert app.sync_schedules(NS, [new_owner]).updated == ["backup"]


def test_the_payload_is_made_in_one_place() -> None:
    """``schedule_job`` builds every schedule's job; the container payload ignores carried
    state (a task schedule's state replaces its payload)."""
    definition = ScheduleDefinition(
        name="backup", job=JOB, container=container(), schedule="@daily"
    )
    job = policies.schedule_job(NS, definition, None, state={"carried": 1})
    assert (job.kind, job.payload) == (container_jobs.KIND, payload("backup"))
    task = ScheduleDefinition(name="t", job=JobTemplate(kind="k", payload=1), schedule="@daily")
    assert policies.schedule_job(NS, task, None, state={"carried": 1}).payload == {"carried": 1}


def test_the_console_lists_a_container_schedule_with_the_reserved_kind(
    app: tickwork.App, conn: psycopg.Connection[Any]
) -> None:
    """The console's schedule listing reads the kind from the stored spec (its SQL names the
    reserved kind for a jobTemplate spec)."""
    app.sync_schedules(NS, [every("backup", 60, job=JOB, container=container()), every("t", 60)])
    op = admin_db.schedules(namespace=NS, after=None, limit=10, scope=None)
    kinds = {summary.name: summary.kind for summary in store.run(conn, op)}
    assert kinds == {"backup": container_jobs.KIND, "t": "s.job"}


def test_the_schedules_history_limits_reach_the_container_payload() -> None:
    """The worker prunes a schedule's Kubernetes Jobs by the limits its payload carries."""
    definition = ScheduleDefinition(
        name="backup",
        job=JOB,
        container=container(),
        schedule="@daily",
        successful_jobs_history_limit=0,
        failed_jobs_history_limit=7,
    )
    job = policies.schedule_job(NS, definition, None, state=None)
    read = ContainerJob.from_payload(job.payload)
    assert (read.successful_jobs_history_limit, read.failed_jobs_history_limit) == (0, 7)
