"""``tickwork queues`` and ``tickwork namespaces`` as users run them (subprocesses): list with
the paused state, pause and resume (idempotent, audited with the actor and reason), one
clear error line for a bad name."""

from __future__ import annotations

import json
from typing import Any

import psycopg

import tickwork
from tests.cli.test_cli import ok, one_line_error, tickwork_cmd
from tests.support.schedule_helpers import every


def _json(database_url: str, *args: str) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = json.loads(ok(tickwork_cmd(*args, database_url=database_url)))
    return result


def test_pause_a_queue_list_it_and_resume_it(
    database_url: str, app: tickwork.App, conn: psycopg.Connection[Any]
) -> None:
    app.enqueue("t.cli", {}, queue="emails")
    out = ok(
        tickwork_cmd(
            "queues", "pause", "emails", "--actor", "ada", "--reason", "smtp down",
            database_url=database_url,
        )
    )  # fmt: skip
    assert out == "queue emails paused\n"
    again = tickwork_cmd("queues", "pause", "emails", database_url=database_url)
    assert ok(again) == "queue emails is paused already\n"

    [queue] = _json(database_url, "queues", "-o", "json")
    assert (queue["name"], queue["paused"], queue["available"]) == ("emails", True, 1)
    assert (queue["pause"]["paused_by"], queue["pause"]["reason"]) == ("ada", "smtp down")
    table = ok(tickwork_cmd("queues", database_url=database_url))
    assert table.splitlines()[0].split()[:4] == ["QUEUE", "STATE", "AVAILABLE", "RUNNING"]
    assert table.splitlines()[1].split()[:5] == ["emails", "paused", "1", "0", "ada"]

    assert ok(tickwork_cmd("queues", "resume", "emails", database_url=database_url)) == (
        "queue emails resumed\n"
    )
    [queue] = _json(database_url, "queues", "-o", "json")
    assert (queue["paused"], queue["pause"]) == (False, None)
    actions = conn.execute(
        "SELECT actor, action, target, reason FROM tickwork.audit_log ORDER BY id"
    ).fetchall()
    assert [row[1:] for row in actions] == [
        ("pause", "queue:emails", "smtp down"),
        ("resume", "queue:emails", None),
    ]
    assert actions[0][0] == "ada"


def test_pause_a_namespace_and_list_it(database_url: str, app: tickwork.App) -> None:
    app.sync_schedules("billing", [every("s", 60)])
    out = ok(tickwork_cmd("namespaces", "pause", "billing", database_url=database_url))
    assert out == "namespace billing paused\n"
    [namespace] = _json(database_url, "namespaces", "-o", "json")
    assert (namespace["name"], namespace["paused"], namespace["schedules"]) == (
        "billing",
        True,
        1,
    )
    out = ok(tickwork_cmd("namespaces", "resume", "billing", database_url=database_url))
    assert out == "namespace billing resumed\n"
    table = ok(tickwork_cmd("namespaces", database_url=database_url)).splitlines()
    assert table[1].split()[:3] == ["billing", "active", "1"]


def test_bad_names_are_one_error_line(database_url: str) -> None:
    line = one_line_error(tickwork_cmd("namespaces", "pause", "nope", database_url=database_url), 2)
    assert line == "tickwork: error: namespace: no schedule namespace 'nope'"
    line = one_line_error(tickwork_cmd("queues", "pause", "", database_url=database_url), 2)
    assert line == "tickwork: error: queue: must not be empty"
