"""Each role's HTTP port: the defaults differ, so a worker, the console, the operator and
``tickwork dev`` run side by side on one machine; a default port in use moves to the next free
one, named in the start line (a second worker in another terminal stays up); a port given
explicitly that is taken is one line naming it (exit 2), never a traceback."""

from __future__ import annotations

import errno
import os
import queue
import re
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

from tests.cli.test_cli import TICKWORK, _env, one_line_error, tickwork_cmd
from tickwork import devmode, http, ports
from tickwork.admin.settings import AdminSettings
from tickwork.errors import ConfigurationError
from tickwork.operator.config import OperatorConfig
from tickwork.settings import WorkerSettings

CREDENTIALS = "alice:operator:a-long-random-secret-for-tests"
STARTUP_DEADLINE = 90.0  # tickwork dev: initdb of a durable cluster first
STOP_DEADLINE = 30.0


def test_the_roles_default_to_different_ports() -> None:
    defaults = {
        WorkerSettings(database_url="x", app="a:b").http_port,
        AdminSettings().port,
        OperatorConfig("x").http_port,
        devmode.HTTP_PORT,
    }
    assert defaults == {9090, 9091, 9092, 9093} == ports.ROLE_PORTS


@pytest.mark.parametrize("default", sorted(ports.ROLE_PORTS))
def test_a_default_port_moves_past_the_other_roles_defaults_and_not_far(default: int) -> None:
    fallbacks = ports.fallback_ports(default)
    assert fallbacks[0] == 9094, "never onto another role's default"
    assert list(fallbacks) == sorted(fallbacks) and not set(fallbacks) & ports.ROLE_PORTS
    assert max(fallbacks) == default + ports.FALLBACK_SPAN


@contextmanager
def held(port: int, host: str = "0.0.0.0") -> Iterator[bool]:
    """``port`` in use while inside: held here (True), or by another process (False), which
    may let it go meanwhile."""
    with socket.socket() as sock:
        try:
            sock.bind((host, port))
            sock.listen()
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            yield False
        else:
            yield True


def _held_ports(count: int) -> tuple[list[socket.socket], list[int]]:
    sockets = [socket.socket() for _ in range(count)]
    for sock in sockets:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
    return sockets, [sock.getsockname()[1] for sock in sockets]


async def test_listening_takes_the_first_free_fallback_and_names_them_all_when_none_is() -> None:
    sockets, (taken, also_taken, last_taken) = _held_ports(3)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    try:
        server = http.ProbeServer(taken, host="127.0.0.1", fallbacks=(also_taken, free))
        await server.start()
        assert (server.requested, server.port) == (taken, free)
        assert server.moved == f" ({taken} in use)"
        await server.stop()
        any_port = http.ProbeServer(0, host="127.0.0.1", fallbacks=(also_taken,))
        await any_port.start()
        assert any_port.port != 0 and any_port.moved == "", "port 0 is any port: nothing moved"
        await any_port.stop()
        stuck = http.ProbeServer(taken, host="127.0.0.1", fallbacks=(also_taken, last_taken))
        with pytest.raises(ConfigurationError) as error:
            await stuck.start()
        assert str(error.value).startswith(
            f"--http-port: cannot listen on 127.0.0.1:{taken} nor on {also_taken}-{last_taken}: "
        )
    finally:
        for sock in sockets:
            sock.close()


@pytest.fixture
def kubeconfig(tmp_path: Path) -> str:
    """A kubeconfig the operator can log in with (its API server is never reached here)."""
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: k, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
    )
    return str(path)


@pytest.mark.parametrize("given_by", ["flag", "variable"])
@pytest.mark.parametrize(
    "args",
    [
        ["worker", "--app", "tickwork.examples:app", "--http-host", "127.0.0.1"],
        ["admin", "--http-host", "127.0.0.1"],
        ["operator", "--standalone"],
    ],
    ids=lambda args: args[0],
)
def test_a_taken_port_given_explicitly_is_one_line(
    database_url: str, kubeconfig: str, args: list[str], given_by: str
) -> None:
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        given = {"TICKWORK_HTTP_PORT": port} if given_by == "variable" else {}
        result = tickwork_cmd(
            *args,
            *(["--http-port", port] if given_by == "flag" else []),
            database_url=database_url,
            TICKWORK_ADMIN_CREDENTIALS=CREDENTIALS,
            KUBECONFIG=kubeconfig,
            **given,
        )
        line = one_line_error(result, 2)
    assert "--http-port: cannot listen on " in line and f":{port}: " in line
    assert " nor on " not in line, "an explicit port never moves"


