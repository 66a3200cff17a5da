"""What a penetration test of the console found, each held shut: the login limiter (no reset
by a success, per name without locking a user out, locks kept whatever the number of keys,
failures logged and counted), logout ending the session, malformed input answered 400 with
the security headers (before and after login), a generic 500 for the unforeseen, probes that
name no database, no library version in ``Server``, credentials and connection strings never
echoed, unique secrets, a private credentials file, and read timeouts on slow clients."""

from __future__ import annotations

import asyncio
import base64
import logging
import os
from collections.abc import AsyncIterator
from pathlib import Path

import prometheus_client
import pytest
from aiohttp import ClientSession, TCPConnector, web
from aiohttp.test_utils import TestClient, TestServer

import tickwork
from tests.admin import admin_helpers
from tests.admin.admin_helpers import OPERATOR, OPERATOR_SECRET, VIEWER_SECRET
from tickwork import http
from tickwork.admin import server
from tickwork.admin.auth import Credentials, FailureLimiter, Lock, parse_credentials
from tickwork.admin.console import Console
from tickwork.admin.security import HEADERS
from tickwork.admin.settings import AdminSettings
from tickwork.cli import main
from tickwork.clock import SettableClock
from tickwork.errors import ConfigurationError

CSP = HEADERS["Content-Security-Policy"]


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def basic(name: str, secret: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{name}:{secret}".encode()).decode()}


def metric(name: str, **labels: str) -> float:
    return prometheus_client.REGISTRY.get_sample_value(name, labels) or 0.0


# --- the login limiter ------------------------------------------------------------------------


async def test_a_successful_login_does_not_reset_the_address(client: TestClient) -> None:
    for _ in range(4):
        assert (await client.get("/api/whoami", headers=bearer("guess" * 4))).status == 401
    victor = await client.get("/api/whoami", headers=basic("victor", VIEWER_SECRET))
    assert victor.status == 200  # a viewer logs in between guesses...
    assert (await client.get("/api/whoami", headers=bearer("guess" * 4))).status == 401
    locked = await client.get("/api/whoami", headers=bearer("guess" * 4))
    assert locked.status == 429  # ...and is still locked after five
    assert locked.headers["Content-Security-Policy"] == CSP


@pytest.fixture
async def served(console: Console) -> AsyncIterator[str]:
    """The console on 127.0.0.1, reachable from other loopback addresses."""
    async with TestServer(server.build(console), host="127.0.0.1") as test_server:
        yield str(test_server.make_url(""))


async def whoami_from(base: str, address: str, headers: dict[str, str]) -> int:
    connector = TCPConnector(local_addr=(address, 0))
    async with (
        ClientSession(connector=connector) as session,
        session.get(f"{base}/api/whoami", headers=headers) as response,
    ):
        return response.status


async def test_failures_from_many_addresses_lock_a_name_but_not_its_own_address(
    served: str, caplog: pytest.LogCaptureFixture
) -> None:
    assert await whoami_from(served, "127.0.0.2", basic("alice", OPERATOR_SECRET)) == 200
    failures = metric("tickwork_admin_login_failures_total", via="basic")
    lockouts = metric("tickwork_admin_login_lockouts_total", lock="name")
    caplog.set_level(logging.WARNING, "tickwork.admin.console")
    for n in range(10, 15):  # five attackers, one guess each
        assert await whoami_from(served, f"127.0.0.{n}", basic("alice", "wrong" * 4)) == 401
    assert await whoami_from(served, "127.0.0.20", basic("alice", "wrong" * 4)) == 429
    assert await whoami_from(served, "127.0.0.21", basic("alice", OPERATOR_SECRET)) == 429
    assert await whoami_from(served, "127.0.0.2", basic("alice", OPERATOR_SECRET)) == 200
    assert await whoami_from(served, "127.0.0.21", basic("victor", VIEWER_SECRET)) == 200

    assert metric("tickwork_admin_login_failures_total", via="basic") == failures + 5
    assert metric("tickwork_admin_login_lockouts_total", lock="name") == lockouts + 1
    messages = [r.getMessage() for r in caplog.records]
    assert "admin: failed login from 127.0.0.10 (name alice)" in messages
    assert any(m.startswith("admin: logins locked for 300s by name") for m in messages)


async def test_failures_everywhere_lock_all_but_known_addresses(console: Console) -> None:
    settings = AdminSettings(port=0, max_global_login_failures=6)
    narrow = Console(console.app, settings, admin_helpers.credentials())
    async with TestServer(server.build(narrow), host="127.0.0.1") as test_server:
        base = str(test_server.make_url(""))
        assert await whoami_from(base, "127.0.0.2", OPERATOR) == 200
        for n in range(30, 36):  # six addresses, one guessed token each
            assert await whoami_from(base, f"127.0.0.{n}", bearer("guess" * 4)) == 401
        assert await whoami_from(base, "127.0.0.40", OPERATOR) == 429
        assert await whoami_from(base, "127.0.0.2", OPERATOR) == 200


def test_locks_are_kept_however_many_keys_follow() -> None:
    limiter = FailureLimiter(
        max_failures=1, max_global_failures=10**9, window_seconds=60, lockout_seconds=30, max_keys=3
    )
    assert Lock.ADDRESS in limiter.failed("attacker", None)
    for n in range(100):
        limiter.failed(f"other-{n}", f"name-{n}")
    assert limiter.retry_after("attacker", None) > 0


# --- sessions ---------------------------------------------------------------------------------


async def test_logging_out_ends_the_session(client: TestClient) -> None:
    csrf = await admin_helpers.log_in(client)
    cookies = {cookie.key: cookie.value for cookie in client.session.cookie_jar}
    response = await client.post("/logout", data={"csrf_token": csrf}, allow_redirects=False)
    assert response.status == 303
    client.session.cookie_jar.clear()
    replayed = await client.get("/api/whoami", cookies=cookies)
    assert replayed.status == 401  # the old cookie is refused


# --- malformed input --------------------------------------------------------------------------


async def raw(client: TestClient, request: bytes) -> tuple[int, str]:
    """Send ``request`` as bytes (clients refuse to send some of these); status and headers."""
    assert client.server.port is not None
    reader, writer = await asyncio.open_connection("127.0.0.1", client.server.port)
    writer.write(request)
    await writer.drain()
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
    writer.close()
    return int(head.split()[1]), head


@pytest.mark.parametrize(
    "header",
    [
        "Authorization: Basic \u00e9",
        "Cookie: tickwork_session=YWxpY2U.\u00b2.nonce.sig",
        f"Cookie: tickwork_session=YWxpY2U.{'9' * 5000}.nonce.sig",
    ],
)
async def test_malformed_credentials_are_refused_with_the_headers(
    client: TestClient, header: str
) -> None:
    request = f"GET /api/whoami HTTP/1.1\r\nHost: x\r\n{header}\r\nConnection: close\r\n\r\n"
    status, head = await raw(client, request.encode())
    assert status == 401
    assert f"Content-Security-Policy: {CSP}" in head


async def test_a_malformed_multipart_login_is_a_400(client: TestClient) -> None:
    response = await client.post(
        "/login",
        data=b"--x\r\nContent-Disposition: form-data\r\n\r\nno end",
        headers={"Content-Type": "multipart/form-data; boundary=x"},
    )
    assert response.status == 400
    assert response.headers["Content-Security-Policy"] == CSP


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/api/jobs?before=%C2%B2", None),
        ("GET", "/jobs?before=%C2%B2", None),
        ("GET", "/api/jobs?kind=a%00b", None),
        ("GET", "/api/schedules?namespace=a%00b", None),
        ("GET", "/api/schedules/a%00b/name", None),
        ("POST", "/api/jobs/1/cancel", "[" * 50_000),
        ("POST", "/api/jobs/1/cancel", '{"reason": "a\\u0000b"}'),
    ],
)
async def test_malformed_input_after_login_is_a_400(
    client: TestClient, method: str, path: str, body: str | None
) -> None:
    headers = {**OPERATOR, "Content-Type": "application/json"}
    response = await client.request(method, path, data=body, headers=headers)
    assert response.status == 400, await response.text()
    assert response.headers["Content-Security-Policy"] == CSP


