"""``tickwork jobs get JOB_ID`` as users run it: a subprocess against a real database, the
jobs run by a real ``tickwork worker`` process. It shows the progress while the job runs and
the result once it is done, a result that was not kept as its error, escapes what a task
wrote (a terminal escape sequence stays text), and refuses a job that does not exist with
one line."""

from __future__ import annotations

import json
import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import tickwork
from tests.cli.test_cli import JOB_KEYS, TICKWORK, _env, _with_path, ok, one_line_error
from tests.cli.test_cli import tickwork_cmd as run
from tests.support import helpers

DEADLINE = 20.0

APP = textwrap.dedent(
    """
    import math, pathlib, time
    import tickwork

    app = tickwork.App()

    @app.task("cli.copy")
    def copy(job):
        job.progress(0.25, "copied 1 of 4 tables \\x1b[31mred")
        go = pathlib.Path(job.payload["go"])
        deadline = time.monotonic() + 30
        while not go.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        job.progress(1, "copied 4 of 4 tables")
        return {"tables": 4, "note": "<b>bold</b>"}

    @app.task("cli.nan")
    async def nan(job):
        return {"score": math.nan}
    """
)


@pytest.fixture
def worker(database_url: str, tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    (tmp_path / "results_app.py").write_text(APP)
    command = [TICKWORK, "worker", "--app", "results_app:app", "--name", "results"]
    command += ["--http-port", "0"]
    process = subprocess.Popen(
        command,
        env=_env(database_url, PYTHONPATH=_with_path(tmp_path)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    yield process
    process.terminate()
    _, stderr = process.communicate(timeout=DEADLINE)
    assert "Traceback" not in stderr


def _get(database_url: str, job_id: int) -> dict[str, Any]:
    found = json.loads(ok(run("jobs", "get", str(job_id), "-o", "json", database_url=database_url)))
    assert isinstance(found, dict)
    return found


def test_jobs_get_shows_progress_while_running_and_the_result_after(
    database_url: str, tmp_path: Path, worker: subprocess.Popen[str]
) -> None:
    go = tmp_path / "go"
    app = tickwork.App(database_url)
    try:
        job_id = app.enqueue("cli.copy", {"go": str(go)})
        failing = app.enqueue("cli.nan", {})
    finally:
        app.close()

    seen: dict[str, Any] = {}

    def reported() -> bool:
        seen.update(_get(database_url, job_id))
        return seen["progress"] is not None

    helpers.wait_until_sync(reported, timeout=DEADLINE, what="the progress to be written")
    assert seen["status"] == "running"
    assert set(seen) >= JOB_KEYS
    progress = seen["progress"]
    assert (progress["fraction"], progress["attempt"]) == (0.25, 1)
    assert progress["message"] == "copied 1 of 4 tables \x1b[31mred"
    assert progress["updated_at"].endswith("+00:00")
    assert (seen["result"], seen["result_error"]) == (None, None)
    text = ok(run("jobs", "get", str(job_id), database_url=database_url))
    assert "progress: 25% copied 1 of 4 tables \\x1b[31mred (attempt 1, at " in text
    assert "\x1b" not in text, "a task's escape sequence reaches the terminal as text"
    assert "status: running" in text

    go.touch()
    helpers.wait_until_sync(
        lambda: _get(database_url, job_id)["status"] == "succeeded",
        timeout=DEADLINE,
        what="the job to succeed",
    )
    done = _get(database_url, job_id)
    assert done["result"] == {"tables": 4, "note": "<b>bold</b>"}
    assert done["progress"]["fraction"] == 1.0, "the last report went with the outcome"
    text = ok(run("jobs", "get", str(job_id), database_url=database_url))
    assert 'result: {\n  "note": "<b>bold</b>",\n  "tables": 4\n}' in text  # jsonb key order
    assert "progress: 100% copied 4 of 4 tables" in text
    assert "result error: -" in text

    bad = _get(database_url, failing)
    assert bad["status"] == "succeeded"
    assert bad["result"] is None
    assert bad["result_error"] == "not kept: result.score: nan is not a JSON number"
    text = ok(run("jobs", "get", str(failing), database_url=database_url))
    assert "result error: not kept: result.score: nan is not a JSON number" in text


def test_jobs_get_refuses_what_is_not_a_job(database_url: str) -> None:
    assert "no job with id 424242" in one_line_error(
        run("jobs", "get", "424242", database_url=database_url), 1
    )
    assert "invalid int value: 'abc'" in one_line_error(
        run("jobs", "get", "abc", database_url=database_url), 2
    )
    listed = ok(run("jobs", "-o", "json", database_url=database_url))
    assert json.loads(listed) == [], "tickwork jobs alone still lists"
