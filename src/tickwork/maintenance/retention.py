"""Retention: finished jobs older than the retention age are deleted in batches."""

from __future__ import annotations

from datetime import datetime

from tickwork.db import connections, store
from tickwork.db import jobs as jobs_db

NAME = "retention"


async def run_once(
    conn: connections.AsyncConnection, age_seconds: float, batch: int, now: datetime | None
) -> int:
    """Delete batch after batch (one transaction each) until none is left; returns the count."""
    total = 0
    while True:
        async with conn.transaction():
            deleted = await store.arun(conn, jobs_db.delete_finished_jobs(age_seconds, batch, now))
        total += deleted
        if deleted < batch:
            return total
