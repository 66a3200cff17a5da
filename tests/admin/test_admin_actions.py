"""The console's actions — run now, cancel, retry, trigger — through the API and through the
pages: each audited with actor, reason, request id and the target before and after; each
idempotent (a repeated request id, or a target already in that state, changes nothing)."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from aiohttp.test_utils import TestClient

import tickwork
from tests.admin import admin_helpers
from tests.admin.admin_helpers import OPERATOR
from tests.support import helpers
from tests.support.schedule_helpers import every
from tickwork.clock import SettableClock


async def act(
    client: TestClient, path: str, body: dict[str, Any] | None = None, status: int = 200
) -> dict[str, Any]:
    response = await client.post(path, json=body or {}, headers=OPERATOR)
    assert response.status == status, await response.text()
    result: dict[str, Any] = await response.json()
    return result


async def test_cancel_is_audited_with_before_and_after(
    client: TestClient, app: tickwork.App, conn: psycopg.Connection
) -> None:
    job_id = app.enqueue("k.run", {})
    result = await act(
        client, f"/api/jobs/{job_id}/cancel", {"reason": "stuck", "request_id": "req-1"}
    )
    assert result["changed"] and result["action"] == "cancel"
    assert app.get_job(job_id).status.value == "cancelled"
    (record,) = admin_helpers.audit_rows(conn)
    assert record["id"] == result["audit_id"]
    assert (record["actor"], record["action"], record["target"]) == (
        "alice",
        "cancel",
        f"job:{job_id}",
    )
    assert (record["reason"], record["request_id"]) == ("stuck", "req-1")
    assert record["at"] == helpers.T0
    assert record["details"]["before"]["status"] == "available"
    assert record["details"]["after"]["status"] == "cancelled"
    assert record["details"]["after"]["version"] == record["details"]["before"]["version"] + 1


async def test_a_repeated_request_id_changes_nothing(
    client: TestClient, app: tickwork.App, conn: psycopg.Connection
) -> None:
    job_id = app.enqueue("k.run", {})
    first = await act(client, f"/api/jobs/{job_id}/cancel", {"request_id": "same"})
    app.retry(job_id, actor="someone-else")  # available again: a second cancel would apply
    again = await act(client, f"/api/jobs/{job_id}/cancel", {"request_id": "same"})
    assert not again["changed"] and again["audit_id"] == first["audit_id"]
    assert app.get_job(job_id).status.value == "available"
    by_header = await client.post(
        f"/api/jobs/{job_id}/cancel", json={}, headers={**OPERATOR, "Idempotency-Key": "same"}
    )
    assert (await by_header.json())["audit_id"] == first["audit_id"]
    assert [r["action"] for r in admin_helpers.audit_rows(conn)] == ["cancel", "retry"]


async def test_an_action_already_in_effect_changes_and_records_nothing(
    client: TestClient, app: tickwork.App, conn: psycopg.Connection
) -> None:
    job_id = app.enqueue("k.run", {})
    await act(client, f"/api/jobs/{job_id}/cancel")
    again = await act(client, f"/api/jobs/{job_id}/cancel")
    assert not again["changed"] and again["audit_id"] is None
    assert again["message"] == f"job {job_id} is already cancelled"
    assert len(admin_helpers.audit_rows(conn)) == 1


async def test_retry_a_dead_job(
    client: TestClient, app: tickwork.App, conn: psycopg.Connection
) -> None:
    job_id = app.enqueue("k.run", {})
    admin_helpers.make_dead(conn, job_id)
    result = await act(client, f"/api/jobs/{job_id}/retry", {"reason": "fixed upstream"})
    assert result["changed"]
    job = app.get_job(job_id)
    assert (job.status.value, job.attempt) == ("available", 0)
    (record,) = admin_helpers.audit_rows(conn)
    assert (record["details"]["before"]["status"], record["details"]["before"]["attempt"]) == (
        "dead",
        3,
    )
    assert (record["details"]["after"]["status"], record["details"]["after"]["attempt"]) == (
        "available",
        0,
    )
    assert not (await act(client, f"/api/jobs/{job_id}/retry"))["changed"]


async def test_run_a_delayed_job_now(
    client: TestClient, app: tickwork.App, conn: psycopg.Connection, clock: SettableClock
) -> None:
    job_id = app.enqueue("k.run", {}, run_at=helpers.at(3600))
    result = await act(client, f"/api/jobs/{job_id}/run-now")
    assert result["changed"]
    assert app.get_job(job_id).run_at == clock.now()
    (record,) = admin_helpers.audit_rows(conn)
    assert record["action"] == "run_now"
    before, after = record["details"]["before"]["run_at"], record["details"]["after"]["run_at"]
    assert before != after
    again = await act(client, f"/api/jobs/{job_id}/run-now")
    assert not again["changed"] and again["message"] == f"job {job_id} is already due"


async def test_trigger_a_schedule(
    client: TestClient, app: tickwork.App, conn: psycopg.Connection
) -> None:
    app.sync_schedules("billing", [every("tick", 60)])
    result = await act(
        client, "/api/schedules/billing/tick/trigger", {"reason": "now", "request_id": "t-1"}
    )
    assert result["changed"] and result["action"] == "trigger"
    job = app.get_job(result["job_id"])
    assert job.schedule is not None and job.schedule.name == "tick"
    (record,) = admin_helpers.audit_rows(conn)
    assert (record["actor"], record["target"], record["reason"]) == (
        "alice",
        "schedule:billing/tick",
        "now",
    )
    assert record["id"] == result["audit_id"]
    assert record["details"]["job_id"] == result["job_id"]
    assert record["details"]["before"]["last_job_id"] is None
    assert record["details"]["after"]["last_job_id"] == result["job_id"]
    again = await act(client, "/api/schedules/billing/tick/trigger", {"request_id": "t-1"})
    assert not again["changed"] and again["job_id"] == result["job_id"]
    count = conn.execute("SELECT count(*) FROM tickwork.jobs").fetchone()
    assert count == (1,)


async def test_operator_owned_schedules_can_be_triggered(
    client: TestClient, app: tickwork.App
) -> None:
    app.sync_schedules("team-a", [every("sweep", 300)], owner="operator:prod")
    assert (await act(client, "/api/schedules/team-a/sweep/trigger"))["changed"]


async def test_a_disabled_schedule_cannot_be_triggered(
    client: TestClient, app: tickwork.App, conn: psycopg.Connection
) -> None:
    app.sync_schedules("billing", [every("tick", 60), every("other", 60)])
    app.sync_schedules("billing", [every("other", 60)])  # prunes tick
    result = await act(client, "/api/schedules/billing/tick/trigger", status=409)
    assert "disabled" in result["error"]
    assert [row["action"] for row in admin_helpers.audit_rows(conn)] == ["disable"]  # the prune


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/api/jobs/424242/cancel", 404),
        ("/api/schedules/billing/nope/trigger", 404),
    ],
)
async def test_unknown_targets(client: TestClient, path: str, status: int) -> None:
    await act(client, path, status=status)


async def test_an_action_that_does_not_apply_is_a_conflict(
    client: TestClient, app: tickwork.App, conn: psycopg.Connection
) -> None:
    job_id = app.enqueue("k.run", {})
    conn.execute(
        "UPDATE tickwork.jobs SET status = 'succeeded', finished_at = run_at WHERE id = %s",
        (job_id,),
    )
    for action in ("cancel", "retry", "run-now"):
        result = await act(client, f"/api/jobs/{job_id}/{action}", status=409)
        assert "succeeded" in result["error"]
    assert admin_helpers.audit_rows(conn) == []


@pytest.mark.parametrize(
    "body",
    [{"reason": "x" * 501}, {"reason": 5}, {"request_id": "has space"}, {"request_id": "é"}],
)
async def test_malformed_action_bodies_are_400(
    client: TestClient, app: tickwork.App, body: dict[str, Any]
) -> None:
    job_id = app.enqueue("k.run", {})
    await act(client, f"/api/jobs/{job_id}/cancel", body, status=400)
    assert app.get_job(job_id).status.value == "available"


async def test_actions_through_the_pages(
    client: TestClient, app: tickwork.App, conn: psycopg.Connection
) -> None:
    job_id = app.enqueue("k.run", {}, run_at=helpers.at(60))
    await admin_helpers.log_in(client)
    page = await (await client.get(f"/jobs/{job_id}")).text()
    assert "Run now" in page and "Cancel job" in page and "Retry job" not in page
    form = admin_helpers.hidden_fields(page)
    response = await client.post(
        f"/jobs/{job_id}/cancel", data={**form, "reason": "by hand"}, allow_redirects=False
    )
    assert response.status == 303
    assert response.headers["Location"] == f"/jobs/{job_id}?flash=changed"
    shown = await (await client.get(response.headers["Location"])).text()
    assert "Done." in shown and "by hand" in shown and "Retry job" in shown
    resubmitted = await client.post(
        f"/jobs/{job_id}/cancel", data={**form, "reason": "by hand"}, allow_redirects=False
    )
    assert resubmitted.headers["Location"] == f"/jobs/{job_id}?flash=replayed"
    assert len(admin_helpers.audit_rows(conn)) == 1


async def test_viewers_see_no_action_forms(client: TestClient, app: tickwork.App) -> None:
    job_id = app.enqueue("k.run", {}, run_at=helpers.at(60))
    app.sync_schedules("billing", [every("tick", 60)])
    await admin_helpers.log_in(client, "victor", admin_helpers.VIEWER_SECRET)
    job_page = await (await client.get(f"/jobs/{job_id}")).text()
    assert "Actions need the operator role." in job_page and "Cancel job" not in job_page
    schedule_page = await (await client.get("/schedules/billing/tick")).text()
    assert "Triggering needs the operator role." in schedule_page
    assert "Trigger now" not in schedule_page


async def test_a_trigger_through_the_page(
    client: TestClient, app: tickwork.App, conn: psycopg.Connection, clock: SettableClock
) -> None:
    app.sync_schedules("billing", [every("tick", 60)])
    await admin_helpers.log_in(client)
    form = admin_helpers.hidden_fields(await (await client.get("/schedules/billing/tick")).text())
    clock.advance(5)
    response = await client.post("/schedules/billing/tick/trigger", data=form)
    assert response.status == 200
    page = await response.text()
    assert "Done." in page and "trigger" in page
    assert [r["action"] for r in admin_helpers.audit_rows(conn)] == ["trigger"]
