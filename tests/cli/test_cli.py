"""The ``tickwork`` command as users run it: a process of its own against a real database."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest

import tickwork
from tests.support import helpers
from tests.support.cli_fork import run_tickwork
from tickwork.db import store
from tickwork.db import workers as workers_db

TICKWORK = str(Path(sys.executable).parent / "tickwork")
DEADLINE = 20.0

JOB_KEYS = frozenset(
    {
        "id", "kind", "queue", "status", "attempt", "max_attempts", "priority", "payload",
        "run_at", "created_at", "started_at", "finished_at", "schedule_namespace",
        "schedule_name", "occurrence_at", "picked_by", "last_error",
    }
)  # fmt: skip
TIMESTAMP_KEYS = ("run_at", "created_at", "started_at", "finished_at", "occurrence_at")


def tickwork_cmd(
    *args: str, database_url: str | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    """Run ``tickwork ARGS`` with ``TICKWORK_DATABASE_URL`` set to ``database_url`` only, in a
    process of its own (tests/support/cli_fork.py)."""
    return run_tickwork(args, _env(database_url, **env))


def _env(database_url: str | None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TICKWORK_")}
    if database_url is not None:
        env["TICKWORK_DATABASE_URL"] = database_url
    return {**env, **extra}


def _with_path(directory: Path) -> str:
    """PYTHONPATH with ``directory`` first."""
    return os.pathsep.join(filter(None, [str(directory), os.environ.get("PYTHONPATH")]))


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return result.stdout


def one_line_error(result: subprocess.CompletedProcess[str], status: int) -> str:
    """The single stderr line of a failed command (which printed nothing on stdout)."""
    assert result.returncode == status, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("tickwork: error: ")
    assert result.stdout == ""
    return lines[0]


def enqueue(database_url: str, kind: str, *args: str) -> int:
    return int(ok(tickwork_cmd("enqueue", kind, *args, database_url=database_url)))


def jobs_json(database_url: str, *args: str) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = json.loads(
        ok(tickwork_cmd("jobs", "-o", "json", *args, database_url=database_url))
    )
    return result


def job(database_url: str, job_id: int) -> dict[str, Any]:
    (found,) = [j for j in jobs_json(database_url) if j["id"] == job_id]
    return found


def register_worker(database_url: str, kinds: list[str], queues: list[str]) -> None:
    """A row in tickwork.workers, as a running worker serving ``kinds`` would have."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        store.run(
            conn,
            workers_db.register_worker(
                name="elsewhere",
                queues=queues,
                kinds=kinds,
                namespaces=[],
                concurrency=1,
                host="elsewhere",
                pid=1,
                now=None,
            ),
        )


# --- migrate -------------------------------------------------------------------------------


def test_migrate_applies_pending_migrations_and_reports_status(empty_database_url: str) -> None:
    before = ok(tickwork_cmd("migrate", "--status", "--database-url", empty_database_url))
    assert "0001_jobs.sql" in before and "pending" in before and "applied" not in before

    applied = ok(tickwork_cmd("migrate", database_url=empty_database_url))
    assert "applied 0001_jobs.sql" in applied
    again = ok(tickwork_cmd("migrate", database_url=empty_database_url))
    assert "up to date" in again

    status = json.loads(
        ok(tickwork_cmd("migrate", "--status", "-o", "json", database_url=empty_database_url))
    )
    assert status and all(row["applied"] for row in status)
    assert status[0] == {"version": 1, "name": "0001_jobs.sql", "applied": True}


def test_migrate_refuses_an_applied_migration_that_changed(database_url: str) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("UPDATE tickwork.migrations SET checksum = 'edited' WHERE version = 1")
    for args in (("migrate",), ("migrate", "--status")):
        line = one_line_error(tickwork_cmd(*args, database_url=database_url), 1)
        assert "0001_jobs.sql" in line and "changed after it was applied" in line


def test_commands_on_an_unmigrated_database_say_to_migrate(empty_database_url: str) -> None:
    line = one_line_error(tickwork_cmd("jobs", database_url=empty_database_url), 1)
    assert "tickwork migrate" in line


