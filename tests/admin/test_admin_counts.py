"""Counts that survive history limits, end to end: two worker processes run 500 jobs of one
every-second schedule whose history limits keep 3 succeeded and 1 failed job, and trim its
history as they go (their retention duty); afterwards 3 job rows are left, and the console
(overview chart and queue totals, schedules list, schedule page) and ``tickwork schedules``
(table and ``-o json``) all say 500 runs, while the schedule's lists say how many the limits
keep."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from aiohttp.test_utils import TestClient

import tickwork
from tests.admin.admin_helpers import OPERATOR
from tests.cli.test_cli import ok, tickwork_cmd
from tests.support.forking import process_context
from tests.support.helpers import (
    MP_KIND,
    recorded_ids,
    scalar,
    serve_worker,
    stop_processes,
    wait_until,
)
from tickwork.clock import SettableClock
from tickwork.schedules.definition import ScheduleDefinition
from tickwork.schedules.options import JobTemplate

NS, NAME = "billing", "tick"
RUNS = 500


@pytest.fixture
def workers(database_url: str, tmp_path: Path) -> Iterator[list[Any]]:
    """Two worker processes (spawned, as in production), each running retention every 0.5 s;
    stopped by their own pids at the end."""
    ctx = process_context()
    overrides = {"concurrency": 10, "claim_batch": 50, "maintenance_seconds": 0.5}
    started = [
        ctx.Process(
            target=serve_worker,
            args=(database_url, name, str(tmp_path), overrides),
            name=name,
            daemon=True,
        )
        for name in ("counted-a", "counted-b")
    ]
    for process in started:
        process.start()
    yield started
    stop_processes(started)


async def get_json(client: TestClient, path: str) -> Any:
    response = await client.get(path, headers=OPERATOR)
    assert response.status == 200, await response.text()
    return await response.json()


async def get_page(client: TestClient, path: str) -> str:
    response = await client.get(path, headers=OPERATOR)
    assert response.status == 200, await response.text()
    return await response.text()


async def test_500_runs_of_a_schedule_keeping_3_jobs_are_counted_500_everywhere(
    app: tickwork.App,
    clock: SettableClock,
    conn: psycopg.Connection[Any],
    database_url: str,
    tmp_path: Path,
    client: TestClient,
    workers: list[Any],
) -> None:
    every_second = ScheduleDefinition(
        name=NAME,
        job=JobTemplate(kind=MP_KIND),
        every=timedelta(seconds=1),
        successful_jobs_history_limit=3,
        failed_jobs_history_limit=1,
    )
    app.sync_schedules(NS, [every_second])
    now: datetime = scalar(conn, "SELECT date_trunc('second', now())")
    clock.set(now)
    report = app.backfill(NS, NAME, now - timedelta(seconds=RUNS - 1), now, actor="test")
    assert report.created == RUNS

    def drained_and_trimmed() -> bool:
        ran = sum(len(ids) for ids in recorded_ids(tmp_path).values())
        jobs = conn.execute(
            "SELECT count(*) FILTER (WHERE status IN ('available', 'running')),"
            "       count(*) FILTER (WHERE status = 'succeeded')"
            " FROM tickwork.jobs WHERE schedule_name = %s",
            (NAME,),
        ).fetchone()
        return ran == RUNS and jobs == (0, 3)

    await wait_until(
        drained_and_trimmed, timeout=90, what="500 runs, and the history trimmed to 3 jobs"
    )
    stop_processes(workers)
    clock.set(scalar(conn, "SELECT now()"))

    overview = await get_json(client, "/api/overview")
    assert sum(slot["succeeded"] for slot in overview["activity"]["slots"]) == RUNS
    (queue,) = [q for q in overview["queues"] if q["queue"] == "default"]
    assert queue["succeeded"] == RUNS

    listed = await get_json(client, f"/api/schedules?namespace={NS}")
    (summary,) = listed["schedules"]
    assert (summary["runs"]["runs"], summary["runs"]["succeeded"]) == (RUNS, RUNS)
    assert summary["runs"]["success_rate"] == 1.0
    assert re.search(rf'<span title="{RUNS} succeeded, 0 dead[^"]*">{RUNS}</span>', (
        await get_page(client, f"/schedules?namespace={NS}")
    ))  # fmt: skip

    detail = await get_json(client, f"/api/schedules/{NS}/{NAME}")
    assert detail["summary"]["runs"]["succeeded"] == RUNS
    assert sum(slot["succeeded"] for slot in detail["activity"]["slots"]) == RUNS
    assert len(detail["jobs"]) == 3
    assert detail["history_limits"] == {"succeeded": 3, "failed": 1}
    page = await get_page(client, f"/schedules/{NS}/{NAME}")
    assert f"<strong>{RUNS} runs</strong> (100.0% succeeded): {RUNS} succeeded" in page
    assert page.count("the last 3 succeeded and 1 failed (dead or cancelled)") == 2
    jobs = await get_page(client, f"/jobs?namespace={NS}&schedule={NAME}")
    assert jobs.count("the last 3 succeeded and 1 failed (dead or cancelled)") == 1

    (row,) = json.loads(ok(tickwork_cmd("schedules", "-o", "json", database_url=database_url)))
    assert (row["total_runs"], row["succeeded_runs"], row["failed_runs"]) == (RUNS, RUNS, 0)
    assert row["success_rate"] == 1.0
    table = ok(tickwork_cmd("schedules", database_url=database_url)).splitlines()
    header, line = table[0].split(), table[1].split()
    assert header[header.index("RUNS") :][:3] == ["RUNS", "SUCCEEDED", "FAILED"]
    assert f"{RUNS} {RUNS} 0" in " ".join(line)
