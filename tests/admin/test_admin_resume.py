"""The console's Resume of a schedule that spec.suspendAfterFailures suspended
(docs/deadlines.md): through the API and the schedule's page, audited, idempotent by request
id, refused for a schedule its own spec suspends, and scoped like a trigger."""

from __future__ import annotations

from typing import Any

import psycopg
from aiohttp.test_utils import TestClient

import tickwork
from tests.admin import admin_helpers
from tests.admin.test_admin_actions import act
from tests.support.schedule_helpers import every


def suspend_after_dead(app: tickwork.App, conn: psycopg.Connection[Any], **fields: Any) -> int:
    """Sync billing/tick with suspendAfterFailures 1, and end one occurrence dead."""
    app.sync_schedules("billing", [every("tick", 60, suspend_after_failures=1, **fields)])
    row = conn.execute(
        "INSERT INTO tickwork.jobs (kind, schedule_namespace, schedule_name, occurrence_at)"
        " VALUES ('s.job', 'billing', 'tick', now()) RETURNING id"
    ).fetchone()
    assert row is not None
    conn.execute("UPDATE tickwork.jobs SET status = 'dead', finished_at = now() WHERE id = %s", row)
    return int(row[0])


def suspended(conn: psycopg.Connection[Any]) -> tuple[Any, ...]:
    row = conn.execute(
        "SELECT suspended, dead_streak FROM tickwork.schedules WHERE name = 'tick'"
    ).fetchone()
    assert row is not None
    return tuple(row)


async def test_resume_through_the_api(
    client: TestClient, app: tickwork.App, conn: psycopg.Connection[Any]
) -> None:
    job = suspend_after_dead(app, conn)
    assert suspended(conn) == (True, 1)
    result = await act(
        client, "/api/schedules/billing/tick/resume", {"reason": "fixed", "request_id": "r-1"}
    )
    assert result["changed"] and result["action"] == "resume"
    assert f"after job {job} ended dead" in result["message"]
    assert suspended(conn) == (False, 0)
    (record,) = [r for r in admin_helpers.audit_rows(conn) if r["action"] == "resume"]
    assert (record["actor"], record["target"], record["reason"]) == (
        "alice",
        "schedule:billing/tick",
        "fixed",
    )
    assert record["details"]["before"]["failures_suspended_job_id"] == job
    again = await act(client, "/api/schedules/billing/tick/resume", {"request_id": "r-1"})
    assert not again["changed"] and again["audit_id"] == result["audit_id"]


async def test_resume_refusals(
    client: TestClient, app: tickwork.App, conn: psycopg.Connection[Any]
) -> None:
    missing = await act(client, "/api/schedules/billing/nope/resume", status=404)
    assert "no schedule 'nope'" in missing["error"]
    suspend_after_dead(app, conn, suspend=True)
    held = await act(client, "/api/schedules/billing/tick/resume", status=409)
    assert "spec.suspend: true" in held["error"]


async def test_resume_through_the_page(
    client: TestClient, app: tickwork.App, conn: psycopg.Connection[Any]
) -> None:
    job = suspend_after_dead(app, conn)
    await admin_helpers.log_in(client)
    page = await (await client.get("/schedules/billing/tick")).text()
    assert "suspended after failures" in page and "Resume" in page and f"/jobs/{job}" in page
    form = admin_helpers.hidden_fields(page)
    response = await client.post("/schedules/billing/tick/resume", data=form)
    assert response.status == 200
    after = await response.text()
    assert "Done." in after and "suspended after failures" not in after
    assert suspended(conn) == (False, 0)
