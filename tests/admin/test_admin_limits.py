"""Limits from the console: the API and the overview's forms (operator role, unscoped, a
confirmation box the server insists on, audited with the console identity, idempotent, a
wrong value refused naming its field), and the overview showing each limit's use: running
against max, recent starts against the rate."""

from __future__ import annotations

import psycopg
from aiohttp.test_utils import TestClient

import tickwork
from tests.admin import admin_helpers
from tests.admin.admin_helpers import OPERATOR, TEAM_A, VIEWER
from tests.admin.test_admin_pauses import post


def rules(app: tickwork.App) -> list[tuple[str, str, str]]:
    return [(r.rule.scope.value, r.rule.name, r.rule.describe()) for r in app.list_limits()]


async def test_the_api_limits_and_unlimits_a_queue_audited_and_idempotent(
    client: TestClient, app: tickwork.App, conn: psycopg.Connection
) -> None:
    body = {
        "name": "emails", "max_running": 3, "rate": "100/min", "rate_key": "customer",
        "reason": "smtp quota", "request_id": "l-1",
    }  # fmt: skip
    limited = await post(client, "/api/limits/queue/limit", body, OPERATOR, 200)
    assert limited["changed"] and limited["target"] == "queue:emails"
    assert rules(app) == [("queue", "emails", "max 3 running, 100/min per customer")]
    replayed = await post(client, "/api/limits/queue/limit", body, OPERATOR, 200)
    assert not replayed["changed"]
    same = {k: v for k, v in body.items() if k != "request_id"}
    assert not (await post(client, "/api/limits/queue/limit", same, OPERATOR, 200))["changed"]
    await post(client, "/api/limits/kind/limit", {"name": "mail.send", "max_running": 2},
               OPERATOR, 200)  # fmt: skip
    ns = {"name": "team-a", "weight": 3, "max_running": 10}
    await post(client, "/api/limits/namespace/limit", ns, OPERATOR, 200)

    overview = await (await client.get("/api/overview", headers=OPERATOR)).json()
    shown = {(r["rule"]["scope"], r["rule"]["name"]): r for r in overview["limits"]}
    emails = shown["queue", "emails"]
    assert (emails["rule"]["max_running"], emails["rule"]["rate"]) == (
        3, {"starts": 100, "period_seconds": 60.0}
    )  # fmt: skip
    assert (emails["running"], emails["recent_starts"]) == (0, 0)
    assert shown["namespace", "team-a"]["rule"]["weight"] == 3

    removed = await post(client, "/api/limits/queue/unlimit", {"name": "emails"}, OPERATOR, 200)
    assert removed["changed"]
    again = await post(client, "/api/limits/queue/unlimit", {"name": "emails"}, OPERATOR, 200)
    assert not again["changed"]
    records = [
        (r["actor"], r["action"], r["target"], r["reason"]) for r in admin_helpers.audit_rows(conn)
    ]
    assert records == [
        ("alice", "limit", "queue:emails", "smtp quota"),
        ("alice", "limit", "kind:mail.send", None),
        ("alice", "limit", "namespace:team-a", None),
        ("alice", "unlimit", "queue:emails", None),
    ]


async def test_bad_values_are_refused_naming_the_field(
    client: TestClient, app: tickwork.App
) -> None:
    for body, field in (
        ({"name": "q", "max_running": 0}, "max_running"),
        ({"name": "q", "max_running": -1}, "max_running"),
        ({"name": "q", "max_running": 10**12}, "max_running"),
        ({"name": "q", "max_running": "nan"}, "max_running"),
        ({"name": "q", "max_running": True}, "max_running"),
        ({"name": "q", "rate": "5/fortnight"}, "rate"),
        ({"name": "q", "rate_key": "customer"}, "rate_key"),
        ({"name": "q", "weight": 2}, "weight"),
        ({"name": "q"}, "limit"),
        ({"max_running": 1}, "queue"),
    ):
        answer = await post(client, "/api/limits/queue/limit", body, OPERATOR, 400)
        assert field in str(answer), (body, answer)
    assert app.list_limits() == []


async def test_viewers_and_scoped_operators_may_not_limit(
    client: TestClient, app: tickwork.App
) -> None:
    body = {"name": "emails", "max_running": 1}
    await post(client, "/api/limits/queue/limit", body, VIEWER, 403)
    await post(client, "/api/limits/queue/limit", body, TEAM_A, 403)
    await post(client, "/api/limits/namespace/limit", {"name": "team-a", "weight": 9}, TEAM_A, 403)
    assert app.list_limits() == []
    app.set_limit("queue", "emails", max_running=1)
    await post(client, "/api/limits/queue/unlimit", {"name": "emails"}, TEAM_A, 403)
    assert len(app.list_limits()) == 1


async def test_the_overview_forms_need_their_confirmation_and_show_the_use(
    client: TestClient, app: tickwork.App, conn: psycopg.Connection
) -> None:
    app.enqueue("t.limit", {}, queue="emails")
    await admin_helpers.log_in(client)
    page = await (await client.get("/")).text()
    assert "Limit queue" in page and "Limit kind" in page and "Limit namespace" in page
    form = admin_helpers.hidden_fields(page)
    assert form.pop("confirm") == "yes"
    fields = {"name": "emails", "max_running": "2", "rate": "50/10s", "rate_key": ""}
    unconfirmed = await client.post(
        "/limits/queue/limit", data={**form, **fields}, allow_redirects=False
    )
    assert unconfirmed.status == 400 and "confirm" in await unconfirmed.text()
    wrong = await client.post(
        "/limits/queue/limit",
        data={**form, **fields, "max_running": "0", "confirm": "yes"},
        allow_redirects=False,
    )
    assert wrong.status == 400 and "max_running" in await wrong.text()
    assert app.list_limits() == []

    confirmed = await client.post(
        "/limits/queue/limit",
        data={**form, **fields, "reason": "smtp quota", "confirm": "yes"},
        allow_redirects=False,
    )
    assert (confirmed.status, confirmed.headers["Location"]) == (303, "/?flash=changed")
    shown = await (await client.get("/")).text()
    assert "max 2 running, 50/10s" in shown
    assert "0/2 running" in shown and "0 of 50/10s started" in shown
    assert "Remove queue limit" in shown
    form = admin_helpers.hidden_fields(shown)
    removed = await client.post(
        "/limits/queue/unlimit",
        data={**form, "name": "emails", "confirm": "yes"},
        allow_redirects=False,
    )
    assert removed.headers["Location"] == "/?flash=changed"
    assert app.list_limits() == []
    assert [r["action"] for r in admin_helpers.audit_rows(conn)] == ["limit", "unlimit"]


async def test_a_full_limit_is_marked_and_viewers_see_no_forms(
    client: TestClient, app: tickwork.App, conn: psycopg.Connection
) -> None:
    app.enqueue("t.limit", {}, queue="emails")
    conn.execute("UPDATE tickwork.jobs SET status = 'running', attempt = 1, "
                 "lease_expires_at = now() + interval '1 minute'")  # fmt: skip
    app.set_limit("queue", "emails", max_running=1)
    await admin_helpers.log_in(client, "victor", admin_helpers.VIEWER_SECRET)
    page = await (await client.get("/")).text()
    assert 'class="warn" title="no room: its waiting jobs are held">1/1 running' in page
    assert "Limiting needs an unscoped operator." in page
    assert "Limit queue" not in page and "Remove queue limit" not in page