class Process:
    """A ``tickwork`` command running, its lines (stdout and stderr) read as they come."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.popen = subprocess.Popen(
            [TICKWORK, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        for stream in (self.popen.stdout, self.popen.stderr):
            threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream: Iterator[str]) -> None:
        for line in stream:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def wait_for(self, pattern: re.Pattern[str]) -> re.Match[str]:
        deadline = time.monotonic() + STARTUP_DEADLINE
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no {pattern.pattern!r} in:\n{self.seen}") from None
            assert line is not None or self.popen.poll() is None, f"exited:\n{self.seen}"
            if line is not None:
                self.seen.append(line)
                if match := pattern.search(line):
                    return match

    def stop(self) -> int:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGINT)
        try:
            return self.popen.wait(timeout=STOP_DEADLINE)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            return self.popen.wait()


@pytest.fixture
def dev_data_dir() -> Iterator[Path]:
    """A directory the server account can reach (pytest's tmp_path is private to root)."""
    with tempfile.TemporaryDirectory(prefix="tickwork-ports-test-") as tmp:
        os.chmod(tmp, 0o711)
        yield Path(tmp) / "data"


def _healthy(host: str, port: int) -> str:
    with urllib.request.urlopen(f"http://{host}:{port}/healthz", timeout=10) as response:
        return f"{response.status} {response.read().decode().strip()}"


WORKER_STARTED = re.compile(r"metrics on http://(?P<host>[0-9.]+):(?P<port>\d+)/metrics")
ADMIN_STARTED = re.compile(r"admin console listening on http://(?P<host>[0-9.]+):(?P<port>\d+)/")
DEV_STARTED = re.compile(r"^metrics: http://(?P<host>[0-9.]+):(?P<port>\d+)/metrics")
DEV_SERVING = re.compile(r"\d\d:\d\d:\d\d  job \d+ ")


def test_dev_two_workers_and_the_console_with_defaults_all_run_on_one_machine(
    database_url: str, dev_data_dir: Path
) -> None:
    """Every role's default port is held here (9090 for the workers), so that each one moves
    and says so, whatever else runs on this machine; all stay up, each on its own port."""
    env = _env(database_url, TICKWORK_ADMIN_CREDENTIALS=CREDENTIALS)
    dev_env = {k: v for k, v in env.items() if not k.startswith("TICKWORK_")}
    worker = ["worker", "--app", "tickwork.examples:app"]
    started = [
        (worker, env, WORKER_STARTED, 9090),
        (worker, env, WORKER_STARTED, 9090),
        (["admin"], env, ADMIN_STARTED, 9091),
        (["dev", "--data-dir", str(dev_data_dir)], dev_env, DEV_STARTED, 9093),
    ]
    processes: list[Process] = []
    addresses: list[tuple[str, int]] = []
    with ExitStack() as stack:
        ours = {port: stack.enter_context(held(port)) for port in (9090, 9091, 9093)}
        try:
            for args, process_env, pattern, default in started:
                process = Process(args, process_env)
                processes.append(process)
                line = process.wait_for(pattern)
                port = int(line["port"])
                if ours[default]:
                    assert f"({default} in use)" in line.string, line.string
                    assert port in ports.fallback_ports(default)
                addresses.append((line["host"], port))
                if args[0] == "dev":  # it prints where before it serves: its view runs after
                    process.wait_for(DEV_SERVING)
            assert len({port for _, port in addresses}) == len(addresses), addresses
            for host, port in addresses:
                assert _healthy("127.0.0.1" if host == "0.0.0.0" else host, port) == "200 ok"
            assert all(process.popen.poll() is None for process in processes), "all still up"
        finally:
            statuses = [process.stop() for process in reversed(processes)]
    assert statuses == [0] * len(processes), [process.seen for process in processes]
