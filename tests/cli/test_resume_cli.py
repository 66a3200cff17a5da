"""``tickwork schedules resume`` and the deadline fields through ``tickwork sync``: the real
command as a subprocess; bad input is one line on stderr naming the field or argument, with a
non-zero exit, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.cli.test_cli import ok, one_line_error, tickwork_cmd
from tests.cli.test_schedules_cli import manifest, schedules_json, sync, write

NS = "billing"
GUARDED = manifest(
    "nightly",
    """
    schedule: "0 5 * * *"
    timeZone: Europe/Berlin
    deadline: {by: "06:30"}
    suspendAfterFailures: 2
    job: {kind: report.nightly}
    """,
)


def _dead_occurrences(database_url: str, count: int) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        for hour in range(count):
            row = conn.execute(
                "INSERT INTO tickwork.jobs (kind, schedule_namespace, schedule_name,"
                " occurrence_at) VALUES ('report.nightly', %s, 'nightly',"
                " '2026-01-01'::timestamptz + make_interval(hours => %s)) RETURNING id",
                (NS, hour),
            ).fetchone()
            assert row is not None
            conn.execute(
                "UPDATE tickwork.jobs SET status = 'dead', finished_at = now() WHERE id = %s",
                row,
            )


def test_resume_a_schedule_suspended_after_failures(database_url: str, tmp_path: Path) -> None:
    sync(database_url, write(tmp_path, {"nightly.yaml": GUARDED}))
    (row,) = schedules_json(database_url)
    assert row["spec"]["deadline"] == {"by": "06:30"}
    assert (row["dead_streak"], row["failures_suspended_job_id"], row["late"]) == (0, None, False)
    _dead_occurrences(database_url, 2)
    (row,) = schedules_json(database_url)
    assert row["suspend"] is True and row["dead_streak"] == 2
    assert row["failures_suspended_job_id"] is not None
    assert "suspended (failures)" in ok(tickwork_cmd("schedules", database_url=database_url))

    resumed = ok(tickwork_cmd("schedules", "resume", NS, "nightly", database_url=database_url))
    assert resumed.startswith(f"schedule {NS}/nightly resumed")
    (row,) = schedules_json(database_url)
    assert (row["suspend"], row["dead_streak"], row["failures_suspended_at"]) == (False, 0, None)

    again = tickwork_cmd(
        "schedules", "resume", NS, "nightly", "-o", "json", database_url=database_url
    )
    answer: dict[str, Any] = json.loads(ok(again))
    assert answer["changed"] is False and answer["name"] == "nightly"


@pytest.mark.parametrize(
    ("args", "status", "says"),
    [
        ((NS, "missing"), 1, "no schedule 'missing' in namespace 'billing'"),
        (("", "nightly"), 2, "NAMESPACE: must be a schedule's namespace"),
        ((NS, " "), 2, "NAME: must be a schedule's name"),
        ((NS,), 2, "the following arguments are required: NAME"),
    ],
)
def test_resume_refuses_bad_input_with_one_line(
    database_url: str, tmp_path: Path, args: tuple[str, ...], status: int, says: str
) -> None:
    sync(database_url, write(tmp_path, {"nightly.yaml": GUARDED}))
    result = tickwork_cmd("schedules", "resume", *args, database_url=database_url)
    if status == 2 and "required" in says:
        assert result.returncode == 2 and says in result.stderr
        assert "Traceback" not in result.stderr
        return
    assert says in one_line_error(result, status)


def test_resume_refuses_a_schedule_its_spec_suspends(database_url: str, tmp_path: Path) -> None:
    spec = 'schedule: "0 5 * * *"\nsuspend: true\nsuspendAfterFailures: 1\njob: {kind: k}'
    sync(database_url, write(tmp_path, {"s.yaml": manifest("held", spec)}))
    result = tickwork_cmd("schedules", "resume", NS, "held", database_url=database_url)
    assert "spec.suspend: true" in one_line_error(result, 1)


@pytest.mark.parametrize(
    ("field", "says"),
    [
        ("deadline: {by: '24:00'}", "spec.deadline.by: must be a time of day as HH:MM"),
        ("deadline: {succeedWithinSeconds: 0}", "spec.deadline.succeedWithinSeconds: must be >= 1"),
        ("suspendAfterFailures: true", "spec.suspendAfterFailures: must be an integer"),
    ],
)
def test_sync_refuses_hostile_values_naming_the_field(
    database_url: str, tmp_path: Path, field: str, says: str
) -> None:
    """(Every hostile value is in tests/schedules/test_deadline_fields.py; these go through the
    command.)"""
    spec = f'schedule: "0 5 * * *"\n{field}\njob: {{kind: k}}'
    path = write(tmp_path, {"s.yaml": manifest("bad", spec)})
    result = tickwork_cmd("sync", NS, "-f", str(path), database_url=database_url)
    assert says in one_line_error(result, 1)
