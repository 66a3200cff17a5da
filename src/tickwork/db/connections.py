"""Connections, pools, notifications and database errors, as the rest of tickwork sees
them: only the database layer imports psycopg.

Every connection is safe behind a transaction-mode pooler (PgBouncer ``pool_mode =
transaction``): no session state, and no server-side prepared statements
(``prepare_threshold=None``) unless asked for with ``prepare=True``, which a worker does on a
direct connection (``--prepared-statements``, docs/settings.md): psycopg then prepares each
statement the first time it runs on a connection (parsed once), and PostgreSQL, after five
custom plans, keeps its generic plan when that costs no more (planned once). Connection
strings go to libpq untouched, so multi-host URLs (``host=a,b target_session_attrs=read-write``)
pick the primary of an HA pair.
:class:`Outage` is how a loop that talks to the database survives a cut connection or a
restart: backoff between attempts, one log line when it starts failing and one when it is
back."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Protocol, TypeAlias

import psycopg
import psycopg.errors
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from tickwork.clock import Clock
from tickwork.errors import MIGRATE_HINT, ConfigurationError, DatabaseUnavailable, SchemaMissing
from tickwork.logs import fields

Connection: TypeAlias = psycopg.Connection[Any]
AsyncConnection: TypeAlias = psycopg.AsyncConnection[Any]
Pool: TypeAlias = ConnectionPool[Connection]
AsyncPool: TypeAlias = AsyncConnectionPool[AsyncConnection]

DatabaseError = psycopg.Error
"""Anything the database or the driver refused."""
ConnectionLost = psycopg.OperationalError
"""The database could not be reached, or the connection broke."""
UniqueViolation = psycopg.errors.UniqueViolation
MISSING_SCHEMA = (
    psycopg.errors.UndefinedTable,
    psycopg.errors.UndefinedFunction,
    psycopg.errors.InvalidSchemaName,
)
"""Errors meaning the tickwork schema is not there, or not all of it (run the migrations)."""

CONNECT_TIMEOUT_SECONDS = 10
POOLED: dict[str, Any] = {"prepare_threshold": None}
"""Connection options of a connection without prepared statements: nothing a transaction-mode
pooler would lose."""
PREPARE_THRESHOLD = 0
"""Executions of a statement on a connection before psycopg prepares it: none (psycopg's
default, 5, would leave a worker's six pooled connections unprepared for its first ~30 claims,
and PostgreSQL plans five more before its generic plan)."""
PREPARED: dict[str, Any] = {"prepare_threshold": PREPARE_THRESHOLD}
"""Connection options with server-side prepared statements: for direct connections only."""


def _options(prepare: bool) -> dict[str, Any]:
    return PREPARED if prepare else POOLED


_LIBPQ_PREFIX = re.compile(
    r"^connection (?:failed|is bad): (?:connection to server [^:]*? failed: )?"
)


class Connected(Protocol):
    """What the App's groups of methods (:class:`tickwork.flow.controls.FlowControls`,
    :class:`tickwork.schedules.controls.ScheduleControls`,
    :class:`tickwork.job_controls.JobControls`) need of it: the clock SQL is given
    and a connection in a transaction that commits on success."""

    clock: Clock

    def connection(self) -> AbstractContextManager[Connection]: ...


def connect(
    url: str, *, autocommit: bool = False, timeout: int | None = None, prepare: bool = False
) -> Connection:
    """One connection of its own (the caller closes it). With ``timeout``, connecting gives up
    after that many seconds, unless ``url`` sets its own ``connect_timeout``; with ``prepare``,
    statements run often are prepared (never behind a transaction-mode pooler)."""
    if timeout is not None and "connect_timeout" not in conninfo_to_dict(url):
        url = make_conninfo(url, connect_timeout=timeout)
    return psycopg.connect(url, autocommit=autocommit, **_options(prepare))


def pool(url: str, *, max_size: int, check: bool = False) -> Pool:
    """A pool for the sync API (opened by the caller); transactions commit on success. With
    ``check``, a connection is tried before it is handed out (one round trip), so a call
    after a cut or a restart of the database does not fail on a dead one."""
    return ConnectionPool(
        url,
        min_size=1,
        max_size=max_size,
        open=False,
        kwargs=POOLED,
        check=ConnectionPool.check_connection if check else None,
    )


def async_pool(url: str, *, min_size: int, max_size: int, prepare: bool = False) -> AsyncPool:
    """A pool for asyncio code (opened by the caller); with ``prepare``, its connections
    prepare the statements they run often (never behind a transaction-mode pooler)."""
    return AsyncConnectionPool(
        url, min_size=min_size, max_size=max_size, open=False, kwargs=_options(prepare)
    )


async def discard_broken(pool: AsyncPool) -> None:
    """After a lost connection: drop the pool's idle connections that broke with it (a cut or
    a restart breaks them all at once), so that a retry gets a live one."""
    await pool.check()


async def notifications(url: str, channels: Sequence[str]) -> AsyncIterator[tuple[str, str]]:
    """LISTEN on ``channels`` and yield ``(channel, payload)`` as notifications arrive. The
    first item is ``("", "")`` once listening, so the caller can look for what it may have
    missed before. Raises :data:`ConnectionLost` when the connection breaks. LISTEN needs a
    session of its own: ``url`` must not go through a transaction-mode pooler."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True, **POOLED) as conn:
        for channel in channels:
            await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
        yield "", ""
        async for notice in conn.notifies():
            yield notice.channel, notice.payload


