"""Hostile Schedule manifests through the real ``tickwork sync`` (in this process, for speed,
and a few as real subprocesses): values at and beyond every field's limit, huge integers,
NaN and infinities, text with NUL or unpaired surrogates, very long text, deep nesting, big
payloads. Each is either refused in one line naming the file, the Schedule and the field,
with nothing written, or it is synced and fired into ``tickwork.jobs`` with its values
unchanged, in the same firing pass as a neighbour schedule in another namespace, which fires
on time."""

from __future__ import annotations

import asyncio
import os
from datetime import datetime, timedelta
from itertools import count
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from psycopg.rows import dict_row

import tickwork
from tests.schedules import limit_helpers, limit_strategies
from tests.support.cli_fork import run_tickwork
from tickwork.clock import SettableClock
from tickwork.maintenance import firing
from tickwork.schedules import limits
from tickwork.schedules.checks import limit_problem
from tickwork.schedules.definition import ScheduleDefinition
from tickwork.schedules.options import JobTemplate

HOSTILE = "hostile"
NEIGHBOUR = "neighbour"
RAW = "RAW-YAML-GOES-HERE"
"""A placeholder replaced by raw YAML text (what ``yaml.safe_dump`` cannot write)."""

RAW_VALUES = [
    "9" * 5000,  # more digits than Python converts
    "0x" + "f" * 5000,  # a hexadecimal integer of 6000 digits
    "[" * 600 + "]" * 600,  # nesting PyYAML would recurse through
    ".nan",
    "-.inf",
    "!!binary aGVsbG8=",
]


def valid_values(path: str) -> st.SearchStrategy[Any]:
    if path == "spec.job.payload":
        return st.sampled_from([limit_helpers.largest_payload(), limit_helpers.nested(64), None])
    return st.sampled_from([value for value, accepted in limit_helpers.edges(path) if accepted])


@st.composite
def perturbations(draw: st.DrawFn) -> list[tuple[str, Any]]:
    """One to three fields of a valid spec set to hostile values (``RAW`` for raw YAML)."""
    paths = draw(
        st.lists(
            st.sampled_from([*sorted(limits.FIELDS), "spec.job.payload"]),
            min_size=1,
            max_size=3,
            unique=True,
        )
    )
    found: list[tuple[str, Any]] = []
    if draw(st.booleans()):  # values at the limits that are valid: these must sync and fire
        return [(path, draw(valid_values(path))) for path in paths]
    for path in paths:
        if draw(st.integers(0, 9)) == 0:
            found.append((path, (RAW, draw(st.sampled_from(RAW_VALUES)))))
        elif path == "spec.job.payload":
            found.append((path, draw(limit_strategies.PAYLOADS)))
        else:
            found.append((path, draw(limit_strategies.field_values(path))))
    return found


def render(name: str, changes: list[tuple[str, Any]]) -> tuple[str, dict[str, Any]]:
    """The manifest's YAML text and its spec (with ``RAW`` placeholders)."""
    spec: dict[str, Any] = {"schedule": "@daily", "job": {"kind": "k"}}
    raw = None
    for path, value in changes:
        if isinstance(value, tuple):
            raw, value = value[1], RAW
        spec = limit_helpers.spec_with(path, value, base=spec)
    text = limit_helpers.manifest(name, spec)
    return (text if raw is None else text.replace(RAW, raw, 1)), spec


