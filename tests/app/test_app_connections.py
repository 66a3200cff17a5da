"""A long-lived App (the console's) survives connections cut while idle: with
``check_connections`` a pooled connection is tried before use, so the first call after
``pg_terminate_backend`` (or a database restart) works instead of failing on a dead one."""

from __future__ import annotations

import psycopg
import pytest

import tickwork


def _cut(database_url: str) -> int:
    """Terminate every other backend of this database; how many."""
    with psycopg.connect(database_url, autocommit=True) as admin:
        row = admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()
    return int(row[0]) if row else 0


def test_a_checked_pool_survives_a_cut_connection(database_url: str) -> None:
    app = tickwork.App(database_url, check_connections=True)
    try:
        first = app.enqueue("k", {})
        assert _cut(database_url) >= 1
        assert app.get_job(first) is not None  # a fresh connection, no error
    finally:
        app.close()


def test_without_the_check_the_first_call_after_a_cut_fails(database_url: str) -> None:
    app = tickwork.App(database_url)
    try:
        app.enqueue("k", {})
        assert _cut(database_url) >= 1
        with pytest.raises(psycopg.OperationalError):
            app.enqueue("k", {})
    finally:
        app.close()
