"""The README's own code blocks, run as a newcomer pastes them: the quick start's ``tasks.py``
and ``produce.py`` and its shell commands, then the Schedules section's manifest and
commands, in a fresh directory against a private PostgreSQL (the ``export`` line is the one
thing replaced: by this test's database). Long-running commands (``tickwork worker``) run in
the background until what they are for has happened, then get Ctrl-C (SIGINT)."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

import tickwork

ROOT = Path(__file__).resolve().parents[2]
TICKWORK = str(Path(sys.executable).parent / "tickwork")
SRC = Path(tickwork.__file__).resolve().parents[1]
FILE_BLOCK = re.compile(r"`([\w/.-]+\.(?:py|yaml))`:\n\n```(?:python|yaml)\n(.*?)```", re.S)
SH_BLOCK = re.compile(r"```sh\n(.*?)```", re.S)


def section(title: str) -> str:
    text = (ROOT / "README.md").read_text()
    return text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def files_of(text: str) -> dict[str, str]:
    """The blocks introduced by a line ending in ``path``: — the files the reader writes."""
    return dict(FILE_BLOCK.findall(text))


def commands_of(text: str) -> list[str]:
    """The shell commands of a section's first ``sh`` block, comments dropped."""
    match = SH_BLOCK.search(text)
    assert match, "no sh block"
    lines = (line.split("  #", 1)[0].strip() for line in match.group(1).splitlines())
    return [line for line in lines if line]


class Shell:
    """Runs README commands in ``cwd`` with the environment the reader's shell would have."""

    def __init__(self, cwd: Path, database_url: str) -> None:
        self.cwd = cwd
        self.database_url = database_url
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("TICKWORK_")}
        # The reader's directory (tasks.py), then the tickwork under test: the console script
        # would otherwise import whichever checkout is installed, not this one.
        self.env["PYTHONPATH"] = os.pathsep.join((str(cwd), str(SRC)))

    def argv(self, command: str) -> list[str]:
        argv = shlex.split(command)
        if argv[0] == "tickwork":
            return [TICKWORK, *argv[1:]]
        if argv[0] == "python":
            return [sys.executable, *argv[1:]]
        raise AssertionError(f"unexpected command in the README: {command}")

    def run(self, command: str) -> str:
        if command.startswith("export TICKWORK_DATABASE_URL="):
            self.env["TICKWORK_DATABASE_URL"] = self.database_url
            return ""
        result = subprocess.run(
            self.argv(command), cwd=self.cwd, env=self.env, capture_output=True, text=True,
            timeout=60,
        )  # fmt: skip
        assert result.returncode == 0, f"{command}\n{result.stderr}"
        assert "Traceback" not in result.stderr, result.stderr
        return result.stdout

    def run_until(self, command: str, done: Callable[[], bool]) -> str:
        """Start a long-running command; Ctrl-C it once ``done()``; its output."""
        process = subprocess.Popen(
            self.argv(command), cwd=self.cwd, env=self.env, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 60
            while not done():
                assert process.poll() is None, f"{command} exited: {process.stdout.read()}"  # type: ignore[union-attr]
                assert time.monotonic() < deadline, f"{command}: timed out"
                time.sleep(0.2)
        finally:
            process.send_signal(signal.SIGINT)
            output, _ = process.communicate(timeout=30)
        assert process.returncode == 0, output
        assert "Traceback" not in output, output
        return output


@pytest.fixture
def shell(tmp_path: Path, database_url: str) -> Shell:
    return Shell(tmp_path, database_url)


def write(cwd: Path, files: dict[str, str]) -> None:
    for name, body in files.items():
        path = cwd / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)


def jobs(shell: Shell, *args: str) -> list[dict[str, object]]:
    out = shell.run(shlex.join(["tickwork", "jobs", *args, "--limit", "1000", "-o", "json"]))
    result: list[dict[str, object]] = json.loads(out)
    return result


def worker_registered(shell: Shell) -> bool:
    with psycopg.connect(shell.database_url) as conn:
        return conn.execute("SELECT count(*) FROM tickwork.workers").fetchone() == (1,)


def test_the_quick_start_runs_as_written(shell: Shell) -> None:
    text = section("Quick start (Python)")
    files = files_of(text)
    assert set(files) == {"tasks.py", "produce.py"}
    write(shell.cwd, files)
    commands = commands_of(text)
    assert "tickwork dev --db-only" in text
    outputs = {}
    for command in commands:
        if command.startswith("tickwork worker"):
            outputs[command] = shell.run_until(
                command, lambda: len(jobs(shell, "--status", "succeeded")) == 103
            )
        else:
            outputs[command] = shell.run(command)
    worker_output = next(out for cmd, out in outputs.items() if cmd.startswith("tickwork worker"))
    assert "sending to carol@example.com" in worker_output
    succeeded = next(out for cmd, out in outputs.items() if "--status succeeded" in cmd)
    assert [job["status"] for job in json.loads(succeeded)] == ["succeeded"] * 3
    assert jobs(shell, "--status", "dead") == []


def test_the_schedules_section_runs_as_written(shell: Shell) -> None:
    text = section("Schedules")
    files = files_of(text)
    assert list(files) == ["schedules/nightly-report.yaml"]
    write(shell.cwd, files)
    (shell.cwd / "tasks.py").write_text(files_of(section("Quick start (Python)"))["tasks.py"])
    shell.run("export TICKWORK_DATABASE_URL=as-printed")
    outputs = {}
    for command in commands_of(text):
        if command.startswith("tickwork worker"):
            outputs[command] = shell.run_until(command, lambda: worker_registered(shell))
        else:
            outputs[command] = shell.run(command)
    listed = json.loads(next(out for cmd, out in outputs.items() if "-o json" in cmd))
    assert [s["name"] for s in listed] == ["nightly-report"]
    preview = next(out for cmd, out in outputs.items() if cmd.startswith("tickwork preview"))
    assert preview.splitlines() == [  # the skipped 02:30 fires once, right after the jump
        "2026-03-07T02:30:00-05:00  Sat  EST",
        "2026-03-08T03:00:00-04:00  Sun  EDT",
        "2026-03-09T02:30:00-04:00  Mon  EDT",
    ]
    fired = jobs(shell, "--kind", "report.nightly")
    backfilled = [job for job in fired if job["occurrence_at"] is not None]
    assert len(backfilled) == 6  # 03:00 London on Nov 1 ... Nov 6 (GMT in November)
    assert len(fired) == 7  # and the trigger's
