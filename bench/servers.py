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
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

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
