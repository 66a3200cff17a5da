"""Migrations on an empty database: applying, recording, refusing edits, racing, containment."""

from __future__ import annotations

import subprocess
import threading
import time
from typing import Any

import psycopg
import pytest

from tests.support.forking import process_context
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
    spawn = process_context()
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


_LOCKS_BOTH = """
CREATE TABLE tickwork.locks_both_probe (id integer);
LOCK TABLE tickwork.jobs IN SHARE ROW EXCLUSIVE MODE;
LOCK TABLE tickwork.schedules IN SHARE ROW EXCLUSIVE MODE;
"""


def _with_extra(monkeypatch: pytest.MonkeyPatch, sql: str) -> migrate.Migration:
    """A next migration that locks the jobs table, then the schedules table (as one adding a
    trigger or a foreign key between them does)."""
    shipped = migrate.available()
    version = len(shipped) + 1
    extra = migrate.Migration(version, f"{version:04d}_locks_both.sql", sql)
    monkeypatch.setattr(migrate, "available", lambda: [*shipped, extra])
    return extra


def _waiting_for(conn: psycopg.Connection[Any], table: str) -> bool:
    row = conn.execute(
        "SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = %s::regclass",
        (table,),
    ).fetchone()
    return bool(row and row[0])


def _wait_until_waiting(url: str, table: str) -> None:
    with psycopg.connect(url, autocommit=True) as watcher:
        deadline = time.monotonic() + 60
        while not _waiting_for(watcher, table):
            assert time.monotonic() < deadline, f"nobody came to wait for {table}"
            time.sleep(0.01)


def test_a_migration_deadlocked_with_a_worker_is_rolled_back_and_tried_again(
    empty_database_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A worker's transaction locks the schedules, then the jobs (as the claim's triggers do);
    the migration locks the jobs, then the schedules. PostgreSQL aborts one of the two: the
    migration here (the worker's deadlock_timeout is longer), which is then retried whole
    instead of failing `tickwork migrate` and the Helm upgrade."""
    migrate.apply(empty_database_url)
    extra = _with_extra(monkeypatch, _LOCKS_BOTH)
    applied: list[list[migrate.Migration]] = []
    with psycopg.connect(empty_database_url) as worker:
        worker.execute("SET deadlock_timeout = '60s'")
        worker.execute("LOCK TABLE tickwork.schedules IN ROW EXCLUSIVE MODE")
        runner = threading.Thread(target=lambda: applied.append(migrate.apply(empty_database_url)))
        runner.start()
        _wait_until_waiting(empty_database_url, "tickwork.schedules")
        # Closes the cycle; the migration's deadlock check (1 s) aborts it, freeing the jobs.
        worker.execute("LOCK TABLE tickwork.jobs IN ROW EXCLUSIVE MODE")
        worker.commit()
    runner.join(timeout=60)
    assert applied == [[extra]]
    assert "aborted by a deadlock (try 1 of" in caplog.text
    with psycopg.connect(empty_database_url) as conn:
        assert conn.execute("SELECT to_regclass('tickwork.locks_both_probe')").fetchone() == (
            "tickwork.locks_both_probe",
        )
        assert conn.execute(
            "SELECT count(*) FROM tickwork.migrations WHERE version = %s", (extra.version,)
        ).fetchone() == (1,)


def test_a_migration_that_never_gets_its_locks_fails_naming_itself_and_applies_nothing(
    empty_database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long transaction on the jobs table: each try waits at most the lock time-out, and
    after the last the error names the migration and the cause; nothing of it is kept."""
    migrate.apply(empty_database_url)
    extra = _with_extra(monkeypatch, _LOCKS_BOTH)
    monkeypatch.setattr(migrate, "LOCK_TIMEOUT_MS", 50)
    monkeypatch.setattr(migrate, "ATTEMPTS", 2)
    with psycopg.connect(empty_database_url) as long_transaction:
        long_transaction.execute("LOCK TABLE tickwork.jobs IN ROW EXCLUSIVE MODE")
        with pytest.raises(MigrationError, match=rf"{extra.name} was aborted by the lock time-out"):
            migrate.apply(empty_database_url)
    with psycopg.connect(empty_database_url) as conn:
        assert conn.execute("SELECT to_regclass('tickwork.locks_both_probe')").fetchone() == (None,)
        assert conn.execute(
            "SELECT count(*) FROM tickwork.migrations WHERE version = %s", (extra.version,)
        ).fetchone() == (0,)