# --- enqueue and jobs ---------------------------------------------------------------------


def test_enqueue_prints_the_id_and_jobs_lists_it(database_url: str) -> None:
    result = tickwork_cmd(
        "enqueue", "report.nightly", "--payload", '{"day": "2026-12-01"}', database_url=database_url
    )
    job_id = int(ok(result))
    assert "warning" in result.stderr and "no worker is running" in result.stderr

    table = ok(tickwork_cmd("jobs", database_url=database_url))
    header, row = table.splitlines()
    assert header.split()[:4] == ["ID", "KIND", "QUEUE", "STATUS"]
    assert row.split()[:5] == [str(job_id), "report.nightly", "default", "available", "0/-"]

    (listed,) = jobs_json(database_url)
    assert set(listed) >= JOB_KEYS
    assert listed["id"] == job_id
    assert listed["payload"] == {"day": "2026-12-01"}
    assert (listed["status"], listed["attempt"], listed["max_attempts"]) == ("available", 0, None)
    for key in ("started_at", "finished_at", "schedule_namespace", "occurrence_at", "picked_by"):
        assert listed[key] is None
    for key in TIMESTAMP_KEYS:
        assert listed[key] is None or datetime.fromisoformat(listed[key]).utcoffset() is not None
    assert listed["run_at"] and listed["created_at"]


def test_enqueue_options_reach_the_job(database_url: str) -> None:
    result = tickwork_cmd(
        "enqueue",
        "report.nightly",
        "--queue",
        "reports",
        "--run-at",
        "2030-01-01T09:00:00+01:00",
        "--priority",
        "7",
        "--max-attempts",
        "3",
        "--unique-key",
        "day-1",
        "-o",
        "json",
        database_url=database_url,
    )
    created = json.loads(ok(result))
    assert set(created) >= JOB_KEYS
    assert (created["queue"], created["priority"], created["max_attempts"]) == ("reports", 7, 3)
    assert datetime.fromisoformat(created["run_at"]) == datetime.fromisoformat(
        "2030-01-01T08:00:00+00:00"
    )
    assert created["unique_key"] == "day-1"

    again = enqueue(database_url, "report.nightly", "--unique-key", "day-1", "--queue", "reports")
    assert again == created["id"]
    assert len(jobs_json(database_url)) == 1


def test_enqueue_sets_a_concurrency_key_and_its_limit_and_refuses_a_limit_without_a_key(
    database_url: str,
) -> None:
    job_id = enqueue(
        database_url, "report.nightly", "--concurrency-key", "tenant-7", "--concurrency-limit", "3"
    )
    with psycopg.connect(database_url) as conn:
        row = conn.execute(
            "SELECT concurrency_key, concurrency_limit FROM tickwork.jobs WHERE id = %s", (job_id,)
        ).fetchone()
    assert row == ("tenant-7", 3)

    for args, expected in (
        (["--concurrency-limit", "2"], "--concurrency-limit: needs --concurrency-key"),
        (["--concurrency-key", "k", "--concurrency-limit", "0"], "--concurrency-limit: "),
    ):
        result = tickwork_cmd("enqueue", "report.nightly", *args, database_url=database_url)
        assert expected in one_line_error(result, 2), args
    assert len(jobs_json(database_url)) == 1, "nothing enqueued by a refused command"


def test_jobs_filters_by_status_kind_and_queue_and_limits(database_url: str) -> None:
    first = enqueue(database_url, "a.one")
    enqueue(database_url, "b.two", "--queue", "other")
    third = enqueue(database_url, "a.one")
    ok(tickwork_cmd("cancel", str(first), database_url=database_url))

    assert [j["id"] for j in jobs_json(database_url, "--kind", "a.one")] == [third, first]
    assert [j["id"] for j in jobs_json(database_url, "--status", "cancelled")] == [first]
    assert [j["kind"] for j in jobs_json(database_url, "--queue", "other")] == ["b.two"]
    assert len(jobs_json(database_url, "--limit", "2")) == 2
    assert ok(tickwork_cmd("jobs", "--kind", "nothing", database_url=database_url)).strip() == (
        "no jobs found"
    )


