"""Pieces for the fault tests (test_connection_faults.py, test_pgbouncer.py) and
bench/faults.py: a TCP proxy that cuts every connection on demand, a fleet of ``tickwork
worker`` processes serving fault_app.py, and the count of task runs they recorded."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

TICKWORK = str(Path(sys.executable).parent / "tickwork")
HERE = Path(__file__).parent


class CutProxy:
    """An asyncio TCP proxy to ``host:port`` on a thread of its own; :meth:`cut` resets every
    connection through it at once (a network drop mid-transaction). New connections work,
    unless :meth:`down` made the database unreachable through it (until :meth:`up`)."""

    def __init__(self, host: str, port: int) -> None:
        self.upstream = (host, port)
        self.cuts = 0
        self.port = 0
        self.refusing = False
        self._open: set[asyncio.WriteTransport] = set()
        self._loop = asyncio.new_event_loop()
        ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, args=(ready,), daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("the proxy did not start")

    def _serve(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._accept, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        ready.set()
        self._loop.run_forever()
        server.close()
        # Finish the connections' coroutines on their own loop, then close it: left for the
        # garbage collector, each would complain that its loop is closed.
        pending = asyncio.all_tasks(self._loop)
        for task in pending:
            task.cancel()
        self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        self._loop.run_until_complete(server.wait_closed())
        self._loop.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.refusing:
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.transport.abort()
            return
        pair = {writer.transport, up_writer.transport}
        self._open |= pair
        try:
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        finally:
            for transport in pair:
                transport.abort()
            self._open -= pair

    def cut(self) -> int:
        """Reset every open connection; returns how many were cut."""

        async def cut() -> int:
            transports = list(self._open)
            for transport in transports:
                transport.abort()
            return len(transports) // 2

        cut_now = asyncio.run_coroutine_threadsafe(cut(), self._loop).result(10)
        self.cuts += 1
        return cut_now

    def down(self) -> None:
        """The database becomes unreachable: every connection is cut, new ones are reset."""
        self.refusing = True
        self.cut()

    def up(self) -> None:
        self.refusing = False

    def close(self) -> None:
        self.cut()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (OSError, ConnectionError):
        pass
    finally:
        writer.transport.abort()


class Fleet:
    """``tickwork worker --app fault_app:app`` processes; stderr of each in ``<logs>/<name>.log``,
    task runs in ``<runs>/runs-<pid>``."""

    def __init__(self, runs: Path, logs: Path) -> None:
        self.runs = runs
        self.logs = logs
        self.processes: dict[str, subprocess.Popen[str]] = {}
        self._files: list[IO[str]] = []

    def start(
        self,
        name: str,
        database_url: str,
        *,
        variables: Mapping[str, str | None] | None = None,
        **settings: Any,
    ) -> subprocess.Popen[str]:
        """Start worker ``name`` (its ``--name`` too); ``settings`` as ``TICKWORK_*`` variables,
        then ``variables`` as they are (None: unset)."""
        inherited = os.environ.items()
        env = {k: v for k, v in inherited if not k.startswith("TICKWORK_") and k != "POD_NAME"}
        env.update(
            PYTHONPATH=os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")])),
            FAULT_DIR=str(self.runs),
            TICKWORK_DATABASE_URL=database_url,
            TICKWORK_NAME=name,
            TICKWORK_HTTP_PORT="0",
            TICKWORK_SHUTDOWN_GRACE_SECONDS="5",
        )
        env.update({f"TICKWORK_{key.upper()}": str(value) for key, value in settings.items()})
        for key, value in (variables or {}).items():
            if value is None:
                env.pop(key, None)
            else:
                env[key] = value
        log = (self.logs / f"{name}.log").open("w")
        self._files.append(log)
        process = subprocess.Popen(
            [TICKWORK, "worker", "--app", "fault_app:app", "--log-level", "info"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=log,
            text=True,
        )
        self.processes[name] = process
        return process

    def wait_started(self, timeout: float = 60.0) -> None:
        """Until every process has logged that its worker started (a loaded machine takes
        seconds to start a Python process; a fault test's clock starts after that)."""
        deadline = time.monotonic() + timeout
        while not all("action=worker_started" in self.log(name) for name in self.processes):
            if exits := self.exits():
                raise AssertionError(f"a worker exited before it started:\n{exits}")
            if time.monotonic() > deadline:
                raise AssertionError(f"the workers did not start within {timeout:.0f}s")
            time.sleep(0.05)

    def exited(self) -> dict[str, int]:
        """The processes that are no longer running, with their exit status."""
        return {
            name: code
            for name, process in self.processes.items()
            if (code := process.poll()) is not None
        }

    def exits(self) -> str:
        """The processes that exited, each with the end of its log ("" when none did)."""
        return "\n".join(
            f"{name} exited with {code}:\n{self.log(name)[-3000:]}"
            for name, code in self.exited().items()
        )

    def log(self, name: str) -> str:
        return (self.logs / f"{name}.log").read_text()

    def lines(self, needle: str) -> list[str]:
        return [
            line
            for name in self.processes
            for line in self.log(name).splitlines()
            if needle in line
        ]

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGCONT)
                process.send_signal(signal.SIGTERM)
        for process in self.processes.values():
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)
        for file in self._files:
            file.close()


def runs(directory: Path) -> Counter[int]:
    """How many times each job's body finished, over every process."""
    counted: Counter[int] = Counter()
    for path in directory.glob("runs-*"):
        counted.update(int(line.split()[0]) for line in path.read_text().splitlines() if line)
    return counted


def runs_by_process(directory: Path) -> dict[int, list[tuple[int, int]]]:
    """``pid -> [(job id, attempt), ...]`` in the order they finished."""
    return {
        int(path.name.removeprefix("runs-")): [
            (int(a), int(b)) for a, b in (line.split() for line in path.read_text().splitlines())
        ]
        for path in directory.glob("runs-*")
    }
