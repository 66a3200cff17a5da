"""The one place that runs SQL: operations as data, executed on a sync or async connection.

Each table has its module (``jobs``, ``schedules``, ``namespaces``, ``workers``, ``duties``,
``audit``, ``operators``) whose functions build an :class:`Op` — a named query of that
table's ``sql/<table>.sql``, its parameters and how to turn the rows into typed objects.
:func:`run` and :func:`arun` execute an op on a caller's connection inside the caller's
transaction, so the same operation serves the sync API, the async worker and transactional
enqueue. Rows come as dicts keyed by column name (every result column of a query is named),
so an op maps columns by name, never by position; a :class:`TableOp` (the jobs a worker
claims, hundreds at a time) gets them as tuples with the result's column names, and checks
those names once per result instead of building a dict per row. Times are passed as ``now``
(``None``: the database clock).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import psycopg
from psycopg.rows import dict_row, tuple_row
from psycopg.types.json import Jsonb

from tickwork.db.queries import QUERIES
from tickwork.errors import InvalidInput

T = TypeVar("T")
Row = dict[str, Any]
"""One result row: column name to value."""
Values = tuple[Any, ...]
"""One result row of a :class:`TableOp`: its values in the result's column order."""


@dataclass(frozen=True)
class Op(Generic[T]):
    """A named query, its parameters, and the reduction of its rows to a result."""

    query: str
    params: Mapping[str, Any]
    result: Callable[[list[Row]], T]
    binary: bool = False
    """Fetch results in binary format (cheaper to decode; used on the hot path)."""


@dataclass(frozen=True)
class TableOp(Generic[T]):
    """An :class:`Op` whose rows come as tuples, reduced together with the result's column
    names: a dict per row cost 1.7 µs of a claimed job's decoding (bench/peers.py)."""

    query: str
    params: Mapping[str, Any]
    result: Callable[[list[str], list[Values]], T]
    """The column names (checked by the reduction, once) and the rows."""
    binary: bool = False


def run(conn: psycopg.Connection[Any], op: Op[T] | TableOp[T]) -> T:
    cur = conn.execute(QUERIES[op.query], op.params, binary=op.binary)
    if isinstance(op, TableOp):
        names = [column.name for column in cur.description or ()]
        cur.row_factory = tuple_row
        return op.result(names, cur.fetchall() if names else [])
    if not cur.description:
        return op.result([])
    cur.row_factory = dict_row
    return op.result(cur.fetchall())


async def arun(conn: psycopg.AsyncConnection[Any], op: Op[T] | TableOp[T]) -> T:
    cur = await conn.execute(QUERIES[op.query], op.params, binary=op.binary)
    if isinstance(op, TableOp):
        names = [column.name for column in cur.description or ()]
        cur.row_factory = tuple_row
        return op.result(names, await cur.fetchall() if names else [])
    if not cur.description:
        return op.result([])
    cur.row_factory = dict_row
    return op.result(await cur.fetchall())


def nothing(rows: list[Row]) -> None:
    return None


def column(name: str) -> Callable[[list[Row]], list[Any]]:
    """The values of one column, in row order."""
    return lambda rows: [row[name] for row in rows]


def to_json(field: str, value: Any) -> Jsonb:
    """Wrap a payload for a jsonb column, refusing what JSON cannot carry."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(field, f"not JSON-serialisable: {exc}") from None
    return Jsonb(value)


def optional_json(field: str, value: Any) -> Jsonb | None:
    return None if value is None else to_json(field, value)
