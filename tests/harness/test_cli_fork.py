"""The forked runner of short commands (tests/support/cli_fork.py) answers as the console
script does: same exit status, stdout and stderr, and each call sees only its environment."""

from __future__ import annotations

import os
import socket
import subprocess

import pytest

from tests.support.cli_fork import TICKWORK, run_tickwork

ENV = {k: v for k, v in os.environ.items() if not k.startswith("TICKWORK_")}


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        [
            "preview",
            "*/5 * * * *",
            "--count",
            "3",
            "--from",
            "2026-03-08T00:00:00",
            "--zone",
            "UTC",
        ],
        ["jobs", "--limt", "3"],
        ["enqueue", "x.y", "--payload", "{nope"],
        ["migrate"],  # no database URL anywhere: one line, exit 2
    ],
)
def test_a_forked_command_answers_as_the_console_script(args: list[str]) -> None:
    forked = run_tickwork(args, ENV)
    real = subprocess.run([TICKWORK, *args], env=ENV, capture_output=True, text=True, timeout=60)
    assert (forked.returncode, forked.stdout, forked.stderr) == (
        real.returncode,
        real.stdout,
        real.stderr,
    )


def test_each_call_sees_only_its_own_environment() -> None:
    """A variable given to one call is gone in the next (a fresh process each time)."""
    given = run_tickwork(["migrate"], {**ENV, "TICKWORK_DATABASE_URL": "postgresql://h.invalid/x"})
    assert given.returncode == 1 and "h.invalid" in given.stderr
    after = run_tickwork(["migrate"], ENV)
    assert after.returncode == 2 and "h.invalid" not in after.stderr


def test_a_command_past_its_time_out_is_killed() -> None:
    """A database that accepts the connection and never answers: the command waits for it."""
    with socket.create_server(("127.0.0.1", 0)) as silent:
        url = f"postgresql://x@127.0.0.1:{silent.getsockname()[1]}/x"
        with pytest.raises(subprocess.TimeoutExpired):
            run_tickwork(["jobs"], {**ENV, "TICKWORK_DATABASE_URL": url}, timeout=0.5)
    assert run_tickwork(["--help"], ENV).returncode == 0  # the runner still serves
