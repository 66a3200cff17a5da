"""The overview's waiting jobs per queue and schedule namespace: how many are available and due,
and how long the oldest has waited (now less its run_at), in all and per namespace, jobs
enqueued outside any schedule being one more group; the clock drives the waits. A viewer
scoped to team-a sees only team-a's."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg
import pytest
from aiohttp.test_utils import TestClient

import tickwork
from tests.admin import admin_helpers
from tests.admin.admin_helpers import TEAM_A, VIEWER
from tickwork.admin import pages
from tickwork.clock import SettableClock

Waits = dict[tuple[str, str | None, bool], tuple[int, float]]


@pytest.fixture
def world(app: tickwork.App, conn: psycopg.Connection[Any], clock: SettableClock) -> None:
    now = clock.now()

    def job(queue: str, namespace: str | None, ago: float) -> int:
        job_id = app.enqueue("k.wait", {}, queue=queue, run_at=now - timedelta(seconds=ago))
        conn.execute(
            "UPDATE tickwork.jobs SET schedule_namespace = %s, schedule_name = %s WHERE id = %s",
            (namespace, None if namespace is None else "s", job_id),
        )
        return job_id

    job("default", "team-a", 300)
    job("default", "team-a", 60)
    job("default", "team-a", -3600)  # due later: not waiting
    job("default", "team-b", 30)
    job("default", None, 600)
    job("other", None, 10)
    admin_helpers.make_dead(conn, job("other", "team-b", 900))  # not waiting


async def waits(client: TestClient, headers: dict[str, str]) -> Waits:
    response = await client.get("/api/overview", headers=headers)
    assert response.status == 200, await response.text()
    return {
        (w["queue"], w["namespace"], w["by_queue"]): (w["waiting"], w["oldest_wait_seconds"])
        for w in (await response.json())["waits"]
    }


async def test_waiting_jobs_per_namespace_and_oldest_wait(
    client: TestClient, world: None, clock: SettableClock
) -> None:
    assert await waits(client, VIEWER) == {
        ("default", None, True): (4, 600.0),
        ("default", "team-a", False): (2, 300.0),
        ("default", "team-b", False): (1, 30.0),
        ("default", None, False): (1, 600.0),
        ("other", None, True): (1, 10.0),
        ("other", None, False): (1, 10.0),
    }
    clock.advance(100)
    assert (await waits(client, VIEWER))[("default", "team-a", False)] == (2, 400.0)

    response = await client.get("/", headers=VIEWER)
    page = await response.text()
    assert "Waiting jobs per schedule namespace" in page
    assert pages.layout.NO_NAMESPACE in page and "11m 40s" in page  # the no-namespace job, 700 s


async def test_a_scoped_viewer_sees_only_its_namespace(client: TestClient, world: None) -> None:
    assert await waits(client, TEAM_A) == {
        ("default", None, True): (2, 300.0),
        ("default", "team-a", False): (2, 300.0),
    }
    page = await (await client.get("/", headers=TEAM_A)).text()
    assert "team-b" not in page and pages.layout.NO_NAMESPACE not in page


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(0, "0s"), (45.9, "45s"), (185, "3m 05s"), (7210, "2h 00m 10s"), (273600, "3d 4h 00m 00s")],
)
def test_a_wait_reads_to_the_second(seconds: float, shown: str) -> None:
    assert pages.layout.wait(seconds) == shown
