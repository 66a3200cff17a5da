"""Database fixtures for the whole suite.

Each test process (each pytest-xdist worker too) starts one throwaway PostgreSQL server,
unless ``TICKWORK_TEST_DATABASE_URL`` names a server to use instead. A template database is
migrated once per process; every test that asks for ``database_url`` gets a fresh copy of it.
The copies are made one ahead and dropped behind, on a thread of their own, so a test does
not wait for either (about 0.1 s each, most of the suite's tests).
"""

from __future__ import annotations

import itertools
import logging
import os
import tempfile
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
from hypothesis import settings
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

import tickwork
from tests.support import forking, helpers
from tickwork import logs
from tickwork.clock import SettableClock
from tickwork.db import migrate
from tickwork.db.embedded import EmbeddedPostgres

# Database names must not clash between xdist workers sharing TICKWORK_TEST_DATABASE_URL.
_SUFFIX = f"_{worker}" if (worker := os.environ.get("PYTEST_XDIST_WORKER")) else ""
_numbers = itertools.count(1)


@contextmanager
def _database(server_url: str, name: str, template: str) -> Iterator[str]:
    """Create database ``name`` from ``template``, yield its conninfo, drop it after."""
    ident = sql.Identifier(name)
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(ident))
        admin.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(ident, sql.Identifier(template))
        )
    try:
        yield make_conninfo(server_url, dbname=name)
    finally:
        with psycopg.connect(server_url, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(ident))


@pytest.fixture(autouse=True)
def _logging_left_as_found() -> Iterator[None]:
    """A command run in-process (``tickwork.cli.main``) installs tickwork's handler on the root
    logger, bound to this test's captured stderr; later tests of the process logging through it
    would write to a closed file (``--- Logging error ---``). Removed after each test."""
    root = logging.getLogger()
    level = root.level
    yield
    for handler in [h for h in root.handlers if isinstance(h.formatter, logs.KeyValueFormatter)]:
        root.removeHandler(handler)
    root.setLevel(level)


settings.register_profile("suite", deadline=None)
settings.load_profile("suite")
"""Hypothesis's per-example deadline (200 ms) is a timed assertion: a garbage collection or a
busy machine fails an example that took 0.02 ms on the retry. No test here sets one."""


def pytest_sessionstart(session: pytest.Session) -> None:
    """The server the multi-process tests fork from starts now, with the environment as the
    test process was given it: started later, it would keep whatever a test had patched."""
    forking.start_server()


@pytest.fixture(scope="session")
def server_url() -> Iterator[str]:
    """Conninfo of the maintenance database (``postgres``) of the server the tests use."""
    if url := os.environ.get("TICKWORK_TEST_DATABASE_URL"):
        yield url
        return
    # Not under pytest's tmp_path: its base directory is private (0700), and the server may run
    # as the postgres user, which must reach this directory.
    with tempfile.TemporaryDirectory(prefix="tickwork-test-pg-") as tmp:
        os.chmod(tmp, 0o711)
        with EmbeddedPostgres(Path(tmp), durable=False) as server:
            yield server.conninfo


class _Copies:
    """Fresh copies of the template: the next one made ahead, used ones dropped behind."""

    def __init__(self, server_url: str, template: str) -> None:
        self.server_url, self.template = server_url, template
        self.background = ThreadPoolExecutor(1, thread_name_prefix="test-databases")
        self.spare: Future[str] | None = None

    def _create(self, name: str) -> str:
        with psycopg.connect(self.server_url, autocommit=True) as admin:
            admin.execute(
                sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                    sql.Identifier(name), sql.Identifier(self.template)
                )
            )
        return make_conninfo(self.server_url, dbname=name)

    def _drop(self, name: str) -> None:
        with psycopg.connect(self.server_url, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))

    def take(self) -> str:
        spare, self.spare = self.spare, None
        url = spare.result() if spare else self._create(self._name())
        self.spare = self.background.submit(self._create, self._name())
        return url

    def give_back(self, url: str) -> None:
        self.background.submit(self._drop, conninfo_to_dict(url)["dbname"])

    def close(self) -> None:
        if self.spare:
            self.give_back(self.spare.result())
        self.background.shutdown(wait=True)

    @staticmethod
    def _name() -> str:
        return f"test{_SUFFIX}_{next(_numbers)}"


@pytest.fixture(scope="session")
def _template_copies(server_url: str) -> Iterator[_Copies]:
    """A database migrated to the latest schema, and the copies of it ``database_url`` uses."""
    with _database(server_url, f"tickwork_template{_SUFFIX}", "template0") as url:
        migrate.apply(url)
        copies = _Copies(server_url, conninfo_to_dict(url)["dbname"])
        try:
            yield copies
        finally:
            copies.close()


@pytest.fixture
def database_url(_template_copies: _Copies) -> Iterator[str]:
    """Conninfo of a fresh, fully migrated database of this test's own, dropped after."""
    url = _template_copies.take()
    try:
        yield url
    finally:
        _template_copies.give_back(url)


@pytest.fixture
def empty_database_url(server_url: str) -> Iterator[str]:
    """Conninfo of a fresh database with no tickwork schema at all, dropped after."""
    with _database(server_url, f"empty{_SUFFIX}_{next(_numbers)}", "template0") as url:
        yield url


@pytest.fixture
def conn(database_url: str) -> Iterator[psycopg.Connection]:
    """An autocommit connection to ``database_url``."""
    with psycopg.connect(database_url, autocommit=True) as connection:
        yield connection


@pytest.fixture
async def aconn(database_url: str) -> AsyncIterator[psycopg.AsyncConnection]:
    """An autocommit async connection to ``database_url``."""
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as c:
        yield c


@pytest.fixture
def clock() -> SettableClock:
    """Time pinned at ``helpers.T0``; tests move it by hand."""
    return SettableClock(helpers.T0)


@pytest.fixture
def app(database_url: str, clock: SettableClock) -> Iterator[tickwork.App]:
    """An App on ``database_url`` driven by ``clock``; tests register their own tasks."""
    app = tickwork.App(database_url, clock=clock)
    yield app
    app.close()