async def test_the_unforeseen_is_a_generic_500_with_the_headers(
    console: Console, caplog: pytest.LogCaptureFixture
) -> None:
    async def broken(request: web.Request) -> web.Response:
        raise RuntimeError("secret detail")

    app = server.build(console)
    app.router.add_get("/api/broken", broken)
    async with TestClient(TestServer(app)) as test_client:
        response = await test_client.get("/api/broken", headers=OPERATOR)
        assert response.status == 500
        assert response.headers["Content-Security-Policy"] == CSP
        assert "secret detail" not in await response.text()
    assert any(r.exc_info and "secret detail" in str(r.exc_info[1]) for r in caplog.records)


# --- what the server tells -------------------------------------------------------------------


async def test_readyz_names_no_host_port_or_user(console: Console) -> None:
    elsewhere = tickwork.App("postgresql://dbadmin@127.0.0.1:1/app?connect_timeout=1")
    try:
        probed = Console(elsewhere, console.settings, admin_helpers.credentials())
        async with TestClient(TestServer(server.build(probed))) as test_client:
            response = await test_client.get("/readyz")
            body = await response.text()
    finally:
        elsewhere.close()
    assert response.status == 503 and body.startswith("database unavailable")
    assert "127.0.0.1" not in body and "dbadmin" not in body and "port" not in body


