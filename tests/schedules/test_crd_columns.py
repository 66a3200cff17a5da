"""``kubectl get schedules.tickwork.io`` as kubectl shows it. Each ``additionalPrinterColumns``
jsonPath of the Schedule CRD is evaluated by a real kubectl's JSONPath (``kubectl annotate
--local -o jsonpath``: the same client-go library the API server's table converter uses, no
server needed) on a Schedule carrying the status the operator writes (built with
``tickwork.operator.status``), and each cell is rendered by its column type as the API server
and kubectl do: a ``date`` as an age, ``<invalid>`` for a time to come, ``<none>`` when the
path finds nothing."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support import binaries
from tickwork.db.jobs import LastJob, OpenJob
from tickwork.db.pauses import PauseRow
from tickwork.db.schedules import ScheduleRow
from tickwork.model import JobId, JobStatus
from tickwork.operator import served, status
from tickwork.operator.desired import entry_of
from tickwork.operator.syncer import Outcome

NOW = datetime.now(UTC).replace(microsecond=0)
"""kubectl measures ages from the wall clock, so the objects' times are set around it."""

SEPARATOR = "\x1f"
CRD_PATH = Path(__file__).resolve().parents[2] / "crds" / "schedules.tickwork.io.yaml"


def columns() -> list[dict[str, Any]]:
    """The Schedule CRD's additionalPrinterColumns."""
    (version,) = yaml.safe_load(CRD_PATH.read_text())["spec"]["versions"]
    found: list[dict[str, Any]] = version["additionalPrinterColumns"]
    return found