def test_enqueue_refuses_a_kind_no_running_worker_serves(database_url: str) -> None:
    register_worker(database_url, kinds=["report.nightly", "mail.send"], queues=["default"])

    line = one_line_error(tickwork_cmd("enqueue", "report.nigthly", database_url=database_url), 1)
    assert "report.nigthly" in line and "mail.send, report.nightly" in line
    assert "--allow-unknown-kind" in line
    assert jobs_json(database_url) == []

    result = tickwork_cmd(
        "enqueue", "report.nigthly", "--allow-unknown-kind", database_url=database_url
    )
    assert int(ok(result)) > 0 and result.stderr == ""
    served = tickwork_cmd("enqueue", "mail.send", database_url=database_url)
    assert int(ok(served)) > 0 and served.stderr == ""


def test_enqueue_warns_when_serving_workers_do_not_claim_the_queue(database_url: str) -> None:
    register_worker(database_url, kinds=["mail.send"], queues=["mail"])
    result = tickwork_cmd("enqueue", "mail.send", database_url=database_url)
    assert int(ok(result)) > 0
    assert "claim from mail, not from queue 'default'" in result.stderr


# --- cancel and retry ---------------------------------------------------------------------


def test_cancel_and_retry_move_the_job_and_are_audited(database_url: str) -> None:
    job_id = enqueue(database_url, "report.nightly")

    out = ok(
        tickwork_cmd(
            "cancel", str(job_id), "--reason", "wrong day", database_url=database_url, USER="ann"
        )
    )
    assert f"job {job_id} cancelled" in out
    assert job(database_url, job_id)["status"] == "cancelled"

    ok(tickwork_cmd("retry", str(job_id), "--actor", "bob", database_url=database_url))
    retried = job(database_url, job_id)
    assert (retried["status"], retried["attempt"], retried["finished_at"]) == ("available", 0, None)

    with psycopg.connect(database_url) as conn:
        audit = conn.execute(
            "SELECT actor, action, target, reason FROM tickwork.audit_log ORDER BY id"
        ).fetchall()
        details = [row[0] for row in conn.execute("SELECT details FROM tickwork.audit_log")]
    assert audit[0][0].startswith("ann@")
    assert audit[0][1:] == ("cancel", f"job:{job_id}", "wrong day")
    assert audit[1] == ("bob", "retry", f"job:{job_id}", None)
    # Before and after, as the console records them.
    statuses = [(d["before"]["status"], d["after"]["status"]) for d in details]
    assert statuses == [("available", "cancelled"), ("cancelled", "available")]
    assert set(details[0]["before"]) == {
        "status", "run_at", "attempt", "max_attempts", "version", "picked_by",
        "lease_expires_at", "finished_at",
    }  # fmt: skip


def test_cancel_and_retry_refuse_jobs_in_the_wrong_state(database_url: str) -> None:
    job_id = enqueue(database_url, "report.nightly")

    line = one_line_error(tickwork_cmd("retry", str(job_id), database_url=database_url), 1)
    assert f"job {job_id} is available" in line and "dead or cancelled" in line

    ok(tickwork_cmd("cancel", str(job_id), database_url=database_url))
    line = one_line_error(tickwork_cmd("cancel", str(job_id), database_url=database_url), 1)
    assert f"job {job_id} is cancelled" in line and "available or running" in line


# --- bad input: one line on stderr, non-zero exit, no traceback ---------------------------


