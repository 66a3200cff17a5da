"""Forward-only schema migrations: numbered ``.sql`` files applied in order.

Each file runs in its own transaction under a transaction-level advisory lock (which a
transaction-mode pooler keeps, unlike a session lock), so any number of processes may call
:func:`apply` at once and exactly one applies each file. Applied files are
recorded with a SHA-256 checksum; a file changed after it was applied is refused.

A migration runs while the fleet works. Its transaction waits at most ``LOCK_TIMEOUT`` for each
lock (so claims and firing never queue for long behind a migration that is itself waiting),
and one that PostgreSQL aborts for a deadlock with a worker's statement (a migration locking
the jobs and the schedules tables, a worker's trigger locking them in the other order) or for
that time-out is rolled back whole and tried again, up to ``ATTEMPTS`` times.
"""

from __future__ import annotations

import hashlib
import logging
import random
import re
import time
from dataclasses import dataclass
from importlib import resources

import psycopg.errors

from tickwork.db import connections
from tickwork.errors import MigrationError

# An arbitrary constant shared by every tickwork process: "tickwork" as ASCII, as an int.
ADVISORY_LOCK_KEY = 0x7469636B776F726B

LOCK_TIMEOUT_MS = 10_000
"""How long one statement of a migration waits for a lock before its transaction is retried."""
ATTEMPTS = 6
"""How many times a migration's transaction is tried when deadlocks or lock time-outs abort it."""

log = logging.getLogger(__name__)

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
            if _apply_one(conn, migration):
                done.append(migration)
    return done


def _apply_one(conn: connections.Connection, migration: Migration) -> bool:
    """Apply one migration in its own transaction unless another process did; retried whole
    when a deadlock or the lock time-out aborts it. True when this call applied it."""
    attempt = 0
    while True:
        attempt += 1
        try:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (ADVISORY_LOCK_KEY,))
                if migration.version in _applied(conn):
                    return False
                conn.execute("SELECT set_config('lock_timeout', %s, true)", (str(LOCK_TIMEOUT_MS),))
                conn.execute(migration.sql)
                conn.execute(
                    "INSERT INTO tickwork.migrations (version, name, checksum) VALUES (%s, %s, %s)",
                    (migration.version, migration.name, migration.checksum),
                )
            return True
        except (psycopg.errors.DeadlockDetected, psycopg.errors.LockNotAvailable) as exc:
            reason = (
                "a deadlock"
                if isinstance(exc, psycopg.errors.DeadlockDetected)
                else "the lock time-out"
            )
            if attempt >= ATTEMPTS:
                raise MigrationError(
                    f"migration {migration.name} was aborted by {reason} {ATTEMPTS} times "
                    f"(each try rolled back whole): {str(exc).splitlines()[0]}; a long "
                    "transaction holding tickwork's tables is the likely cause "
                    "(see pg_stat_activity), then run tickwork migrate again"
                ) from exc
            pause = random.uniform(0.1, 0.5) * attempt
            log.warning(
                "migration %s aborted by %s (try %d of %d); rolled back, trying again in %.1f s",
                migration.name,
                reason,
                attempt,
                ATTEMPTS,
                pause,
            )
            time.sleep(pause)
