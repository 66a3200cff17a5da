"""A private PostgreSQL server in a directory of its own, for ``tickwork dev`` and the tests.

The directory given to :class:`EmbeddedPostgres` holds tickwork's files: the cluster
(``pgdata/``), the server log (``postgres.log``), the port of the last start (``port``) and
the process that owns the running server (``owner``). The server listens on 127.0.0.1 and on
a socket in /tmp, and trusts every local connection: it is for one machine, never shared.

PostgreSQL refuses to run as root. When we are root, the binaries run as the ``postgres``
user (or ``tickwork-pg``, created when neither exists). If that user cannot reach the
directory (a project under /root, mode 0700), the cluster lives in
``/var/tmp/tickwork-pg-<hash of the directory>`` instead, and a log line says so.

Without system binaries, the ``pgserver`` package from PyPI is used if installed (a server
on a Unix socket only; ``port``, ``durable`` and ``max_connections`` do not apply to it).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import logging
import os
import pwd
import shutil
import signal
import socket
import stat
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO, Self

from tickwork.errors import DatabaseUnavailable

_log = logging.getLogger(__name__)

NO_POSTGRES = (
    "no PostgreSQL found: install postgresql (apt-get install postgresql) or pip install pgserver"
)

SOCKET_DIR = "/tmp"
MAX_CONNECTIONS = 200
NOT_DURABLE = ("fsync=off", "synchronous_commit=off", "full_page_writes=off")
START_TIMEOUT = 30.0
STOP_TIMEOUT = 60.0
POLL_INTERVAL = 0.01
CREATED_USER = "tickwork-pg"
RELOCATED_PREFIX = "tickwork-pg-"


def find_bindir() -> Path | None:
    """The directory of the PostgreSQL server binaries, or None when none is installed.

    Tries ``pg_config --bindir``, then the newest ``/usr/lib/postgresql/*/bin``, then the
    directory of ``initdb`` on PATH.
    """
    candidates: list[Path] = []
    if pg_config := shutil.which("pg_config"):
        with contextlib.suppress(OSError, subprocess.CalledProcessError):
            out = subprocess.run([pg_config, "--bindir"], capture_output=True, check=True)
            candidates.append(Path(out.stdout.decode().strip()))
    candidates += sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=_major, reverse=True)
    if initdb := shutil.which("initdb"):
        candidates.append(Path(initdb).parent)
    for bindir in candidates:
        if (bindir / "initdb").is_file() and (bindir / "postgres").is_file():
            return bindir
    return None


def _major(bindir: Path) -> int:
    name = bindir.parent.name
    return int(name) if name.isdigit() else 0


@dataclass(frozen=True)
class _PidFile:
    """What a postmaster records in ``postmaster.pid``."""

    pid: int
    port: int
    status: str


def _read_pid_file(cluster: Path) -> _PidFile | None:
    try:
        lines = (cluster / "postmaster.pid").read_text().splitlines()
        return _PidFile(int(lines[0]), int(lines[3]), lines[7].strip() if len(lines) > 7 else "")
    except (OSError, ValueError, IndexError):
        return None  # absent, or being written


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, and another user's
    return True


def _postmaster_of(cluster: Path, pid: int) -> bool:
    """Whether ``pid`` is a live postmaster working in ``cluster`` (not a recycled pid)."""
    if not _alive(pid):
        return False
    if not Path("/proc/self").is_dir():
        return True  # no /proc (macOS): trust the pid
    try:
        return os.readlink(f"/proc/{pid}/cwd") == str(cluster.resolve())
    except OSError:
        return False  # gone meanwhile, or another user's process


def _port_is_free(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as PostgreSQL does
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def _wait_for(condition: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(POLL_INTERVAL)
    return True


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _server_account() -> pwd.struct_passwd | None:
    """The account to run the server as: None (ourselves) unless we are root."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", CREATED_USER):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    command = ["useradd", "--system", "--user-group", "--no-create-home"]
    command += ["--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", CREATED_USER]
    try:
        subprocess.run(command, capture_output=True, check=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        raise DatabaseUnavailable(
            f"PostgreSQL cannot run as root and there is no postgres user; creating the "
            f"user {CREATED_USER} failed: {exc}"
        ) from exc
    _log.info("created system user %s to run PostgreSQL", CREATED_USER)
    return pwd.getpwnam(CREATED_USER)


class _PortTaken(Exception):
    """The server exited because its port was taken after we chose it."""


class EmbeddedPostgres:
    """A PostgreSQL server owned by this process, in a directory of its own.

    ``durable=False`` turns off fsync, synchronous commit and full page writes (tests);
    keep the default for anything whose timing or data matters. ``settings`` are more
    ``name=value`` server settings, after (so over) the defaults: ``("max_connections=20",)``.
    Starting a directory whose server another live process started fails; a server left
    running by a process that died is adopted, and stopped by :meth:`stop` like one we started.
    """

    def __init__(
        self,
        data_dir: Path,
        *,
        port: int | None = None,
        durable: bool = True,
        log_file: Path | None = None,
        settings: Sequence[str] = (),
    ) -> None:
        self._data_dir = Path(data_dir).absolute()
        self._settings = tuple(settings)
        self._port = port
        self._durable = durable
        self._log_file = log_file if log_file is not None else self._data_dir / "postgres.log"
        self._account: pwd.struct_passwd | None = None
        self._cluster: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._pid: int | None = None
        self._conninfo: str | None = None
        self._pgserver: Any = None

    @property
    def conninfo(self) -> str:
        """URL of the ``postgres`` database of the running server."""
        if self._conninfo is None:
            raise RuntimeError("the embedded PostgreSQL server is not started")
        return self._conninfo

    @property
    def cluster_dir(self) -> Path:
        """The PostgreSQL data directory (inside ``data_dir``, or relocated: see the module)."""
        if self._cluster is None:
            raise RuntimeError("the embedded PostgreSQL server is not started")
        return self._cluster

    def start(self) -> str:
        """Create the cluster if needed, start the server, wait until it accepts connections."""
        if self._conninfo is not None:
            return self._conninfo
        bindir = find_bindir()
        if bindir is None:
            return self._start_pgserver()
        self._data_dir.mkdir(parents=True, exist_ok=True)
        self._account = _server_account()
        self._cluster = cluster = self._prepare_cluster()
        running = _read_pid_file(cluster)
        if running is not None and _postmaster_of(cluster, running.pid):
            self._adopt(running)
        else:
            if not (cluster / "PG_VERSION").exists():
                self._initdb(bindir)
            self._launch(bindir)
        (self._data_dir / "owner").write_text(f"{os.getpid()}\n")
        return self.conninfo

    def stop(self) -> None:
        """Stop the server (fast shutdown: sessions are ended); does nothing if not running."""
        if self._pgserver is not None:
            self._pgserver.cleanup()
            self._pgserver = self._conninfo = None
            return
        pid, proc = self._pid, self._proc
        if pid is None:
            return
        self._pid = self._proc = self._conninfo = None
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGINT)
        if proc is not None:
            stopped = _wait_for(lambda: proc.poll() is not None, STOP_TIMEOUT)
        else:  # adopted: not our child, so maybe a zombie nobody reaps once it exits
            cluster = self.cluster_dir
            stopped = _wait_for(lambda: not _postmaster_of(cluster, pid), STOP_TIMEOUT)
        if not stopped:
            raise DatabaseUnavailable(f"PostgreSQL (pid {pid}) did not stop; see {self._log_file}")
        (self._data_dir / "owner").unlink(missing_ok=True)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _start_pgserver(self) -> str:
        try:
            pgserver = importlib.import_module("pgserver")
        except ImportError:
            raise DatabaseUnavailable(NO_POSTGRES) from None
        self._data_dir.mkdir(parents=True, exist_ok=True)
        self._pgserver = pgserver.get_server(self._data_dir / "pgdata", cleanup_mode="stop")
        self._conninfo = str(self._pgserver.get_uri())
        return self._conninfo

    def _run_kwargs(self) -> dict[str, Any]:
        """subprocess arguments that run a PostgreSQL binary as the server account."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        kwargs: dict[str, Any] = {"cwd": "/", "env": env, "stdin": subprocess.DEVNULL}
        if (account := self._account) is not None:
            env["HOME"] = account.pw_dir
            kwargs["user"] = account.pw_uid
            kwargs["group"] = account.pw_gid
            kwargs["extra_groups"] = os.getgrouplist(account.pw_name, account.pw_gid)
        return kwargs

    def _prepare_cluster(self) -> Path:
        """Create the cluster directory, owned by the server account, where it can reach it."""
        cluster = self._data_dir / "pgdata"
        account = self._account
        if account is None:
            cluster.mkdir(mode=0o700, exist_ok=True)
            return cluster
        reach = subprocess.run(["test", "-x", str(self._data_dir)], **self._run_kwargs())
        if reach.returncode != 0:
            key = hashlib.sha256(str(self._data_dir.resolve()).encode()).hexdigest()[:16]
            cluster = Path("/var/tmp") / f"{RELOCATED_PREFIX}{key}"
            _log.info(
                "user %s cannot reach %s: its PostgreSQL cluster is in %s",
                account.pw_name,
                self._data_dir,
                cluster,
            )
        with contextlib.suppress(FileExistsError):
            cluster.mkdir(mode=0o700)
            os.chown(cluster, account.pw_uid, account.pw_gid)
        info = cluster.lstat()
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != account.pw_uid:
            raise DatabaseUnavailable(f"{cluster} is not a directory owned by {account.pw_name}")
        return cluster

    def _initdb(self, bindir: Path) -> None:
        command = [str(bindir / "initdb"), "-D", str(self.cluster_dir), "-U", "postgres"]
        command += ["--auth=trust", "--encoding=UTF8", "--locale=C"]
        if not self._durable:
            command.append("--no-sync")
        with self._open_log() as log:
            offset = log.tell()
            done = subprocess.run(
                command, stdout=log, stderr=subprocess.STDOUT, **self._run_kwargs()
            )
        if done.returncode != 0:
            raise DatabaseUnavailable(f"initdb failed:\n{self._log_since(offset)}")

    def _launch(self, bindir: Path) -> None:
        """Start the postmaster; an automatically chosen port taken meanwhile is chosen again."""
        for _ in range(5):
            port = self._choose_port()
            command = [str(bindir / "postgres"), "-D", str(self.cluster_dir), "-p", str(port)]
            settings = [
                "listen_addresses=127.0.0.1",
                f"unix_socket_directories={SOCKET_DIR}",
                f"max_connections={MAX_CONNECTIONS}",
            ]
            if not self._durable:
                settings += NOT_DURABLE
            settings += self._settings
            for setting in settings:
                command += ["-c", setting]
            with self._open_log() as log:
                offset = log.tell()
                proc = subprocess.Popen(
                    command,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # the terminal's Ctrl-C is for us, not for it
                    **self._run_kwargs(),
                )
            try:
                info = self._wait_ready(proc, offset)
            except _PortTaken:
                continue
            self._proc, self._pid = proc, info.pid
            self._set_port(info.port)
            return
        raise DatabaseUnavailable(f"no free port for PostgreSQL; see {self._log_file}")

    def _choose_port(self) -> int:
        if self._port is not None:
            return self._port
        recorded = _read_int(self._data_dir / "port")
        if recorded is not None and _port_is_free(recorded):
            return recorded
        return _free_port()

    def _wait_ready(self, proc: subprocess.Popen[bytes], log_offset: int) -> _PidFile:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                output = self._log_since(log_offset)
                if "Address already in use" in output and self._port is None:
                    raise _PortTaken
                raise DatabaseUnavailable(f"PostgreSQL failed to start:\n{output}")
            info = _read_pid_file(self.cluster_dir)
            if info is not None and info.pid == proc.pid and info.status == "ready":
                return info
            time.sleep(POLL_INTERVAL)
        proc.kill()
        proc.wait()
        raise DatabaseUnavailable(
            f"PostgreSQL did not start in {START_TIMEOUT:.0f} s:\n{self._log_since(log_offset)}"
        )

    def _adopt(self, running: _PidFile) -> None:
        """Take over a server left running, unless a live process other than us owns it."""
        owner = _read_int(self._data_dir / "owner")
        if owner is not None and owner != os.getpid() and _alive(owner):
            raise DatabaseUnavailable(
                f"PostgreSQL in {self.cluster_dir} is already in use by process {owner} "
                "(another tickwork dev?): stop that process first"
            )
        if running.status != "ready":
            raise DatabaseUnavailable(
                f"PostgreSQL in {self.cluster_dir} (pid {running.pid}) is starting or "
                "stopping: try again"
            )
        _log.info("adopting PostgreSQL left running (pid %d, port %d)", running.pid, running.port)
        self._pid = running.pid
        self._set_port(running.port)

    def _set_port(self, port: int) -> None:
        (self._data_dir / "port").write_text(f"{port}\n")
        self._conninfo = f"postgresql://postgres@127.0.0.1:{port}/postgres"

    def _open_log(self) -> BinaryIO:
        self._log_file.parent.mkdir(parents=True, exist_ok=True)
        return self._log_file.open("ab")

    def _log_since(self, offset: int) -> str:
        with self._log_file.open("rb") as log:
            log.seek(offset)
            return log.read().decode(errors="replace").strip()