def human_duration(seconds: float) -> str:
    """k8s.io/apimachinery/pkg/util/duration.HumanDuration, which kubectl prints ages with."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes, hours = s // 60, s // 3600
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d{hours % 24}h" if hours % 24 else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        years, days = hours // 24 // 365, hours // 24 % 365
        return f"{years}y{days}d" if days else f"{years}y"
    return f"{hours // 24 // 365}y"


def cell(column: dict[str, Any], found: str) -> str:
    """A column's cell for the text kubectl's JSONPath found, as ``kubectl get`` prints it."""
    if found == "":
        return "<none>"
    if column["type"] == "date":
        try:
            at = datetime.fromisoformat(found)
        except ValueError:
            return "<invalid>"
        return human_duration((NOW - at).total_seconds())
    return found


def evaluate(document: dict[str, Any], paths: list[str]) -> list[str]:
    """What kubectl's JSONPath finds for each path in ``document`` (offline)."""
    template = SEPARATOR.join(f"{{{path}}}" for path in paths)
    result = subprocess.run(
        [
            str(binaries.kubectl()),
            "annotate",
            "--local",
            "-f",
            "-",
            "tickwork.io/columns-test=1",
            "-o",
            f"jsonpath={template}",
        ],
        input=yaml.safe_dump(document),
        capture_output=True,
        text=True,
        timeout=60,
        env={"KUBECONFIG": "/nonexistent", "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.split(SEPARATOR)


def row(spec: dict[str, Any], **changes: Any) -> ScheduleRow:
    """The stored row of a schedule that fired a minute ago and fires again in four."""
    values: dict[str, Any] = {
        "namespace": "default",
        "name": "hello",
        "revision": 3,
        "enabled": True,
        "suspend": False,
        "schedule": spec.get("schedule"),
        "every": spec.get("every"),
        "time_zone": "UTC",
        "next_run_at": NOW + timedelta(minutes=4),
        "last_occurrence_at": NOW - timedelta(minutes=1),
        "last_job_id": JobId(41),
        "last_job_status": JobStatus.RUNNING,
        "last_success_at": NOW - timedelta(minutes=6),
        "skipped_occurrences": 0,
        "owner": "operator:default",
        "spec": spec,
        "state": None,
        "created_at": NOW - timedelta(hours=2),
        "updated_at": NOW - timedelta(minutes=1),
        "firing_error": None,
        "firing_failures": 0,
        "firing_retry_at": None,
    }
    return ScheduleRow(**{**values, **changes})


def schedule(
    spec: dict[str, Any],
    stored: ScheduleRow,
    active: list[OpenJob],
    last: LastJob | None = None,
    served: status.Ready | None = None,
) -> dict[str, Any]:
    """A Schedule object with the status the operator patches onto it (a merge patch: None
    removes the field)."""
    body: dict[str, Any] = {
        "apiVersion": "tickwork.io/v1",
        "kind": "Schedule",
        "metadata": {
            "name": "hello",
            "namespace": "default",
            "generation": 1,
            "creationTimestamp": status.timestamp(NOW - timedelta(hours=2)),
        },
        "spec": spec,
    }
    ready = status.Ready("True", str(Outcome.SYNCED), "the definition in PostgreSQL is current")
    facts = status.facts(stored, active, last)
    patch = status.patch({}, entry_of(body), ready, facts, NOW, served=served)
    found = {key: status.present(value) for key, value in patch.items() if value is not None}
    return {**body, "status": found}


def table(document: dict[str, Any]) -> dict[str, str]:
    """Every column's cell, by column name."""
    found = evaluate(document, [c["jsonPath"] for c in columns()])
    return {c["name"]: cell(c, text) for c, text in zip(columns(), found, strict=True)}


def main_columns() -> list[str]:
    """The columns ``kubectl get`` shows without ``-o wide``."""
    return [c["name"] for c in columns() if not c.get("priority")]


FIRED = {
    "cron": {"schedule": "*/5 * * * *", "timeZone": "UTC", "suspend": False, "job": {"kind": "k"}},
    "every": {"every": "5m", "timeZone": "UTC", "suspend": False, "job": {"kind": "k"}},
}
RUNNING = [OpenJob("default", "hello", JobId(41), JobStatus.RUNNING, NOW - timedelta(minutes=1), 1)]


@pytest.mark.parametrize("kind", sorted(FIRED))
def test_a_fired_schedule_shows_every_column(kind: str) -> None:
    spec = FIRED[kind]
    cells = table(schedule(spec, row(spec), RUNNING))
    assert cells["Schedule"] == spec.get("schedule", spec.get("every"))
    assert cells["Time Zone"] == "UTC"
    assert cells["Suspend"] == "false"
    assert cells["Last Schedule"] == "60s"
    assert cells["Next Run"] == status.timestamp(NOW + timedelta(minutes=4))
    assert (cells["Ready"], cells["Reason"]) == ("True", "Synced")
    assert cells["Age"] == "120m"
    assert (cells["Last Success"], cells["Skipped"], cells["Revision"]) == ("6m", "0", "3")
    assert cells["Message"] == "the definition in PostgreSQL is current"
    shown = {name: cells[name] for name in main_columns()}
    assert not [name for name, text in shown.items() if text in ("", "<none>", "<invalid>")]


@pytest.mark.parametrize(("active", "shown"), [(RUNNING, "1"), ([], "0")])
def test_the_active_column_counts_open_jobs(active: list[OpenJob], shown: str) -> None:
    spec = FIRED["cron"]
    assert table(schedule(spec, row(spec), active))["Active"] == shown


def test_the_wide_columns_show_the_last_result_and_served() -> None:
    spec = FIRED["cron"]
    dead = LastJob(
        "default", "hello", JobId(40), JobStatus.DEAD, NOW, NOW, NOW + timedelta(seconds=2), 3, "x"
    )
    fleet = served.Fleet.of([])
    nobody = served.served(fleet, "default", "k", "default", database_error=None)
    cells = table(schedule(spec, row(spec), [], dead, nobody))
    assert (cells["Last Result"], cells["Served"]) == ("dead", "False")
    assert cells["Served Reason"] == "NoWorker"
    assert (cells["Ready"], cells["Reason"]) == ("True", "Synced")  # READY stays Ready's
    cells = table(schedule(spec, row(spec), []))
    assert (cells["Last Result"], cells["Served"]) == ("<none>", "<none>")
    assert "Last Result" not in main_columns() and "Served" not in main_columns()
    assert "Served Reason" not in main_columns()


def test_the_wide_columns_say_when_the_namespace_is_paused() -> None:
    spec = FIRED["cron"]
    pause = PauseRow("namespace", "default", "alice", NOW, "freeze")
    fleet = served.Fleet.of([], [pause])
    held = served.served(fleet, "default", "k", "default", database_error=None)
    cells = table(schedule(spec, row(spec), [], None, held))
    assert (cells["Served"], cells["Served Reason"]) == ("False", "NamespacePaused")


def test_a_suspended_schedule_has_no_next_run() -> None:
    spec = {**FIRED["cron"], "suspend": True}
    cells = table(schedule(spec, row(spec, suspend=True, next_run_at=None), []))
    assert (cells["Suspend"], cells["Next Run"]) == ("true", "<none>")
    assert cells["Last Schedule"] == "60s"


def test_a_date_column_of_a_time_to_come_would_show_invalid() -> None:
    """Why Next Run is a string: kubectl prints a future ``date`` as ``<invalid>``."""
    future = status.timestamp(NOW + timedelta(minutes=4))
    assert future is not None
    assert cell({"type": "date"}, future) == "<invalid>"
    assert cell({"type": "string"}, future) == future


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (-5, "<invalid>"),
        (-1, "0s"),
        (90, "90s"),
        (150, "2m30s"),
        (600, "10m"),
        (7500, "125m"),
        (4 * 3600 + 60, "4h1m"),
        (30 * 3600, "30h"),
        (3 * 86400, "3d"),
        (800 * 86400, "2y70d"),
    ],
)
def test_ages_are_printed_as_kubectl_prints_them(seconds: int, text: str) -> None:
    assert human_duration(seconds) == text