async def test_no_library_version_in_the_server_header(client: TestClient) -> None:
    for path in ("/login", "/api/whoami", "/no-such-page", "/healthz"):
        assert (await client.get(path)).headers["Server"] == "tickwork"
    probes = http.ProbeServer(0, host="127.0.0.1")
    await probes.start()
    try:
        async with ClientSession() as session:
            for path in ("/healthz", "/nothing"):
                async with session.get(f"http://127.0.0.1:{probes.port}{path}") as response:
                    assert response.headers["Server"] == "tickwork"
    finally:
        await probes.stop()


# --- configuration ----------------------------------------------------------------------------


def test_credential_errors_quote_no_piece_of_an_entry() -> None:
    # A space inside a secret makes its tail an entry of its own.
    with pytest.raises(ConfigurationError) as error:
        parse_credentials("alice:operator:0123456789abcdef tailofthesecret-xyz", "env")
    assert "tailofthesecret" not in str(error.value)
    assert "env, line 1, entry 2" in str(error.value)


def test_two_entries_with_one_secret_are_refused() -> None:
    text = f"alice:operator:{OPERATOR_SECRET}\nbob:viewer:{OPERATOR_SECRET}"
    with pytest.raises(ConfigurationError, match="has a secret of env, line 1") as error:
        Credentials(parse_credentials(text, "env"))
    assert OPERATOR_SECRET not in str(error.value)


def test_a_connection_string_is_not_quoted(capsys: pytest.CaptureFixture[str]) -> None:
    env = {"TICKWORK_ADMIN_CREDENTIALS": f"alice:operator:{OPERATOR_SECRET}"}
    url = "host=db password=hunter2 hunter3-rest"
    assert main(["admin", "--database-url", url], env=env) == 2
    err = capsys.readouterr().err
    assert "not a valid connection string" in err and "hunter" not in err


def test_a_world_readable_credentials_file_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "credentials"
    path.write_text(f"alice:operator:{OPERATOR_SECRET}\n")
    os.chmod(path, 0o644)
    assert main(["admin", "--credentials-file", str(path)], env={}) == 2
    assert "readable or writable by every user" in capsys.readouterr().err


# --- slow clients -------------------------------------------------------------------------------


async def test_slow_clients_are_cut_off(console: Console) -> None:
    settings = AdminSettings(port=0, read_seconds=0.3)
    runner = server.runner(Console(console.app, settings, admin_helpers.credentials()))
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /api/whoami HTTP/1.1\r\nHost: x\r\n")  # and nothing more
        assert await asyncio.wait_for(reader.read(), 5) == b""  # closed without an answer
        writer.close()

        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(
            f"POST /api/jobs/1/cancel HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
            f"{OPERATOR_SECRET}\r\nContent-Type: application/json\r\nContent-Length: 10\r\n"
            "\r\n{".encode()
        )
        head = await asyncio.wait_for(reader.readuntil(b"\r\n"), 5)
        assert head.startswith(b"HTTP/1.1 408")
        await asyncio.wait_for(reader.read(), 5)  # then closed: the rest is not awaited
        writer.close()
    finally:
        await runner.cleanup()


async def test_sessions_expire_on_the_apps_clock(console: Console, clock: SettableClock) -> None:
    credential = console.credentials.by_name("alice")
    assert credential is not None
    cookie = console.sessions.issue(credential)
    clock.advance(console.settings.session_seconds - 1)
    assert console.sessions.verify(cookie) is not None
    clock.advance(2)
    assert console.sessions.verify(cookie) is None, "expired by the pinned clock, not time.time"
