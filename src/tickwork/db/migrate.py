"""Forward-only schema migrations: numbered ``.sql`` files applied in order.

Each file runs in its own transaction under a transaction-level advisory lock (which a
transaction-mode pooler keeps, unlike a session lock), so any number of processes may call
:func:`apply` at once and exactly one applies each file. Applied files are
recorded with a SHA-256 checksum; a file changed after it was applied is refused.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources

from tickwork.db import connections
from tickwork.errors import MigrationError

# An arbitrary constant shared by every tickwork process: "tickwork" as ASCII, as an int.
ADVISORY_LOCK_KEY = 0x7469636B776F726B

_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")

_BOOTSTRAP = """
CREATE SCHEMA IF NOT EXISTS tickwork;
CREATE TABLE IF NOT EXISTS tickwork.migrations (
    version     integer PRIMARY KEY,
    name        text        NOT NULL,
    checksum    text        NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT now()
);
"""


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


@dataclass(frozen=True)
class MigrationStatus:
    migration: Migration
    applied: bool


def available() -> list[Migration]:
    """The migrations shipped with this version of tickwork, in order."""
    found = []
    for entry in resources.files("tickwork.db").joinpath("migrations").iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append(Migration(int(match.group(1)), entry.name, entry.read_text("utf-8")))
    found.sort(key=lambda m: m.version)
    return found


def _applied(conn: connections.Connection) -> dict[int, str]:
    rows = conn.execute("SELECT version, checksum FROM tickwork.migrations").fetchall()
    return {version: checksum for version, checksum in rows}


def _check_checksums(migrations: list[Migration], applied: dict[int, str]) -> None:
    for migration in migrations:
        recorded = applied.get(migration.version)
        if recorded is not None and recorded != migration.checksum:
            raise MigrationError(
                f"migration {migration.name} was changed after it was applied "
                f"(recorded checksum {recorded[:12]}, file has {migration.checksum[:12]}); "
                "applied migrations must never be edited: add a new one instead"
            )


def status(conninfo: str) -> list[MigrationStatus]:
    """Every shipped migration and whether it has been applied."""
    migrations = available()
    with connections.connect(conninfo, autocommit=True) as conn:
        exists = conn.execute("SELECT to_regclass('tickwork.migrations') IS NOT NULL").fetchone()
        applied = _applied(conn) if exists and exists[0] else {}
    _check_checksums(migrations, applied)
    return [MigrationStatus(m, m.version in applied) for m in migrations]


def apply(conninfo: str, *, until: int | None = None) -> list[Migration]:
    """Apply pending migrations (those numbered up to ``until`` only, when given: an older
    schema for upgrade tests and bench/migration_locks.py); returns those applied by this call
    (empty when up to date)."""
    migrations = [m for m in available() if until is None or m.version <= until]
    done: list[Migration] = []
    with connections.connect(conninfo, autocommit=True) as conn:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (ADVISORY_LOCK_KEY,))
            conn.execute(_BOOTSTRAP)
            _check_checksums(migrations, _applied(conn))
        for migration in migrations:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (ADVISORY_LOCK_KEY,))
                if migration.version in _applied(conn):
                    continue
                conn.execute(migration.sql)
                conn.execute(
                    "INSERT INTO tickwork.migrations (version, name, checksum) VALUES (%s, %s, %s)",
                    (migration.version, migration.name, migration.checksum),
                )
            done.append(migration)
    return done
