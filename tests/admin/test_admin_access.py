"""Who gets in: probes are public; everything else needs credentials (401 for the API, the
login page for the console); failed logins are rate-limited; actions need the operator role,
a POST, and CSRF protection; every answer carries the security headers."""

from __future__ import annotations

import base64

import psycopg
import pytest
from aiohttp.test_utils import TestClient

import tickwork
from tests.admin import admin_helpers
from tests.admin.admin_helpers import OPERATOR, OPERATOR_SECRET, VIEWER
from tests.support import helpers

API_GETS = [
    "/api/whoami",
    "/api/overview",
    "/api/schedules",
    "/api/jobs",
    "/api/jobs/1",
    "/api/schedules/ns/name",
    "/api/audit",
]
PAGES = ["/", "/schedules", "/jobs", "/jobs/1", "/schedules/ns/name", "/audit"]
ACTIONS = [
    "/api/jobs/1/run-now",
    "/api/jobs/1/cancel",
    "/api/jobs/1/retry",
    "/api/schedules/ns/name/trigger",
]


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/metrics"])
async def test_probes_need_no_credentials(client: TestClient, path: str) -> None:
    response = await client.get(path)
    assert response.status == 200


@pytest.mark.parametrize("path", API_GETS)
async def test_api_without_credentials_is_401(client: TestClient, path: str) -> None:
    response = await client.get(path)
    assert response.status == 401
    assert response.headers["WWW-Authenticate"].startswith("Bearer")
    assert await response.json() == {"error": "authentication required"}


@pytest.mark.parametrize("path", ACTIONS)
async def test_actions_without_credentials_are_401(client: TestClient, path: str) -> None:
    response = await client.post(path, json={})
    assert response.status == 401


@pytest.mark.parametrize("path", PAGES)
async def test_pages_without_a_session_send_to_the_login(client: TestClient, path: str) -> None:
    response = await client.get(path, allow_redirects=False)
    assert response.status == 303
    assert response.headers["Location"] == f"/login?next={path}"


@pytest.mark.parametrize(
    "authorization",
    ["Bearer wrong-token-0123456789", "Basic YWxpY2U6d3Jvbmc=", "Digest x", "Bearer"],
)
async def test_wrong_credentials_are_401(client: TestClient, authorization: str) -> None:
    response = await client.get("/api/whoami", headers={"Authorization": authorization})
    assert response.status == 401


async def test_bearer_and_basic_credentials_identify_the_caller(client: TestClient) -> None:
    bearer = await client.get("/api/whoami", headers=VIEWER)
    assert await bearer.json() == {
        "name": "victor",
        "role": "viewer",
        "via": "bearer",
        "namespaces": None,
    }
    token = base64.b64encode(f"alice:{OPERATOR_SECRET}".encode()).decode()
    basic = await client.get("/api/whoami", headers={"Authorization": f"Basic {token}"})
    assert await basic.json() == {
        "name": "alice",
        "role": "operator",
        "via": "basic",
        "namespaces": None,
    }


async def test_failed_logins_lock_the_address_out(client: TestClient) -> None:
    for _ in range(5):
        response = await client.get("/api/whoami", headers={"Authorization": "Bearer nope"})
        assert response.status == 401
    locked = await client.get("/api/whoami", headers=OPERATOR)
    assert locked.status == 429
    assert int(locked.headers["Retry-After"]) > 0


async def test_login_form_failures_are_limited_too(client: TestClient) -> None:
    for expected in [401] * 5 + [429]:
        form = admin_helpers.hidden_fields(await (await client.get("/login")).text())
        response = await client.post(
            "/login",
            data={**form, "username": "alice", "password": "not-the-secret"},
        )
        assert response.status == expected
    assert "Too many failed logins" in await response.text()


async def test_login_without_the_form_token_is_refused(client: TestClient) -> None:
    response = await client.post(
        "/login", data={"username": "alice", "password": OPERATOR_SECRET, "next": "/"}
    )
    assert response.status == 400
    assert "tickwork_session" not in {c.key for c in client.session.cookie_jar}


async def test_login_and_logout(client: TestClient) -> None:
    csrf = await admin_helpers.log_in(client)
    assert (await client.get("/", allow_redirects=False)).status == 200
    cookie = next(c for c in client.session.cookie_jar if c.key == "tickwork_session")
    assert cookie["httponly"] and cookie["samesite"] == "Strict"
    response = await client.post("/logout", data={"csrf_token": csrf}, allow_redirects=False)
    assert response.status == 303
    assert (await client.get("/", allow_redirects=False)).status == 303


async def test_login_goes_back_only_to_a_local_path(client: TestClient) -> None:
    form = admin_helpers.hidden_fields(await (await client.get("/login")).text())
    response = await client.post(
        "/login",
        data={**form, "next": "//evil.example/", "username": "alice", "password": OPERATOR_SECRET},
        allow_redirects=False,
    )
    assert response.headers["Location"] == "/"


@pytest.mark.parametrize("path", ACTIONS)
async def test_viewers_cannot_act(
    client: TestClient, app: tickwork.App, conn: psycopg.Connection, path: str
) -> None:
    app.enqueue("k.run", {}, run_at=helpers.at(3600))  # delayed: every job action applies
    response = await client.post(path, json={"reason": "try"}, headers=VIEWER)
    assert response.status == 403
    assert await response.json() == {"error": "this needs the operator role"}
    assert admin_helpers.audit_rows(conn) == []


async def test_a_form_post_with_a_token_is_not_json_and_refused(client: TestClient) -> None:
    response = await client.post("/api/jobs/1/cancel", data={"reason": "x"}, headers=OPERATOR)
    assert response.status == 403
    assert await response.json() == {"error": "send actions as application/json"}


async def test_a_session_post_without_csrf_token_is_refused(
    client: TestClient, app: tickwork.App, conn: psycopg.Connection
) -> None:
    job_id = app.enqueue("k.run", {})
    await admin_helpers.log_in(client)
    for path in (f"/jobs/{job_id}/cancel", f"/api/jobs/{job_id}/cancel"):
        response = await client.post(path, data={"reason": "forged"}, allow_redirects=False)
        assert response.status == 403
        wrong = await client.post(
            path, data={"csrf_token": "guess", "reason": "forged"}, allow_redirects=False
        )
        assert wrong.status == 403
    assert app.get_job(job_id).status.value == "available"
    assert admin_helpers.audit_rows(conn) == []


async def test_a_cross_origin_post_is_refused(client: TestClient, app: tickwork.App) -> None:
    job_id = app.enqueue("k.run", {})
    csrf = await admin_helpers.log_in(client)
    response = await client.post(
        f"/jobs/{job_id}/cancel",
        data={"csrf_token": csrf},
        headers={"Origin": "https://evil.example"},
        allow_redirects=False,
    )
    assert response.status == 403
    assert app.get_job(job_id).status.value == "available"


async def test_actions_are_post_only(client: TestClient) -> None:
    response = await client.get("/api/jobs/1/cancel", headers=OPERATOR)
    assert response.status == 405


@pytest.mark.parametrize("path", ["/login", "/api/whoami", "/", "/nowhere", "/api/jobs/999"])
async def test_security_headers_on_every_answer(client: TestClient, path: str) -> None:
    response = await client.get(path, headers=OPERATOR, allow_redirects=False)
    headers = response.headers
    assert "default-src 'none'" in headers["Content-Security-Policy"]
    assert "frame-ancestors 'none'" in headers["Content-Security-Policy"]
    assert headers["X-Frame-Options"] == "DENY"
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Referrer-Policy"] == "same-origin"
    assert headers["Cache-Control"] == "no-store"
