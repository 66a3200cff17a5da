"""Migrations on an empty database: applying, recording, refusing edits, racing, containment."""

from __future__ import annotations

import multiprocessing
import subprocess
from typing import Any

import psycopg
import pytest

from tickwork.db import migrate
from tickwork.db.embedded import find_bindir
from tickwork.errors import MigrationError

# Every schema object a migration could create outside its own schema. Toast tables are
# excluded: PostgreSQL puts those of tickwork's tables in pg_toast.
_OUTSIDE_TICKWORK = """
SELECT 'relation', n.nspname, c.relname FROM pg_class c
    JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname NOT IN ('tickwork', 'pg_toast')
UNION ALL
SELECT 'type', n.nspname, t.typname FROM pg_type t
    JOIN pg_namespace n ON n.oid = t.typnamespace WHERE n.nspname <> 'tickwork'
UNION ALL
SELECT 'routine', n.nspname, p.proname FROM pg_proc p
    JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname <> 'tickwork'
UNION ALL
SELECT 'schema', nspname, '' FROM pg_namespace WHERE nspname <> 'tickwork'
UNION ALL
SELECT 'extension', '', extname FROM pg_extension
UNION ALL
SELECT 'event trigger', '', evtname FROM pg_event_trigger
"""


def _recorded(url: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(
            "SELECT version, name, checksum, applied_at FROM tickwork.migrations ORDER BY version"
        ).fetchall()


def _apply_together(url: str, barrier: Any, results: Any) -> None:
    """Run in a child process: apply once every sibling is ready, report what was applied."""
    barrier.wait(timeout=60)
    try:
        results.put([m.version for m in migrate.apply(url)])
    except Exception as exc:
        results.put(repr(exc))


def test_shipped_migrations_are_numbered_from_one() -> None:
    versions = [m.version for m in migrate.available()]
    assert versions == list(range(1, len(versions) + 1))


def test_apply_on_an_empty_database_applies_everything(empty_database_url: str) -> None:
    available = migrate.available()
    assert migrate.apply(empty_database_url) == available
    recorded = [row[:3] for row in _recorded(empty_database_url)]
    assert recorded == [(m.version, m.name, m.checksum) for m in available]


def test_second_apply_is_a_no_op(empty_database_url: str) -> None:
    migrate.apply(empty_database_url)
    before = _recorded(empty_database_url)
    assert migrate.apply(empty_database_url) == []
    assert _recorded(empty_database_url) == before


def test_status_lists_applied_and_pending(
    empty_database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    available = migrate.available()
    assert [s.applied for s in migrate.status(empty_database_url)] == [False] * len(available)
    with monkeypatch.context() as older:  # as if the last migration had not shipped yet
        older.setattr(migrate, "available", lambda: available[:-1])
        migrate.apply(empty_database_url)
    status = migrate.status(empty_database_url)
    assert [s.migration for s in status] == available
    assert [s.applied for s in status] == [True] * (len(available) - 1) + [False]
    migrate.apply(empty_database_url)
    assert all(s.applied for s in migrate.status(empty_database_url))


def test_a_changed_applied_migration_is_refused(empty_database_url: str) -> None:
    migrate.apply(empty_database_url)
    first = migrate.available()[0]
    with psycopg.connect(empty_database_url) as conn:
        conn.execute(
            "UPDATE tickwork.migrations SET checksum = repeat('0', 64) WHERE version = %s",
            (first.version,),
        )
    with pytest.raises(MigrationError, match=first.name):
        migrate.apply(empty_database_url)
    with pytest.raises(MigrationError, match=first.name):
        migrate.status(empty_database_url)


def test_concurrent_applies_apply_each_migration_once(empty_database_url: str) -> None:
    spawn = multiprocessing.get_context("spawn")
    barrier, results = spawn.Barrier(4), spawn.Queue()
    processes = [
        spawn.Process(target=_apply_together, args=(empty_database_url, barrier, results))
        for _ in range(4)
    ]
    for process in processes:
        process.start()
    outcomes = [results.get(timeout=120) for _ in processes]
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0
    assert all(isinstance(outcome, list) for outcome in outcomes), outcomes
    available = [m.version for m in migrate.available()]
    assert sorted(v for outcome in outcomes for v in outcome) == available
    assert [row[0] for row in _recorded(empty_database_url)] == available


def test_migrations_create_nothing_outside_schema_tickwork(empty_database_url: str) -> None:
    with psycopg.connect(empty_database_url) as conn:
        before = set(conn.execute(_OUTSIDE_TICKWORK).fetchall())
    migrate.apply(empty_database_url)
    with psycopg.connect(empty_database_url) as conn:
        after = set(conn.execute(_OUTSIDE_TICKWORK).fetchall())
    assert after - before == set()


def _schema(url: str) -> str:
    """The tickwork schema as pg_dump prints it (the migrations table's rows aside)."""
    bindir = find_bindir()
    assert bindir is not None
    dump = subprocess.run(
        [str(bindir / "pg_dump"), "--schema-only", "--schema=tickwork", "--no-owner", url],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    # Comments and pg_dump's per-run \restrict keys differ between two dumps of one schema.
    noise = ("--", "\\restrict", "\\unrestrict")
    return "\n".join(line for line in dump.splitlines() if not line.startswith(noise))


@pytest.mark.parametrize("upgrade_from", range(1, len(migrate.available())))
def test_upgrading_from_every_earlier_version_gives_the_same_schema(
    upgrade_from: int,
    database_url: str,
    empty_database_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    shipped = migrate.available()
    with monkeypatch.context() as older:
        older.setattr(migrate, "available", lambda: shipped[:upgrade_from])
        migrate.apply(empty_database_url)
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        conn.execute("INSERT INTO tickwork.jobs (kind, payload) VALUES ('kept', '{\"n\": 1}')")

    assert migrate.apply(empty_database_url) == shipped[upgrade_from:]

    assert _schema(empty_database_url) == _schema(database_url), "same as migrated in one go"
    with psycopg.connect(empty_database_url) as conn:
        row = conn.execute("SELECT kind, payload, status FROM tickwork.jobs").fetchone()
    assert row == ("kept", {"n": 1}, "available"), "data written before the upgrade survives"
