"""Lease recovery: running jobs whose worker stopped heartbeating go back to available (the
attempt counts) or, on their last attempt, become dead with the task's on_dead hook."""

from __future__ import annotations

import logging
from datetime import datetime

from tickwork.db import connections, store
from tickwork.logs import fields
from tickwork.tasks import Registry
from tickwork.worker import deaths

log = logging.getLogger(__name__)

NAME = "recover_leases"
BATCH = 1000


async def run_once(
    conn: connections.AsyncConnection, registry: Registry, now: datetime | None
) -> int:
    """Recover one batch of expired leases; returns how many jobs were recovered."""
    async with conn.transaction():
        rows = await store.arun(conn, store.recover_expired_leases(BATCH, now))
    for job_id, kind, picked_by in rows:
        log.warning(
            "lease expired, job made available again",
            extra=fields(action="lease_recovered", job_id=job_id, kind=kind, worker=picked_by),
        )
    recovered = len(rows)
    async with conn.transaction():
        exhausted = await store.arun(conn, store.lock_expired_exhausted(registry.kinds, BATCH, now))
        for job in exhausted:
            error = (
                f"lease expired on the last attempt: worker {job.picked_by} stopped heartbeating"
            )
            await deaths.mark_dead(conn, job, registry.get(job.kind), error, now)
    return recovered + len(exhausted)
