"""Measuring helpers the benchmarks share: the claim statement timed, and percentiles.

A claim is timed around one statement in its own transaction, from the client (so a round trip
is included, as a worker sees it). ``keep=False`` rolls it back: the jobs stay available, so a
probe can time the claim beside running workers, or repeat it on the same backlog, without
taking their jobs.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import psycopg

from tickwork.db import jobs as jobs_db
from tickwork.db import queries, store
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


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0 to 1) of ``values`` by rank: the value below which a fraction
    ``q`` of them lie."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]
