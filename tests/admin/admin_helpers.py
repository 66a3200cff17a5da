"""Shared pieces of the admin tests: credentials, a console client, logging in through the
form, and rows put in place by hand (a registered worker, a dead job).

Import as ``import admin_helpers`` (pytest puts this directory on ``sys.path``)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

import psycopg
from aiohttp.test_utils import TestClient

from tests.support import helpers
from tests.support.schedule_helpers import cron, every
from tickwork.admin.auth import Credentials, parse_credentials
from tickwork.db import store
from tickwork.db import workers as workers_db

OPERATOR_SECRET = "alice-secret-0123456789"
VIEWER_SECRET = "victor-secret-0123456789"
TEAM_A_SECRET = "ann-secret-of-team-a-0123"
"""ann: operator of schedule namespace team-a only."""
CREDENTIALS = (
    f"alice:operator:{OPERATOR_SECRET}\nvictor:viewer:{VIEWER_SECRET}\n"
    f"ann:operator@team-a:{TEAM_A_SECRET}"
)
OPERATOR = {"Authorization": f"Bearer {OPERATOR_SECRET}"}
VIEWER = {"Authorization": f"Bearer {VIEWER_SECRET}"}
TEAM_A = {"Authorization": f"Bearer {TEAM_A_SECRET}"}

XSS = '<script>alert("x")</script><img src=x onerror=alert(1)>'
"""User data that would run if a page did not escape it."""

_HIDDEN = re.compile(r'name="(?P<name>[a-z_]+)" value="(?P<value>[^"]*)"')


def credentials() -> Credentials:
    return Credentials(parse_credentials(CREDENTIALS, "test"))


def hidden_fields(page: str) -> dict[str, str]:
    """The hidden inputs of a page (the last one of each name wins)."""
    return {m["name"]: m["value"] for m in _HIDDEN.finditer(page)}


async def log_in(client: TestClient, name: str = "alice", secret: str = OPERATOR_SECRET) -> str:
    """Log in through the form; returns the overview page's CSRF token."""
    form = hidden_fields(await (await client.get("/login")).text())
    response = await client.post(
        "/login",
        data={
            "login_token": form["login_token"],
            "next": "/",
            "username": name,
            "password": secret,
        },
    )
    assert response.status == 200, await response.text()
    return hidden_fields(await response.text())["csrf_token"]


def register_worker(
    conn: psycopg.Connection[Any],
    name: str,
    *,
    now: datetime,
    kinds: Sequence[str] = ("k.run",),
    queues: Sequence[str] = ("default",),
    namespaces: Sequence[str] = (),
    heartbeat_seconds: float = 10.0,
) -> UUID:
    """Register a worker process seen at ``now``; returns its incarnation."""
    incarnation = uuid4()
    store.run(
        conn,
        workers_db.register_worker(
            name=name,
            incarnation=incarnation,
            queues=queues,
            kinds=kinds,
            namespaces=namespaces,
            concurrency=4,
            host="host-1",
            pid=1234,
            heartbeat_seconds=heartbeat_seconds,
            now=now,
        ),
    )
    return incarnation


def make_dead(conn: psycopg.Connection[Any], job_id: int, error: str = "boom") -> None:
    conn.execute(
        "UPDATE tickwork.jobs SET status = 'dead', attempt = 3, max_attempts = 3,"
        " finished_at = run_at, last_error = %s WHERE id = %s",
        (error, job_id),
    )


def finish(
    app: Any,
    conn: psycopg.Connection[Any],
    status: str,
    ago: float,
    *,
    queue: str = "default",
    lag: float | None = None,
) -> None:
    """A job of ``queue`` that ended ``ago`` seconds before T0 (the tests' clock); with
    ``lag``, fired by a schedule of billing and started ``lag`` seconds after its occurrence."""
    job = app.enqueue("k.run", {}, queue=queue)
    finished = helpers.T0 - timedelta(seconds=ago)
    started = finished - timedelta(seconds=1)
    conn.execute(
        "UPDATE tickwork.jobs SET status = %s, started_at = %s, finished_at = %s,"
        " schedule_namespace = %s, schedule_name = %s, occurrence_at = %s WHERE id = %s",
        (
            status,
            started,
            finished,
            None if lag is None else BILLING,
            None if lag is None else "nightly",
            None if lag is None else started - timedelta(seconds=lag),
            job,
        ),
    )


def audit_rows(conn: psycopg.Connection[Any]) -> list[dict[str, Any]]:
    with conn.cursor(row_factory=psycopg.rows.dict_row) as cur:
        return cur.execute("SELECT * FROM tickwork.audit_log ORDER BY id").fetchall()


# --- a small world to look at ------------------------------------------------------------------

BILLING = "billing"
K8S = "team-a"
"""Owned by the operator of cluster prod."""


def populate(app: Any, conn: psycopg.Connection[Any], now: datetime) -> dict[str, int]:
    """Two namespaces (one fired by a live worker, one owned by the operator and fired by
    nobody), a live and a gone worker, and jobs in every state; returns job ids by name."""
    app.sync_schedules(BILLING, [cron("nightly", "0 3 * * *"), every("tick", 60)])
    app.sync_schedules(K8S, [every("sweep", 300)], owner="operator:prod")
    live = register_worker(conn, "w-live", now=now, namespaces=[BILLING])
    register_worker(conn, "w-gone", now=now - timedelta(hours=1), kinds=["k.gone"])
    ids = {
        "available": app.enqueue("k.run", {"n": 1}),
        "delayed": app.enqueue("k.run", {"n": 2}, run_at=now + timedelta(hours=1)),
        "orphan": app.enqueue("k.orphan", {"n": 3}),
        "elsewhere": app.enqueue("k.run", {"n": 4}, queue="other"),
        "dead": app.enqueue("k.run", {"n": 5}),
        "failing": app.enqueue("k.run", {"n": 6}),
        "running": app.enqueue("k.run", {"n": 7}, queue="fast"),
    }
    make_dead(conn, ids["dead"])
    conn.execute(
        "UPDATE tickwork.jobs SET attempt = 1, last_error = 'flaky' WHERE id = %s",
        (ids["failing"],),
    )
    conn.execute(
        "UPDATE tickwork.jobs SET status = 'running', attempt = 1, picked_by = 'w-live',"
        " picked_by_incarnation = %s, started_at = %s, lease_expires_at = %s WHERE id = %s",
        (live, now, now + timedelta(seconds=30), ids["running"]),
    )
    return ids
