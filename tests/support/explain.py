"""Buffers a statement reads, from its EXPLAIN (ANALYZE, BUFFERS) in a transaction rolled back:
how the plan tests measure a plan's work (a count of pages, steady where times are not)."""

from __future__ import annotations

import re
from typing import Any

import psycopg
from psycopg import sql

from tickwork.db import queries, store


def buffers(conn: psycopg.Connection[Any], explain: sql.Composable | str, params: Any) -> int:
    """The buffers the whole statement read (hit or not), rolled back."""
    with conn.transaction(force_rollback=True):
        rows = conn.execute(explain, params).fetchall()
    top = next(str(row[0]) for row in rows if "Buffers:" in str(row[0]))
    return sum(int(n) for n in re.findall(r"(?:hit|read)=(\d+)", top))


def op_buffers(conn: psycopg.Connection[Any], op: store.Op[Any]) -> int:
    """The buffers ``op``'s statement read, with its parameters, rolled back."""
    return buffers(conn, "EXPLAIN (ANALYZE, BUFFERS) " + queries.QUERIES[op.query], op.params)