@pytest.mark.parametrize(
    ("args", "status", "expected"),
    [
        (["enqueue", "k", "--payload", "{not json"], 2, "--payload: not valid JSON"),
        (["enqueue", "k", "--payload", "[1, 2]"], 2, "--payload: must be a JSON object"),
        (["enqueue", "k", "--payload", '{"a": "\\u0000"}'], 2, "--payload.a: must not contain NUL"),
        (["enqueue", "k", "--payload", "[" * 5000 + "]" * 5000], 2, "--payload: "),
        (["enqueue", "k", "--priority", "-1"], 2, "--priority: must be between 0 and 32767"),
        (["enqueue", "k", "--priority", "high"], 2, "invalid int value: 'high'"),
        (["enqueue", "k", "--max-attempts", "0"], 2, "--max-attempts: must be at least 1"),
        (["enqueue", "k", "--max-attempts", "-3"], 2, "--max-attempts: must be at least 1"),
        (["enqueue", "k", "--run-at", "tomorrow"], 2, "--run-at: 'tomorrow' is not an ISO 8601"),
        (
            ["enqueue", "k", "--run-at", "2030-01-01T09:00"],
            2,
            "--run-at: '2030-01-01T09:00' has no",
        ),
        (["enqueue", " "], 2, "KIND: must not be empty"),
        (["cancel", "987654"], 1, "no job with id 987654"),
        (["retry", "987654"], 1, "no job with id 987654"),
        (["cancel", "first"], 2, "invalid int value: 'first'"),
        (["jobs", "--status", "done"], 2, "'available', 'running', 'succeeded', 'dead', 'cancel"),
        (["jobs", "--limit", "0"], 2, "--limit: must be at least 1"),
        (["frobnicate"], 2, "invalid choice: 'frobnicate'"),
        ([], 2, "required: COMMAND"),
    ],
)
def test_bad_input_is_one_line_on_stderr(
    database_url: str, args: list[str], status: int, expected: str
) -> None:
    line = one_line_error(tickwork_cmd(*args, database_url=database_url), status)
    assert expected in line


def test_unknown_kind_is_one_line_on_stderr(database_url: str) -> None:
    register_worker(database_url, kinds=["mail.send"], queues=["default"])
    line = one_line_error(tickwork_cmd("enqueue", "mail.sned", database_url=database_url), 1)
    assert "no running worker serves kind 'mail.sned' (served: mail.send)" in line


def test_missing_database_url_is_a_usage_error() -> None:
    line = one_line_error(tickwork_cmd("jobs"), 2)
    assert "--database-url (or TICKWORK_DATABASE_URL) is required" in line


@pytest.fixture
def closed_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    yield port


@pytest.mark.parametrize(
    "command",
    [
        ["jobs"],
        ["migrate"],
        ["enqueue", "k"],
        ["cancel", "1"],
        ["worker", "--app", "tickwork.examples:app"],
    ],
)
def test_an_unreachable_database_is_named_without_its_password(
    closed_port: int, command: list[str]
) -> None:
    url = f"postgresql://tickwork:s3cret-pw@127.0.0.1:{closed_port}/tickwork"
    result = tickwork_cmd(*command, "--database-url", url)
    line = one_line_error(result, 1)
    assert f"cannot connect to the database at 127.0.0.1:{closed_port}: " in line
    assert "Connection refused" in line
    assert "s3cret-pw" not in result.stderr


def test_database_url_may_come_before_the_command(database_url: str) -> None:
    ok(tickwork_cmd("--database-url", database_url, "jobs"))


# --- worker -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("app", "expected"),
    [
        ("no_such_module:app", "--app: no module named 'no_such_module'"),
        ("tickwork.examples", "--app: expected MODULE:APP"),
        ("tickwork.examples:nope", "module tickwork.examples has no attribute 'nope'"),
        ("tickwork.examples:hello", "tickwork.examples:hello is a function, not a tickwork.App"),
    ],
)
def test_worker_refuses_an_app_it_cannot_load(database_url: str, app: str, expected: str) -> None:
    line = one_line_error(tickwork_cmd("worker", "--app", app, database_url=database_url), 2)
    assert expected in line


def test_worker_refuses_invalid_settings(database_url: str) -> None:
    result = tickwork_cmd(
        "worker", "--app", "tickwork.examples:app", database_url=database_url,
        TICKWORK_CONCURRENCY="many",
    )  # fmt: skip
    assert "TICKWORK_CONCURRENCY: 'many' is not a valid int" in one_line_error(result, 2)


