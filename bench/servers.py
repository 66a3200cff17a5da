"""The database a benchmark runs against: ``$TICKWORK_DATABASE_URL`` when set, otherwise a
private PostgreSQL with its default durability (fsync and synchronous_commit on) under a
temporary directory, removed afterwards."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from psycopg import sql

from tickwork.db.embedded import EmbeddedPostgres


@contextmanager
def database_server(**system: str) -> Iterator[str]:
    """Yield the conninfo of the server to use. ``system`` settings (``ALTER SYSTEM``, then a
    restart) apply to the private server only: a server of your own is used as it is."""
    if url := os.environ.get("TICKWORK_DATABASE_URL"):
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
        with EmbeddedPostgres(Path(tmp) / "pg", durable=True) as pg:  # restarted: now applied
            yield pg.conninfo
