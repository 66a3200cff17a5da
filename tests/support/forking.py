"""The processes the multi-process tests start: forked from a server process (multiprocessing's
"forkserver") that has already imported tickwork, psycopg and the test support, instead of
spawned as a fresh interpreter that imports them again each time (~0.5 s of CPU apiece).

Each is still a process of its own with no thread and no connection of the test process
(the server is single-threaded and opens none), so what the tests prove across processes
holds as it did. The server starts when the test process does (tests/conftest.py), with its
environment and ``sys.path`` as given: a test that patches ``os.environ`` patches nothing of
the processes it starts (read settings from their arguments, as ``serve_worker`` does). Each
process writes to the stdout and stderr the test process had when it started it (pytest's
capture of the running test), as a spawned one would.
"""

from __future__ import annotations

import multiprocessing.forkserver
import os
from multiprocessing import reduction
from multiprocessing.context import BaseContext, ForkServerContext, ForkServerProcess
from typing import Any

PRELOAD = ["psycopg", "tickwork", "tickwork.worker.runner", "tests.support.helpers"]
"""What the server imports once for every process it forks."""


class _Output:
    """The starting process's stdout and stderr, sent along with the process (as file
    descriptors the server passes on), and put in place in the started one."""

    def __init__(self, fds: tuple[int, int] | None = None) -> None:
        self.fds = fds

    def __reduce__(self) -> tuple[Any, ...]:
        return (_Output._received, (reduction.DupFd(1), reduction.DupFd(2)))

    @staticmethod
    def _received(stdout: Any, stderr: Any) -> _Output:
        return _Output((stdout.detach(), stderr.detach()))

    def put_in_place(self) -> None:
        if self.fds is not None:
            os.dup2(self.fds[0], 1)
            os.dup2(self.fds[1], 2)


class _Process(ForkServerProcess):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._output = _Output()

    def run(self) -> None:
        self._output.put_in_place()
        super().run()


class _Context(ForkServerContext):
    Process = _Process  # type: ignore[assignment]


_CONTEXT = _Context()


def process_context() -> BaseContext:
    """The multiprocessing context to start test processes with."""
    _CONTEXT.set_forkserver_preload(PRELOAD)
    return _CONTEXT


def start_server() -> None:
    """Start the server now, before any test runs."""
    process_context()
    multiprocessing.forkserver.ensure_running()
