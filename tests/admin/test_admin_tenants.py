"""The console scoped per tenant: ann is an operator of schedule namespace ``team-a`` only.
She sees and acts on team-a's schedules and jobs; team-b's, and jobs enqueued outside any
schedule, are 403 in the API and the pages, actions included; listings, counts, workers and
the audit log show only what is hers. Global roles (alice, victor) still see everything."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from aiohttp.test_utils import TestClient

import tickwork
from tests.admin import admin_helpers
from tests.admin.admin_helpers import OPERATOR, TEAM_A, VIEWER
from tests.support.schedule_helpers import every
from tickwork.admin.security import HEADERS


@pytest.fixture
def world(app: tickwork.App, conn: psycopg.Connection, clock: Any) -> dict[str, int]:
    """A schedule in team-a and one in team-b, a triggered job of each (team-b's also dead),
    a job outside any schedule, and a worker firing both namespaces."""
    app.sync_schedules("team-a", [every("sweep", 60)])
    app.sync_schedules("team-b", [every("sweep", 60)])
    ids = {
        "a": app.trigger("team-a", "sweep", actor="setup"),
        "b": app.trigger("team-b", "sweep", actor="setup"),
        "b_dead": app.trigger("team-b", "sweep", actor="setup"),
        "plain": app.enqueue("k.run", {}),
    }
    admin_helpers.make_dead(conn, ids["b_dead"])
    admin_helpers.register_worker(conn, "w-1", now=clock.now(), namespaces=["team-a", "team-b"])
    conn.execute("DELETE FROM tickwork.audit_log")  # the setup's triggers
    return ids


async def get(client: TestClient, path: str, headers: dict[str, str] = TEAM_A) -> Any:
    response = await client.get(path, headers=headers)
    assert response.status == 200, await response.text()
    return await response.json()


async def test_a_tenant_lists_only_its_own(client: TestClient, world: dict[str, int]) -> None:
    assert (await get(client, "/api/whoami"))["namespaces"] == ["team-a"]
    jobs = (await get(client, "/api/jobs"))["jobs"]
    assert [j["id"] for j in jobs] == [world["a"]]
    schedules = await get(client, "/api/schedules")
    assert [(s["namespace"], s["name"]) for s in schedules["schedules"]] == [("team-a", "sweep")]
    assert [n["namespace"] for n in schedules["namespaces"]] == ["team-a"]
    overview = await get(client, "/api/overview")
    assert overview["totals"]["dead_jobs"] == 0 and overview["totals"]["namespaces"] == 1
    assert sum(q["due"] for q in overview["queues"]) == 1  # team-a's job, no other
    assert [(w["name"], w["namespaces"]) for w in overview["workers"]] == [("w-1", ["team-a"])]
    assert [o["jobs"] for o in overview["orphans"]] == [1]  # team-a's unserved job only

    everything = await get(client, "/api/jobs", VIEWER)  # a global role sees all
    assert {j["id"] for j in everything["jobs"]} == set(world.values())
    assert (await get(client, "/api/overview", VIEWER))["totals"]["dead_jobs"] == 1


@pytest.mark.parametrize(
    "path",
    [
        "/api/jobs/{b}",
        "/api/jobs/{plain}",
        "/api/jobs?namespace=team-b",
        "/api/schedules?namespace=team-b",
        "/api/schedules/team-b/sweep",
        "/api/schedules/team-b/absent",
        "/jobs/{b}",
        "/jobs/{plain}",
        "/schedules/team-b/sweep",
        "/jobs?namespace=team-b",
    ],
)
async def test_another_tenants_reads_are_forbidden(
    client: TestClient, world: dict[str, int], path: str
) -> None:
    response = await client.get(path.format(**world), headers=TEAM_A)
    assert response.status == 403
    assert "outside your schedule namespaces (team-a)" in await response.text()
    assert response.headers["Content-Security-Policy"] == HEADERS["Content-Security-Policy"]
    ok = await client.get(path.format(**world), headers=VIEWER)
    assert ok.status in (200, 404)  # a global role: no 403


@pytest.mark.parametrize(
    ("path", "target"),
    [
        ("/api/jobs/{b}/cancel", "b"),
        ("/api/jobs/{b}/run-now", "b"),
        ("/api/jobs/{b_dead}/retry", "b_dead"),
        ("/api/jobs/{plain}/cancel", "plain"),
        ("/api/schedules/team-b/sweep/trigger", None),
    ],
)
async def test_another_tenants_actions_are_forbidden_and_change_nothing(
    client: TestClient,
    app: tickwork.App,
    conn: psycopg.Connection,
    world: dict[str, int],
    path: str,
    target: str | None,
) -> None:
    before = {key: app.get_job(job_id).status for key, job_id in world.items()}
    response = await client.post(path.format(**world), json={"reason": "x"}, headers=TEAM_A)
    assert response.status == 403, await response.text()
    assert {key: app.get_job(job_id).status for key, job_id in world.items()} == before
    assert len(app.list_jobs()) == len(world)  # no trigger either
    assert admin_helpers.audit_rows(conn) == []


async def test_a_tenant_acts_on_its_own_and_sees_only_its_audit(
    client: TestClient, app: tickwork.App, world: dict[str, int]
) -> None:
    cancel = await client.post(
        f"/api/jobs/{world['a']}/cancel", json={"reason": "mine"}, headers=TEAM_A
    )
    assert cancel.status == 200 and (await cancel.json())["changed"]
    trigger = await client.post("/api/schedules/team-a/sweep/trigger", json={}, headers=TEAM_A)
    assert trigger.status == 200
    other = await client.post(
        f"/api/jobs/{world['b_dead']}/retry", json={"reason": "global"}, headers=OPERATOR
    )
    assert other.status == 200

    records = (await get(client, "/api/audit"))["records"]
    assert [(r["actor"], r["action"], r["target"]) for r in records] == [
        ("ann", "trigger", "schedule:team-a/sweep"),
        ("ann", "cancel", f"job:{world['a']}"),
    ]
    assert len((await get(client, "/api/audit", VIEWER))["records"]) == 3