def schedule_rows(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
    query = "SELECT namespace, name, revision, enabled FROM tickwork.schedules ORDER BY 1, 2"
    return conn.execute(query).fetchall()


def latest_job(conn: psycopg.Connection[Any], namespace: str, name: str) -> dict[str, Any] | None:
    with conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(
            "SELECT * FROM tickwork.jobs WHERE schedule_namespace = %s AND schedule_name = %s"
            " ORDER BY occurrence_at DESC LIMIT 1",
            (namespace, name),
        ).fetchone()


def next_run(conn: psycopg.Connection[Any], namespace: str, name: str) -> datetime:
    found = conn.execute(
        "SELECT next_run_at FROM tickwork.schedules WHERE namespace = %s AND name = %s",
        (namespace, name),
    ).fetchone()
    assert found is not None and found[0] is not None
    return found[0]  # type: ignore[no-any-return]


def usable_namespace(value: Any) -> str:
    """The namespace to sync into: a ``scheduleNamespace`` the loader would accept, else
    :data:`HOSTILE` (the loader then refuses the Schedule for its invalid field first)."""
    usable = isinstance(value, str) and limit_problem("spec.scheduleNamespace", value) is None
    return value if usable and not any(c.isspace() for c in value) else HOSTILE


@settings(
    max_examples=60,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(changes=perturbations())
def test_hostile_manifests_are_refused_in_one_line_or_fire_beside_a_neighbour(
    changes: list[tuple[str, Any]],
    database_url: str,
    conn: psycopg.Connection[Any],
    app: tickwork.App,
    clock: SettableClock,
    tmp_path: Path,
) -> None:
    number = next(EXAMPLES)
    name, neighbour = f"h{number}", f"n{number}"
    file = tmp_path / f"{name}.yaml"
    text, spec = render(name, changes)
    file.write_text(text)
    namespace = usable_namespace(spec.get("scheduleNamespace"))
    before = schedule_rows(conn)

    status, stderr = limit_helpers.sync(database_url, namespace, file)

    event("refused" if status else "synced and fired")
    if status != 0:
        [line] = stderr.splitlines()
        assert line.startswith(f"tickwork: error: {file}: "), line
        assert "Traceback" not in stderr
        named = [path for path, _ in changes if path in line]
        assert named or "invalid YAML at line" in line or "cannot read" in line, (line, changes)
        assert schedule_rows(conn) == before
        return
    assert stderr == ""
    due = next_run(conn, namespace, name)
    # The neighbour is created a minute before the hostile schedule is due: it is due then too.
    clock.set(due - timedelta(minutes=1))
    app.sync_schedules(NEIGHBOUR, [every_minute(neighbour)])
    asyncio.run(fire(database_url, (namespace, NEIGHBOUR), due))
    fired = latest_job(conn, namespace, name)
    assert fired is not None and fired["occurrence_at"] <= due
    loaded = yaml.safe_load(text)["spec"]["job"]
    assert fired["kind"] == loaded["kind"]
    assert fired["priority"] == loaded.get("priority", 0)
    assert fired["payload"] == loaded.get("payload", {})
    on_time = latest_job(conn, NEIGHBOUR, neighbour)
    assert on_time is not None
    assert on_time["occurrence_at"] == due.replace(second=0, microsecond=0)


EXAMPLES = count()


def every_minute(name: str) -> ScheduleDefinition:
    return ScheduleDefinition(name=name, job=JobTemplate(kind="n"), every=timedelta(minutes=1))


async def fire(database_url: str, namespaces: tuple[str, ...], now: datetime) -> None:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        report = await firing.run_once(conn, namespaces, now)
    assert report.failed == 0, report


HEAD = "apiVersion: tickwork.io/v1\nkind: Schedule\nmetadata: {name: a}\nspec:\n  every: 30s\n"


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (HEAD + "  job: {kind: k, payload: " + "[" * 5000 + "]" * 5000 + "}\n", "nested deeper"),
        (HEAD + "  job: {kind: k, priority: " + "9" * 5000 + "}\n", "too many digits"),
        (HEAD + '  job: {kind: "k\\0"}\n', "spec.job.kind: must not contain NUL"),
        (bytes(range(256)) * 64, "cannot read"),
    ],
    ids=["deep", "digits", "nul", "binary"],
)
def test_the_real_command_prints_one_line_and_no_traceback(
    content: str | bytes, expected: str, database_url: str, tmp_path: Path
) -> None:
    file = tmp_path / "s.yaml"
    if isinstance(content, bytes):
        file.write_bytes(content)
    else:
        file.write_text(content)
    result = run_tickwork(
        ["sync", "ns", "-f", str(file), "--database-url", database_url], os.environ
    )
    assert result.returncode == 1, result
    assert "Traceback" not in result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith(f"tickwork: error: {file}: ") and expected in line, line
    assert result.stdout == ""
