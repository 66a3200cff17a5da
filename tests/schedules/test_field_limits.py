"""The largest value of every bounded Schedule field goes through ``tickwork sync`` (run in
this process) and a firing pass into ``tickwork.jobs`` unchanged, and a claim puts the job
with the longest concurrency key to running (its index entry fits); one step past any limit
is refused in one line naming the field, and nothing is written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from tests.schedules import limit_helpers
from tests.schedules.limit_helpers import WIDE
from tests.support.helpers import claim
from tickwork.maintenance import firing
from tickwork.schedules import limits

MAX_SECONDS = limits.MAX_DURATION_SECONDS
JOB_AT_MAX: dict[str, Any] = {
    "kind": "k" * limits.MAX_KIND_LENGTH,
    "queue": WIDE * limits.MAX_QUEUE_LENGTH,
    "payload": limit_helpers.largest_payload(),
    "priority": limits.MAX_SMALLINT,
    "maxAttempts": limits.MAX_INT,
    "retryPolicy": {
        "baseDelaySeconds": MAX_SECONDS,
        "backoffRate": limits.MAX_BACKOFF_RATE,
        "maxDelaySeconds": MAX_SECONDS,
    },
    "timeoutSeconds": MAX_SECONDS,
    "concurrencyKey": WIDE * limits.MAX_CONCURRENCY_KEY_LENGTH,
    "concurrencyLimit": limits.MAX_CONCURRENCY_LIMIT,
}
SIMPLE_JOB = {"kind": "k"}

AT_MAX: dict[str, dict[str, Any]] = {
    "job": {"schedule": "@daily", "job": JOB_AT_MAX},
    "every": {"every": "0" * (limits.MAX_EVERY_LENGTH - 4) + "366d", "job": SIMPLE_JOB},
    "cron": {
        "schedule": limit_helpers.text_of_length("spec.schedule", limits.MAX_SCHEDULE_LENGTH),
        "timeZone": limit_helpers.LONGEST_ZONE,
        "startingDeadlineSeconds": limits.MAX_INT,
        "jitterSeconds": limits.MAX_INT,
        "job": SIMPLE_JOB,
    },
    "catch-up": {
        "every": "1m",
        "misfirePolicy": "CatchUp",
        "catchUpLimit": limits.MAX_CATCH_UP,
        "job": SIMPLE_JOB,
    },
}
"""Each field at its largest, one schedule per namespace (so that each fires on its own)."""


def row(conn: psycopg.Connection[Any], query: str, *params: Any) -> dict[str, Any]:
    with conn.cursor(row_factory=dict_row) as cur:
        found = cur.execute(query, params).fetchone()
    assert found is not None
    return found


async def fire_namespace(database_url: str, conn: psycopg.Connection[Any], namespace: str) -> None:
    """One firing pass of ``namespace`` at its schedule's next run."""
    due = row(conn, "SELECT next_run_at FROM tickwork.schedules WHERE namespace = %s", namespace)
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as aconn:
        report = await firing.run_once(aconn, [namespace], due["next_run_at"])
    if report.fired < 1:
        failed = row(conn, "SELECT * FROM tickwork.schedules WHERE namespace = %s", namespace)
        raise AssertionError(f"{report}: {failed.get('firing_error')}")


@pytest.mark.parametrize("case", sorted(AT_MAX))
async def test_the_largest_values_sync_and_fire(
    case: str, database_url: str, conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    path = tmp_path / "s.yaml"
    name = "n" * limits.MAX_NAME_LENGTH
    path.write_text(limit_helpers.manifest(name, AT_MAX[case]))
    namespace = "s" * limits.MAX_NAME_LENGTH
    status, stderr = limit_helpers.sync(database_url, namespace, path)
    assert (status, stderr) == (0, "")
    await fire_namespace(database_url, conn, namespace)
    job = row(
        conn,
        "SELECT * FROM tickwork.jobs WHERE schedule_namespace = %s AND schedule_name = %s"
        " ORDER BY occurrence_at DESC LIMIT 1",
        namespace,
        name,
    )
    if case != "job":
        return
    retry = JOB_AT_MAX["retryPolicy"]
    assert job["kind"] == JOB_AT_MAX["kind"]
    assert job["queue"] == JOB_AT_MAX["queue"]
    assert job["payload"] == JOB_AT_MAX["payload"]
    assert job["priority"] == JOB_AT_MAX["priority"]
    assert job["max_attempts"] == JOB_AT_MAX["maxAttempts"]
    assert (job["retry_base_seconds"], job["retry_rate"], job["retry_max_seconds"]) == (
        retry["baseDelaySeconds"],
        retry["backoffRate"],
        retry["maxDelaySeconds"],
    )
    assert job["timeout_seconds"] == JOB_AT_MAX["timeoutSeconds"]
    assert job["concurrency_key"] == JOB_AT_MAX["concurrencyKey"]
    assert job["concurrency_limit"] == JOB_AT_MAX["concurrencyLimit"]
    [claimed] = claim(
        conn, kinds=[job["kind"]], queues=[job["queue"]], now=job["run_at"], max_attempts=1
    )
    assert claimed.id == job["id"]
    running = row(conn, "SELECT status FROM tickwork.jobs WHERE id = %s", job["id"])
    assert running["status"] == "running"


BEYOND = [
    (path, value)
    for path in sorted(limits.FIELDS)
    for value, accepted in limit_helpers.edges(path)
    if not accepted
]


@pytest.mark.parametrize(
    ("path", "value"), BEYOND, ids=[f"{p}-{i}" for i, (p, _) in enumerate(BEYOND)]
)
def test_one_past_a_limit_is_refused_naming_the_field(
    path: str, value: Any, database_url: str, conn: psycopg.Connection[Any], tmp_path: Path
) -> None:
    spec = limit_helpers.spec_with(path, value)
    file = tmp_path / "s.yaml"
    file.write_text(limit_helpers.manifest("a", spec))
    namespace = spec.get("scheduleNamespace", "ns")
    namespace = namespace if isinstance(namespace, str) and "\x00" not in namespace else "ns"
    status, stderr = limit_helpers.sync(database_url, namespace, file)
    assert status != 0
    [line] = stderr.splitlines()
    assert line.startswith(f"tickwork: error: {file}: document 1: Schedule 'a': {path}: ")
    assert row(conn, "SELECT count(*) AS n FROM tickwork.schedules")["n"] == 0
