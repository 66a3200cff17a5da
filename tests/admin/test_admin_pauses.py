"""Pause and resume from the console: the API and the overview's forms (operator role, a
confirmation box the server insists on, audited with the console identity, idempotent), and
the scope rules (a namespace-scoped operator pauses only its namespaces, never a queue)."""

from __future__ import annotations

from typing import Any

import psycopg
from aiohttp.test_utils import TestClient

import tickwork
from tests.admin import admin_helpers
from tests.admin.admin_helpers import OPERATOR, TEAM_A, VIEWER
from tests.support.schedule_helpers import every


async def post(
    client: TestClient, path: str, body: dict[str, Any], headers: dict[str, str], status: int
) -> dict[str, Any]:
    response = await client.post(path, json=body, headers=headers)
    assert response.status == status, await response.text()
    result: dict[str, Any] = await response.json()
    return result


async def test_the_api_pauses_and_resumes_a_queue_audited_and_idempotent(
    client: TestClient, app: tickwork.App, conn: psycopg.Connection
) -> None:
    body = {"name": "emails", "reason": "smtp down", "request_id": "p-1"}
    paused = await post(client, "/api/pauses/queue/pause", body, OPERATOR, 200)
    assert paused["changed"] and paused["target"] == "queue:emails"
    assert [(p.scope, p.name, p.paused_by) for p in app.list_pauses()] == [
        ("queue", "emails", "alice")
    ]
    again = await post(client, "/api/pauses/queue/pause", {"name": "emails"}, OPERATOR, 200)
    assert not again["changed"]
    resumed = await post(client, "/api/pauses/queue/resume", {"name": "emails"}, OPERATOR, 200)
    assert resumed["changed"] and app.list_pauses() == []
    records = [
        (r["actor"], r["action"], r["target"], r["reason"]) for r in admin_helpers.audit_rows(conn)
    ]
    assert records == [
        ("alice", "pause", "queue:emails", "smtp down"),
        ("alice", "resume", "queue:emails", None),
    ]
    overview = await (await client.get("/api/overview", headers=OPERATOR)).json()
    assert overview["pauses"] == []


async def test_viewers_and_scoped_operators_are_refused_what_they_may_not_do(
    client: TestClient, app: tickwork.App
) -> None:
    app.sync_schedules("team-a", [every("s", 60)])
    app.sync_schedules("team-b", [every("s", 60)])
    await post(client, "/api/pauses/queue/pause", {"name": "emails"}, VIEWER, 403)
    await post(client, "/api/pauses/queue/pause", {"name": "emails"}, TEAM_A, 403)
    await post(client, "/api/pauses/namespace/pause", {"name": "team-b"}, TEAM_A, 403)
    assert app.list_pauses() == []
    ok = await post(client, "/api/pauses/namespace/pause", {"name": "team-a"}, TEAM_A, 200)
    assert ok["changed"] and [p.name for p in app.list_pauses()] == ["team-a"]
    await post(client, "/api/pauses/queue/pause", {}, OPERATOR, 400)  # no name


async def test_the_overview_forms_need_their_confirmation(
    client: TestClient, app: tickwork.App, conn: psycopg.Connection
) -> None:
    await admin_helpers.log_in(client)
    page = await (await client.get("/")).text()
    assert "Pause queue" in page and "Pause namespace" in page and "I confirm" in page
    form = admin_helpers.hidden_fields(page)
    assert form.pop("confirm") == "yes"  # the box's value, sent only when ticked
    unconfirmed = await client.post(
        "/pauses/queue/pause", data={**form, "name": "emails"}, allow_redirects=False
    )
    assert unconfirmed.status == 400 and "confirm" in await unconfirmed.text()
    assert app.list_pauses() == []

    confirmed = await client.post(
        "/pauses/queue/pause",
        data={**form, "name": "emails", "reason": "smtp down", "confirm": "yes"},
        allow_redirects=False,
    )
    assert (confirmed.status, confirmed.headers["Location"]) == (303, "/?flash=changed")
    shown = await (await client.get("/")).text()
    assert "emails" in shown and "smtp down" in shown and "Resume queue" in shown
    form = admin_helpers.hidden_fields(shown)
    resumed = await client.post(
        "/pauses/queue/resume",
        data={**form, "name": "emails", "confirm": "yes"},
        allow_redirects=False,
    )
    assert resumed.headers["Location"] == "/?flash=changed"
    assert app.list_pauses() == []
    assert [r["action"] for r in admin_helpers.audit_rows(conn)] == ["pause", "resume"]


async def test_viewers_see_the_pauses_but_no_forms(client: TestClient, app: tickwork.App) -> None:
    app.pause_queue("emails", actor="ops", reason="smtp down")
    await admin_helpers.log_in(client, "victor", admin_helpers.VIEWER_SECRET)
    page = await (await client.get("/")).text()
    assert "smtp down" in page and "Pausing needs the operator role." in page
    assert "Resume queue" not in page and "Pause queue" not in page
