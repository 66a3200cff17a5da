"""The database a benchmark runs against: always a fresh one of its own, dropped afterwards.

With ``--database-url`` (a server you name explicitly), the benchmark creates a database
``tickwork_bench_<pid>`` on that server (the user needs CREATEDB) and drops it at the end: no
other database there is read or written. Without it, a private PostgreSQL with its default
durability (fsync and synchronous_commit on) runs under a temporary directory, removed
afterwards. ``$TICKWORK_DATABASE_URL`` is never used: a benchmark never touches a database it
was not given.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from tickwork.db.embedded import EmbeddedPostgres


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``--database-url`` option every benchmark takes."""
    parser.add_argument(
        "--database-url",
        metavar="URL",
        help="a PostgreSQL server to run on: the benchmark creates a database of its own there"
        " and drops it after (default: a private server in a temporary directory)",
    )


@contextmanager
def database_server(server_url: str | None = None, **system: str) -> Iterator[str]:
    """Yield the conninfo of a fresh, empty database, dropped afterwards. ``system`` settings
    (``ALTER SYSTEM``, then a restart) apply to the private server only: a server of your own
    is used as it is."""
    if server_url:
        with _scratch(server_url) as url:
            yield url
        return
    with tempfile.TemporaryDirectory(prefix="tickwork-bench-") as tmp:
        os.chmod(tmp, 0o711)  # the server's own user must reach its data directory
        if system:
            with (
                EmbeddedPostgres(Path(tmp) / "pg", durable=True) as pg,
                psycopg.connect(pg.conninfo, autocommit=True) as conn,
            ):
                for name, value in system.items():
                    conn.execute(
                        sql.SQL("ALTER SYSTEM SET {} = {}").format(
                            sql.Identifier(name), sql.Literal(value)
                        )
                    )
        with (
            EmbeddedPostgres(Path(tmp) / "pg", durable=True) as pg,  # restarted: now applied
            _scratch(pg.conninfo) as url,
        ):
            yield url


@contextmanager
def _scratch(server_url: str) -> Iterator[str]:
    dbname = f"tickwork_bench_{os.getpid()}"
    name = sql.Identifier(dbname)
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(name))
    try:
        yield make_conninfo(server_url, dbname=dbname)
    finally:
        with psycopg.connect(server_url, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name))


@contextmanager
def pgbouncer(url: str, *, pool_size: int = 20) -> Iterator[str]:
    """Debian's pgbouncer (1.18) in transaction mode in front of the server of ``url``, run
    as user postgres on a free port (``auth_type = trust``); yields ``url`` through it."""
    binary = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
    if not os.path.exists(binary):
        raise SystemExit("pgbouncer is not installed (Debian: apt-get install pgbouncer)")
    params = conninfo_to_dict(url)
    with tempfile.TemporaryDirectory(prefix="tickwork-bench-pgbouncer-") as tmp:
        home = Path(tmp)
        home.chmod(0o777)
        port = _free_port()
        (home / "users.txt").write_text(f'"{params.get("user") or "postgres"}" ""\n')
        (home / "pgbouncer.ini").write_text(
            f"""[databases]
* = host={params.get("host") or "127.0.0.1"} port={params.get("port") or 5432}
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {home / "users.txt"}
pool_mode = transaction
default_pool_size = {pool_size}
max_client_conn = 1000
logfile = {home / "pgbouncer.log"}
"""
        )
        command = [binary, str(home / "pgbouncer.ini")]
        if os.geteuid() == 0:  # pgbouncer refuses root
            command = ["runuser", "-u", "postgres", "--", *command]
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        through = make_conninfo(url, host="127.0.0.1", port=str(port))
        try:
            deadline = time.monotonic() + 15
            while True:
                try:
                    psycopg.connect(through, connect_timeout=2, prepare_threshold=None).close()
                    break
                except psycopg.OperationalError:
                    if time.monotonic() > deadline or process.poll() is not None:
                        raise SystemExit("pgbouncer did not start") from None
                    time.sleep(0.1)
            yield through
        finally:
            process.terminate()
            process.wait(10)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