def schema_missing(exc: psycopg.Error) -> SchemaMissing | None:
    """The error a user sees for ``exc`` when it means tickwork's schema is missing (a table,
    a function or the schema ``tickwork`` itself), else None: the one mapping of these errors,
    for the App and the command line alike."""
    if not isinstance(exc, MISSING_SCHEMA):
        return None
    lines = str(exc).strip().splitlines()
    detail = lines[0] if lines else type(exc).__name__
    if "tickwork" not in detail:  # the caller's own SQL on an App connection
        return None
    return SchemaMissing(f"the database is not migrated ({detail}): {MIGRATE_HINT}")


@contextmanager
def schema_required() -> Iterator[None]:
    """Raise :class:`SchemaMissing` instead of the driver's error when tickwork's schema is
    missing (a sync ``with`` serves async code too)."""
    try:
        yield
    except MISSING_SCHEMA as exc:
        mapped = schema_missing(exc)
        if mapped is None:
            raise
        raise mapped from None  # its message carries the driver's


def check(url: str) -> None:
    """Connect and disconnect. Raises ConfigurationError for a malformed connection string and
    DatabaseUnavailable naming where and why (never the password)."""
    try:
        params = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        raise ConfigurationError(  # libpq's message quotes pieces of it: maybe the password
            "not a valid connection string (libpq cannot parse it; it is not shown)"
        ) from None
    timeout = params.get("connect_timeout", CONNECT_TIMEOUT_SECONDS)
    try:
        psycopg.connect(url, connect_timeout=timeout, **POOLED).close()
    except psycopg.OperationalError as exc:
        where = f"{params.get('host') or 'localhost'}:{params.get('port') or 5432}"
        reason = _LIBPQ_PREFIX.sub("", str(exc).strip().splitlines()[0]) if str(exc) else "?"
        password = str(params.get("password") or "")
        if password:
            reason = reason.replace(password, "***")
        raise DatabaseUnavailable(f"cannot connect to the database at {where}: {reason}") from None


class Outage:
    """The state of one retrying loop (``what``): :meth:`failed` logs the first error of an
    outage with its cause (as ``action``) and returns the delay before the next attempt
    (doubling from ``first`` to ``most``); later errors of the same outage go to the debug log
    only; :meth:`recovered` logs once that it is back. Any exception counts, not only a lost
    connection: a loop never crashes on one, and never spins on it either."""

    def __init__(
        self,
        what: str,
        logger: logging.Logger,
        action: str,
        *,
        first: float = 0.2,
        most: float = 5.0,
    ) -> None:
        self.what = what
        self.log = logger
        self.action = action
        self.first = first
        self.most = most
        self.attempts = 0
        self._since = 0.0

    def failed(self, exc: BaseException, **extra: object) -> float:
        """Log (the first time) and return how long to wait before the next attempt."""
        self.attempts += 1
        if self.attempts == 1:
            self._since = time.monotonic()
            self.log.warning(
                "%s failed, retrying with backoff: %s: %s",
                self.what,
                type(exc).__name__,
                str(exc).strip() or "?",
                exc_info=None if isinstance(exc, ConnectionLost) else exc,
                extra=fields(action=self.action, **extra),
            )
        else:
            self.log.debug("%s failed again (attempt %d): %s", self.what, self.attempts, exc)
        return float(min(self.first * 2 ** (self.attempts - 1), self.most))

    @property
    def seconds(self) -> float:
        """How long this outage has lasted (0 when there is none)."""
        return time.monotonic() - self._since if self.attempts else 0.0

    def recovered(self) -> None:
        if self.attempts:
            self.log.info(
                "%s works again after %d failed attempts (%.1fs)",
                self.what,
                self.attempts,
                self.seconds,
                extra=fields(action="database_recovered"),
            )
        self.attempts = 0
