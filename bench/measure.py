"""Measuring helpers the benchmarks share: the claim statement timed, percentiles, where
the database's time goes by statement (pg_stat_statements), and the CPU time of a process and
of the PostgreSQL server (from /proc).

A claim is timed around one statement in its own transaction, from the client (so a round trip
is included, as a worker sees it). ``keep=False`` rolls it back: the jobs stay available, so a
probe can time the claim beside running workers, or repeat it on the same backlog, without
taking their jobs.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from tickwork.db import connections, queries, store
from tickwork.db import jobs as jobs_db
from tickwork.model import Job


def claim_op(worker: str, kind: str, batch: int) -> store.Op[list[Job]]:
    """The claim statement a worker running ``kind`` from the default queue sends (the
    database's clock, a 30 s lease)."""
    return jobs_db.claim_jobs(worker, ["default"], {kind: 5}, batch, 30.0, None)


def timed_claim(
    conn: psycopg.Connection[Any], op: store.Op[list[Job]], *, keep: bool
) -> tuple[float, list[Job]]:
    """Seconds the claim took (committed with ``keep``, rolled back otherwise), and its jobs."""
    started = time.perf_counter()
    with conn.transaction(force_rollback=not keep):
        got = store.run(conn, op)
    return time.perf_counter() - started, got


def explain_claim(conn: psycopg.Connection[Any], op: store.Op[list[Job]]) -> str:
    """``EXPLAIN (ANALYZE, BUFFERS)`` of the claim, rolled back."""
    with conn.transaction(force_rollback=True):
        rows = conn.execute(
            "EXPLAIN (ANALYZE, BUFFERS) " + queries.QUERIES[op.query], op.params
        ).fetchall()
    return "\n".join(str(row[0]) for row in rows)


def worker_connection(url: str, *, prepare: bool = True) -> psycopg.Connection[Any]:
    """An autocommit connection with a worker's options: prepared statements, as a worker's
    on a direct connection are (``prepare=False``: as behind a transaction-mode pooler, each
    statement planned for its own parameters)."""
    return connections.connect(url, autocommit=True, prepare=prepare)


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0 to 1) of ``values`` by rank: the value below which a fraction
    ``q`` of them lie."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# --- where the database's time goes (pg_stat_statements) ----------------------------------

_STATEMENTS = """
SELECT s.queryid, s.query, s.calls, s.total_exec_time, s.shared_blks_hit + s.shared_blks_read
FROM pg_stat_statements s
WHERE s.dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
"""
_COMMENT = re.compile(r"--[^\n]*")
_PARAMETER = re.compile(r"%\(\w+\)[sb]|\$\d+|'[^']*'|\b\d+(\.\d+)?\b")
_SPACE = re.compile(r"\s+")


def _shape(text: str) -> str:
    """A statement's text without comments, parameters, constants or layout: how a named
    query and pg_stat_statements' normalized text (constants made parameters) are matched."""
    text = _PARAMETER.sub("?", _COMMENT.sub(" ", text))
    return _SPACE.sub(" ", text).strip().rstrip(";")


_NAMES = {_shape(body): name for name, body in queries.QUERIES.items()}


@dataclass(frozen=True)
class Statement:
    name: str
    """The named query (db/sql/*.sql), or the statement's first words."""
    calls: int
    ms: float
    """Total execution time."""
    buffers: int
    """Shared buffers hit or read."""


Statements = dict[int, Statement]


def preload(statements: bool) -> dict[str, str]:
    """The private server's settings for a benchmark's ``--statements``: pg_stat_statements
    preloaded (nothing without it)."""
    return {"shared_preload_libraries": "pg_stat_statements"} if statements else {}


def statements_enable(conn: psycopg.Connection[Any]) -> bool:
    """Make pg_stat_statements readable in this database; False where the server does not
    preload it."""
    preloaded = conn.execute("SHOW shared_preload_libraries").fetchone()
    if preloaded is None or "pg_stat_statements" not in str(preloaded[0]):
        return False
    conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    return True


def statements(conn: psycopg.Connection[Any]) -> Statements:
    """The cumulative figures of every statement run in this database so far."""
    found: Statements = {}
    for queryid, text, calls, ms, buffers in conn.execute(_STATEMENTS):
        shape = _shape(text)
        name = _NAMES.get(shape) or shape[:60]
        found[queryid] = Statement(name, calls, ms, buffers)
    return found


def print_statements(spent: list[Statement], seconds: float) -> None:
    """A table of ``spent`` (from :func:`statements_between`) over ``seconds``: database time
    and calls per second, time and buffers per call."""
    print("   ms/s      calls/s   ms/call  buffers/call  statement")
    for s in spent:
        calls = max(s.calls, 1)
        print(
            f"  {s.ms / seconds:6.1f}  {s.calls / seconds:10.1f}  {s.ms / calls:8.2f}  "
            f"{s.buffers / calls:12.0f}  {s.name}"
        )


def statements_between(before: Statements, after: Statements, top: int) -> list[Statement]:
    """The ``top`` statements by execution time between two readings."""
    spent = []
    for queryid, now in after.items():
        was = before.get(queryid, Statement(now.name, 0, 0.0, 0))
        spent.append(
            Statement(now.name, now.calls - was.calls, now.ms - was.ms, now.buffers - was.buffers)
        )
    return sorted(spent, key=lambda s: s.ms, reverse=True)[:top]


def process_cpu(pid: int) -> float:
    """CPU seconds process ``pid`` has used (user and system)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def server_cpu(url: str) -> float | None:
    """CPU seconds the PostgreSQL server has used so far (its postmaster, the children it
    reaped and the live ones), when it runs on this host; None otherwise."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT current_setting('data_directory')").fetchone()
    pid_file = Path(str(row[0] if row else "")) / "postmaster.pid"
    try:
        postmaster = int(pid_file.read_text().split()[0])
        stats = [Path(f"/proc/{postmaster}/stat").read_text()]
        children = Path(f"/proc/{postmaster}/task/{postmaster}/children").read_text().split()
    except (OSError, ValueError):
        return None
    for child in children:
        with contextlib.suppress(OSError):
            stats.append(Path(f"/proc/{child}/stat").read_text())
    ticks = 0
    for i, stat in enumerate(stats):  # as process_cpu does
        fields = stat.rsplit(")", 1)[1].split()
        ticks += int(fields[11]) + int(fields[12])  # utime, stime
        if i == 0:
            ticks += int(fields[13]) + int(fields[14])  # cutime, cstime: children reaped
    return ticks / os.sysconf("SC_CLK_TCK")
