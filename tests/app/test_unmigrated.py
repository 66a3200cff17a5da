"""An App on a database never migrated raises tickwork's own error with the command line's
hint (run ``tickwork migrate`` first), from every kind of call; the caller's own SQL on an App
connection keeps the driver's error."""

from __future__ import annotations

import psycopg
import pytest

import tickwork
from tickwork.errors import SchemaMissing, TickworkError

HINT = "run `tickwork migrate` first"


def test_enqueue_and_listing_say_to_migrate(empty_database_url: str) -> None:
    app = tickwork.App(empty_database_url)
    try:
        with pytest.raises(SchemaMissing) as raised:
            app.enqueue("email.send", {"to": "ada@example.com"})
        assert str(raised.value) == (
            f'the database is not migrated (relation "tickwork.jobs" does not exist): {HINT}'
        )
        assert isinstance(raised.value, TickworkError)
        assert raised.value.__cause__ is None and raised.value.__suppress_context__
        with pytest.raises(SchemaMissing, match=HINT):
            app.enqueue_many("email.send", [{}, {}])
        with pytest.raises(SchemaMissing, match=HINT):
            app.list_jobs()
        with pytest.raises(SchemaMissing, match=HINT):
            app.list_schedules()
    finally:
        app.close()


def test_an_enqueue_in_the_callers_transaction_says_the_same(empty_database_url: str) -> None:
    app = tickwork.App(empty_database_url)
    with psycopg.connect(empty_database_url) as conn, pytest.raises(SchemaMissing, match=HINT):
        app.enqueue("email.send", {}, conn=conn)


async def test_the_async_api_says_the_same(empty_database_url: str) -> None:
    app = tickwork.App(empty_database_url)
    try:
        with pytest.raises(SchemaMissing, match=HINT):
            await app.enqueue_async("email.send", {})
        with pytest.raises(SchemaMissing, match=HINT):
            await app.enqueue_many_async("email.send", [{}])
        async with await psycopg.AsyncConnection.connect(empty_database_url) as conn:
            with pytest.raises(SchemaMissing, match=HINT):
                await app.enqueue_async("email.send", {}, conn=conn)
    finally:
        await app.close_async()


def test_the_callers_own_sql_keeps_the_drivers_error(empty_database_url: str) -> None:
    app = tickwork.App(empty_database_url)
    try:
        with pytest.raises(psycopg.errors.UndefinedTable), app.connection() as conn:
            conn.execute("SELECT * FROM orders")
    finally:
        app.close()
