"""Flow rules declared by tasks (``@app.task(kind, max_running=..., rate=..., rate_key=...)``):
refused at decoration when invalid, naming the field; written by a real worker at its start
for the kinds it registers (audited, actor ``task``; an unchanged rule records nothing);
removed when the task no longer declares one; a rule a person set is left alone; and enforced
by the claim of that same worker."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import psycopg
import pytest

import tickwork
from tests.support.helpers import running, settings, wait_status
from tickwork.errors import InvalidInput
from tickwork.flow import task_rules
from tickwork.worker.runner import Worker


def rule(url: str, kind: str) -> tuple[Any, ...] | None:
    """(max_running, rate, period_seconds, rate_key, set_by) of the kind's rule, or None."""
    with psycopg.connect(url) as conn:
        found = conn.execute(
            "SELECT max_running, rate, period_seconds, rate_key, set_by FROM tickwork.flow_rules"
            " WHERE scope = 'kind' AND name = %s",
            (kind,),
        ).fetchone()
    return None if found is None else tuple(found)


def audit(url: str, kind: str) -> list[tuple[str, str]]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT action, actor FROM tickwork.audit_log WHERE target = %s ORDER BY id",
            (f"kind:{kind}",),
        ).fetchall()
    return [(str(a), str(b)) for a, b in rows]


async def start_and_stop(app: tickwork.App, url: str, name: str) -> None:
    async with running(Worker(app, settings(url, name=name))):
        pass


def limited_app(url: str, **limits: Any) -> tickwork.App:
    app = tickwork.App(url)

    @app.task("t.limited", **limits)
    def limited(job: tickwork.Job) -> None:
        return None

    @app.task("t.free")
    def free(job: tickwork.Job) -> None:
        return None

    return app


@pytest.mark.parametrize(
    ("limits", "field"),
    [
        ({"max_running": 0}, "max_running"),
        ({"max_running": -1}, "max_running"),
        ({"max_running": 10**12}, "max_running"),
        ({"max_running": float("nan")}, "max_running"),
        ({"max_running": "3"}, "max_running"),
        ({"max_running": True}, "max_running"),
        ({"rate": "fast"}, "rate"),
        ({"rate": "0/s"}, "rate"),
        ({"rate": "10/2days"}, "rate"),
        ({"rate": 10}, "rate"),
        ({"rate_key": "customer"}, "rate_key"),
        ({"rate": "10/s", "rate_key": ""}, "rate_key"),
    ],
)
def test_invalid_limits_are_refused_at_decoration_naming_the_field(
    limits: dict[str, Any], field: str
) -> None:
    app = tickwork.App("postgresql://nowhere")
    with pytest.raises(InvalidInput) as caught:

        @app.task("t.x", **limits)
        def task(job: tickwork.Job) -> None:
            return None

    assert caught.value.field == field
    assert app.registry.kinds == []


async def test_a_worker_writes_its_tasks_rules_at_start_once_and_removes_those_dropped(
    database_url: str,
) -> None:
    app = limited_app(database_url, max_running=3, rate="10/s", rate_key="customer")
    try:
        await start_and_stop(app, database_url, "w1")
        assert rule(database_url, "t.limited") == (3, 10, 1.0, "customer", task_rules.ACTOR)
        assert rule(database_url, "t.free") is None
        assert audit(database_url, "t.limited") == [("limit", "task")]

        await start_and_stop(app, database_url, "w2")  # the same declaration: nothing recorded
        assert audit(database_url, "t.limited") == [("limit", "task")]
    finally:
        await app.close_async()

    changed = limited_app(database_url, max_running=5)  # a new version: the last start wins
    bare = limited_app(database_url)  # and one declaring no limit: its rule goes
    try:
        await start_and_stop(changed, database_url, "w3")
        assert rule(database_url, "t.limited") == (5, None, None, None, task_rules.ACTOR)
        await start_and_stop(bare, database_url, "w4")
        assert rule(database_url, "t.limited") is None
        assert audit(database_url, "t.limited") == [
            ("limit", "task"),
            ("limit", "task"),
            ("unlimit", "task"),
        ]
    finally:
        await changed.close_async()
        await bare.close_async()


async def test_a_rule_a_person_set_for_the_kind_is_left_alone(database_url: str) -> None:
    app = limited_app(database_url, max_running=3)
    try:
        app.set_limit("kind", "t.limited", max_running=1, actor="alice")
        app.set_limit("kind", "t.free", rate="5/min", actor="alice")
        await start_and_stop(app, database_url, "w1")
        assert rule(database_url, "t.limited") == (1, None, None, None, "alice")
        assert rule(database_url, "t.free") == (None, 5, 60.0, None, "alice")
        assert audit(database_url, "t.limited") == [("limit", "alice")]
    finally:
        await app.close_async()


async def test_the_declared_max_running_holds_on_the_worker_that_wrote_it(
    database_url: str, aconn: psycopg.AsyncConnection
) -> None:
    app = tickwork.App(database_url)
    lock = threading.Lock()
    now_running, most = 0, 0

    @app.task("t.one", max_running=1)
    async def one(job: tickwork.Job) -> None:
        nonlocal now_running, most
        with lock:
            now_running += 1
            most = max(most, now_running)
        await asyncio.sleep(0.1)
        with lock:
            now_running -= 1

    try:
        ids = [app.enqueue("t.one", {"n": n}) for n in range(4)]
        async with running(Worker(app, settings(database_url, concurrency=4))):
            for job_id in ids:
                await wait_status(aconn, job_id, "succeeded")
        assert most == 1
    finally:
        await app.close_async()
