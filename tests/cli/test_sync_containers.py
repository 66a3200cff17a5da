"""``tickwork sync -f`` of container Schedules (``spec.jobTemplate``), as real subprocesses: the
example syncs (a file's schedule sends its Jobs to the schedule namespace, with no owner); an
invalid template is refused in one line naming the file, the Schedule and the field, exit 1,
nothing written."""

from __future__ import annotations

import io
from pathlib import Path

import psycopg
import yaml

import tickwork
from tests.cli.test_cli import ok, one_line_error, tickwork_cmd
from tests.cli.test_schedules_cli import counts, write
from tickwork import devmode
from tickwork.schedules import container_jobs
from tickwork.schedules.stored import TARGET_FIELD

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "schedules" / "container.yaml"


def test_the_container_example_syncs_and_fires_nothing_else(
    database_url: str, tmp_path: Path
) -> None:
    out = ok(tickwork_cmd("sync", "backups", "-f", str(EXAMPLE), database_url=database_url))
    assert out.splitlines()[0] == "namespace backups: 1 created, 0 updated, 0 unchanged, 0 disabled"
    with psycopg.connect(database_url) as conn:
        (spec,) = conn.execute("SELECT spec FROM tickwork.schedules").fetchone() or ()
    document = yaml.safe_load(EXAMPLE.read_text())
    assert spec["jobTemplate"] == document["spec"]["jobTemplate"]
    assert TARGET_FIELD not in spec  # Jobs go to the schedule namespace, no owner reference
    trigger = ok(
        tickwork_cmd(
            "trigger", "backups", "nightly-backup", "-o", "json", database_url=database_url
        )
    )
    assert trigger
    with psycopg.connect(database_url) as conn:
        (kind, payload) = conn.execute("SELECT kind, payload FROM tickwork.jobs").fetchone() or ()
    assert kind == container_jobs.KIND
    assert (payload["namespace"], payload["schedule"], payload["ownerUid"]) == (
        "backups",
        "nightly-backup",
        None,
    )


def test_an_invalid_template_is_refused_in_one_line_and_nothing_is_written(
    database_url: str, tmp_path: Path
) -> None:
    document = yaml.safe_load(EXAMPLE.read_text())
    document["spec"]["jobTemplate"]["spec"]["template"]["spec"]["restartPolicy"] = "Always"
    path = write(tmp_path, {"bad.yaml": yaml.safe_dump(document)})
    line = one_line_error(
        tickwork_cmd("sync", "backups", "-f", str(path), database_url=database_url), 1
    )
    assert "Schedule 'nightly-backup'" in line
    assert line.endswith(
        "spec.jobTemplate.spec.template.spec.restartPolicy: must not be 'Always': "
        "a Job's pods restart Never or OnFailure"
    )
    assert counts(database_url)[1:] == (0, 0)


def test_tickwork_dev_leaves_the_container_example_out(app: tickwork.App) -> None:
    """``tickwork dev`` runs no Kubernetes: it syncs every example but the container one, and
    says so."""
    out = io.StringIO()
    devmode.sync_examples(app, out)
    assert (
        "not synced (a jobTemplate needs Kubernetes, docs/containers.md): nightly-backup\n"
        in out.getvalue()
    )
    names = {schedule.name for schedule in app.list_schedules(devmode.NAMESPACE)}
    assert "hello" in names and "nightly-backup" not in names
