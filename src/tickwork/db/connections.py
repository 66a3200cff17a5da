"""Connections, pools, notifications and database errors, as the rest of tickwork sees
them: only the database layer imports psycopg."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Sequence
from typing import Any, TypeAlias

import psycopg
import psycopg.errors
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from tickwork.errors import ConfigurationError, DatabaseUnavailable

Connection: TypeAlias = psycopg.Connection[Any]
AsyncConnection: TypeAlias = psycopg.AsyncConnection[Any]
Pool: TypeAlias = ConnectionPool[Connection]
AsyncPool: TypeAlias = AsyncConnectionPool[AsyncConnection]

DatabaseError = psycopg.Error
"""Anything the database or the driver refused."""
ConnectionLost = psycopg.OperationalError
"""The database could not be reached, or the connection broke."""
UniqueViolation = psycopg.errors.UniqueViolation
MISSING_SCHEMA = (psycopg.errors.UndefinedTable, psycopg.errors.InvalidSchemaName)
"""Errors meaning the tickwork schema is not there (run the migrations)."""

CONNECT_TIMEOUT_SECONDS = 10

_LIBPQ_PREFIX = re.compile(
    r"^connection (?:failed|is bad): (?:connection to server [^:]*? failed: )?"
)


def pool(url: str, *, max_size: int) -> Pool:
    """A pool for the sync API (opened by the caller); transactions commit on success."""
    return ConnectionPool(url, min_size=1, max_size=max_size, open=False)


def async_pool(url: str, *, min_size: int, max_size: int) -> AsyncPool:
    """A pool for asyncio code (opened by the caller)."""
    return AsyncConnectionPool(url, min_size=min_size, max_size=max_size, open=False)


async def notifications(url: str, channels: Sequence[str]) -> AsyncIterator[tuple[str, str]]:
    """LISTEN on ``channels`` and yield ``(channel, payload)`` as notifications arrive. The
    first item is ``("", "")`` once listening, so the caller can look for what it may have
    missed before. Raises :data:`ConnectionLost` when the connection breaks."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        for channel in channels:
            await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
        yield "", ""
        async for notice in conn.notifies():
            yield notice.channel, notice.payload


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
        psycopg.connect(url, connect_timeout=timeout).close()
    except psycopg.OperationalError as exc:
        where = f"{params.get('host') or 'localhost'}:{params.get('port') or 5432}"
        reason = _LIBPQ_PREFIX.sub("", str(exc).strip().splitlines()[0]) if str(exc) else "?"
        password = str(params.get("password") or "")
        if password:
            reason = reason.replace(password, "***")
        raise DatabaseUnavailable(f"cannot connect to the database at {where}: {reason}") from None
