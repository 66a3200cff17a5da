"""Shared helpers of the schedule tests: definition factories, a firing pass at a pinned
instant, and row readers. Import as ``from tests.support import schedule_helpers``."""

from __future__ import annotations

import asyncio
import signal
from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg.rows import dict_row

import tickwork

# every test syncs at T0 (a Tuesday, midnight UTC) unless it says otherwise
from tests.support.helpers import T0
from tickwork.maintenance import firing
from tickwork.model import Backoff
from tickwork.schedules.definition import ScheduleDefinition
from tickwork.schedules.options import ConcurrencyPolicy, JobTemplate, MisfirePolicy
from tickwork.settings import WorkerSettings
from tickwork.worker.runner import Worker

NIGHTLY_DEFINITION = ScheduleDefinition(
    name="nightly-report",
    schedule="0 3 * * *",
    time_zone="Europe/London",
    concurrency_policy=ConcurrencyPolicy.FORBID,
    starting_deadline_seconds=300,
    misfire_policy=MisfirePolicy.CATCH_UP,
    catch_up_limit=3,
    job=JobTemplate(
        kind="report.nightly",
        payload={"format": "pdf"},
        max_attempts=5,
        retry=Backoff(base=30, rate=1.5, max=3600),
        timeout_seconds=600,
        concurrency_key="reports",
    ),
)
"""A definition using every field (the manifest and CRD tests' full example)."""

KIND = "s.job"
NS = "ns"


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def cron(name: str, expression: str, **fields: Any) -> ScheduleDefinition:
    job = fields.pop("job", JobTemplate(kind=KIND))
    return ScheduleDefinition(name=name, job=job, schedule=expression, **fields)


def every(name: str, seconds: float, **fields: Any) -> ScheduleDefinition:
    job = fields.pop("job", JobTemplate(kind=KIND))
    return ScheduleDefinition(name=name, job=job, every=timedelta(seconds=seconds), **fields)


async def fire(
    conn: psycopg.AsyncConnection[Any], now: datetime, namespaces: tuple[str, ...] = (NS,)
) -> firing.FireReport:
    return await firing.run_once(conn, namespaces, now)


def jobs(conn: psycopg.Connection[Any], name: str | None = None) -> list[dict[str, Any]]:
    """Jobs (of schedule ``name``), oldest first."""
    with conn.cursor(row_factory=dict_row) as cur:
        cur.execute(
            "SELECT * FROM tickwork.jobs WHERE %(name)s::text IS NULL OR schedule_name = %(name)s"
            " ORDER BY occurrence_at NULLS LAST, id",
            {"name": name},
        )
        return cur.fetchall()


def occurrences(conn: psycopg.Connection[Any], name: str) -> list[datetime]:
    return [job["occurrence_at"] for job in jobs(conn, name)]


def schedule(conn: psycopg.Connection[Any], name: str, namespace: str = NS) -> dict[str, Any]:
    """The row of tickwork.schedules."""
    with conn.cursor(row_factory=dict_row) as cur:
        cur.execute(
            "SELECT * FROM tickwork.schedules WHERE namespace = %s AND name = %s",
            (namespace, name),
        )
        row = cur.fetchone()
    assert row is not None, f"no schedule {namespace}/{name}"
    return row


# --- process targets (multiprocessing spawn) ---------------------------------------------------


def fire_in_process(database_url: str, now: str) -> None:
    """One firing pass of namespace NS at ``now`` (ISO), in a process of its own."""

    async def main() -> None:
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
            await firing.run_once(conn, [NS], datetime.fromisoformat(now))

    asyncio.run(main())


def serve_schedules(database_url: str, name: str, namespaces: tuple[str, ...] = (NS,)) -> None:
    """A worker process offering ``namespaces`` and running its jobs (each returns a value,
    so the completion write carries state too) until SIGTERM."""
    app = tickwork.App(database_url)

    @app.task(KIND)
    async def seen(job: tickwork.Job) -> Any:
        return {"by": name}

    settings = WorkerSettings(
        database_url=database_url, app="tests", name=name, namespaces=namespaces, poll_seconds=0.5
    )
    worker = Worker(app, settings)

    async def main() -> None:
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, worker.stop)
        await worker.run()

    try:
        asyncio.run(main())
    finally:
        app.close()