WORKER_APP = textwrap.dedent(
    """
    import pathlib
    import time

    import tickwork

    app = tickwork.App()


    @app.task("accept.quick")
    def quick(job):
        pass


    @app.task("accept.slow")
    def slow(job):
        pathlib.Path(job.payload["dir"], f"started-{job.id}").touch()
        time.sleep(job.payload["seconds"])
    """
)


def test_worker_runs_jobs_and_hands_back_unstarted_ones_on_sigterm(
    database_url: str, tmp_path: Path
) -> None:
    (tmp_path / "accept_app.py").write_text(WORKER_APP)
    command = [TICKWORK, "worker", "--app", "accept_app:app", "--name", "acceptance"]
    command += ["--concurrency", "1", "--prefetch", "3", "--shutdown-grace-seconds", "15"]
    command += ["--http-port", "0"]  # 9090 may be taken by another test's process
    worker = subprocess.Popen(
        command,
        env=_env(database_url, PYTHONPATH=_with_path(tmp_path)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    app = tickwork.App(database_url)
    try:
        with psycopg.connect(database_url, autocommit=True) as conn:

            def statuses() -> list[str]:
                rows = conn.execute("SELECT status FROM tickwork.jobs ORDER BY id").fetchall()
                return [row[0] for row in rows]

            helpers.wait_until_sync(
                lambda: conn.execute("SELECT count(*) FROM tickwork.workers").fetchone() == (1,),
                timeout=DEADLINE,
                what="the worker to register",
            )
            served = tickwork_cmd("enqueue", "accept.quick", database_url=database_url)
            ok(served)
            assert served.stderr == ""
            helpers.wait_until_sync(
                lambda: statuses() == ["succeeded"], timeout=DEADLINE, what="the quick job to run"
            )

            payload = {"dir": str(tmp_path), "seconds": 3}
            slow = app.enqueue_many("accept.slow", [payload] * 5)
            helpers.wait_until_sync(
                lambda: (
                    statuses()[1:] == ["running"] * 4 + ["available"]
                    and any(tmp_path.glob("started-*"))
                ),
                timeout=DEADLINE,
                what="one slow job started and three more claimed",
            )
            worker.send_signal(signal.SIGTERM)
            sent = time.monotonic()
            _, stderr = worker.communicate(timeout=DEADLINE)
            took = time.monotonic() - sent

            assert worker.returncode == 0, stderr
            assert "Traceback" not in stderr
            assert "action=jobs_handed_back worker=acceptance count=3" in stderr
            assert took < 15
            started = {int(p.name.removeprefix("started-")) for p in tmp_path.glob("started-*")}
            assert len(started) == 1
            for job_id in slow:
                row = conn.execute(
                    "SELECT status, attempt, picked_by FROM tickwork.jobs WHERE id = %s",
                    (job_id,),
                ).fetchone()
                expected = ("succeeded", 1, "acceptance") if job_id in started else None
                assert row == (expected or ("available", 0, None))
            assert conn.execute("SELECT count(*) FROM tickwork.workers").fetchone() == (0,)
    finally:
        app.close()
        if worker.poll() is None:
            worker.kill()
            worker.communicate()


def test_enqueue_with_app_uses_the_task_queue(database_url: str, tmp_path: Path) -> None:
    (tmp_path / "mailtasks.py").write_text(
        "import tickwork\napp = tickwork.App()\n"
        "@app.task('email.send', queue='mail')\ndef send(job): pass\n"
    )
    env = {"PYTHONPATH": _with_path(tmp_path)}
    args = ("enqueue", "email.send", "--app", "mailtasks:app", "--allow-unknown-kind")
    job_id = int(ok(tickwork_cmd(*args, database_url=database_url, **env)))
    assert job(database_url, job_id)["queue"] == "mail"
    given = int(ok(tickwork_cmd(*args, "--queue", "urgent", database_url=database_url, **env)))
    assert job(database_url, given)["queue"] == "urgent"
    line = one_line_error(
        tickwork_cmd("enqueue", "nope", "--app", "mailtasks:app", database_url=database_url, **env),
        2,
    )
    assert "--app: mailtasks:app registers no task 'nope'" in line
