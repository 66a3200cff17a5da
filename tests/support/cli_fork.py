"""Short ``tickwork`` commands run in a process of their own, forked from one that has already
imported the CLI: each call still gets a fresh process (its own environment, exit status,
stdout and stderr, nothing shared with the test or an earlier command), without paying
Python's start-up and tickwork's imports (~0.4 s of CPU) every time. The suite runs a few
hundred such commands.

What only a real start can show stays a real start: a call whose ``PYTHON*`` variables differ
from this process's (a ``PYTHONPATH`` naming a test's app) runs the console script itself, as
do the README's commands (tests/docs) and the installed wheel (tests/packaging).

One forking process per test process, started at the first call; it ends when its pipe closes.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

TICKWORK = str(Path(sys.executable).parent / "tickwork")

_SERVER = r"""
import atexit, json, logging, os, sys, time, traceback

import tickwork.cli  # everything each command needs, imported once

def run(request):
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(os.open(request["stdout"], os.O_WRONLY), 1)
    os.dup2(os.open(request["stderr"], os.O_WRONLY), 2)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    time.tzset()
    sys.argv = request["argv"]
    try:
        sys.exit(tickwork.cli.main())
    except SystemExit as exc:  # as the interpreter reads sys.exit's argument
        if exc.code is None:
            return 0
        if isinstance(exc.code, int):
            return exc.code
        print(exc.code, file=sys.stderr)
        return 1
    except BaseException:
        traceback.print_exc()
        return 1

for line in sys.stdin:
    request = json.loads(line)
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            status = run(request)
            atexit._run_exitfuncs()
            logging.shutdown()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(status)
    print(json.dumps({"pid": pid}), flush=True)
    _, waited = os.waitpid(pid, 0)
    print(json.dumps({"status": os.waitstatus_to_exitcode(waited)}), flush=True)
"""


class _Forker:
    """The forking process, and one command at a time through it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.process: subprocess.Popen[bytes] | None = None
        self.pending = b""

    def _started(self) -> subprocess.Popen[bytes]:
        if self.process is None or self.process.poll() is not None:
            self.process = subprocess.Popen(
                [sys.executable, "-c", _SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE
            )
            self.pending = b""
        return self.process

    def _answer(self, timeout: float) -> Any:
        """The next line the forking process printed, read from its pipe unbuffered (a
        buffered reader could hold the next answer while select waits for the pipe)."""
        assert self.process is not None and self.process.stdout is not None
        pipe = self.process.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self.pending:
            ready, _, _ = select.select([pipe], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise subprocess.TimeoutExpired(TICKWORK, timeout)
            chunk = os.read(pipe, 4096)
            assert chunk, "the forking process of tests/support/cli_fork.py ended"
            self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        return json.loads(line)

    def run(
        self, args: Sequence[str], env: Mapping[str, str], timeout: float
    ) -> subprocess.CompletedProcess[str]:
        with self.lock, tempfile.TemporaryDirectory(prefix="tickwork-cli-") as tmp:
            out, err = Path(tmp, "stdout"), Path(tmp, "stderr")
            out.touch()
            err.touch()
            process = self._started()
            assert process.stdin is not None
            request = {
                "argv": [TICKWORK, *args],
                "env": dict(env),
                "cwd": os.getcwd(),
                "stdout": str(out),
                "stderr": str(err),
            }
            process.stdin.write(json.dumps(request).encode() + b"\n")
            process.stdin.flush()
            pid = self._answer(60)["pid"]
            try:
                status = self._answer(timeout)["status"]
            except subprocess.TimeoutExpired:
                os.kill(pid, signal.SIGKILL)
                self._answer(60)
                raise subprocess.TimeoutExpired([TICKWORK, *args], timeout) from None
            return subprocess.CompletedProcess(
                [TICKWORK, *args], status, out.read_text(), err.read_text()
            )


_FORKER = _Forker()


def _starts_alike(env: Mapping[str, str]) -> bool:
    """Whether a process started with ``env`` would start like this one: the same
    interpreter variables (PYTHONPATH above all)."""

    def interpreter(variables: Mapping[str, str]) -> dict[str, str]:
        return {k: v for k, v in variables.items() if k.startswith("PYTHON")}

    return interpreter(env) == interpreter(os.environ)


def run_tickwork(
    args: Sequence[str], env: Mapping[str, str], *, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """``tickwork ARGS`` with exactly the environment ``env``, as ``subprocess.run`` with
    ``capture_output=True, text=True`` would return it."""
    if not _starts_alike(env):
        return subprocess.run(
            [TICKWORK, *args], env=env, capture_output=True, text=True, timeout=timeout
        )
    return _FORKER.run(args, env, timeout)
