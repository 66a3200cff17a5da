"""Lease recovery: running jobs whose worker stopped heartbeating go back to available (the
attempt counts) or, on their last attempt, become dead with the task's on_dead hook."""

from __future__ import annotations

import logging
from datetime import datetime

from tickwork import metrics
from tickwork.db import connections, store
from tickwork.logs import fields
from tickwork.tasks import Registry
from tickwork.worker import deaths

log = logging.getLogger(__name__)

NAME = "recover_leases"
BATCH = 1000


async def run_once(
    conn: connections.AsyncConnection,
    registry: Registry,
    now: datetime | None,
    meters: metrics.JobMeters | None = None,
) -> int:
    """Recover one batch of expired leases; returns how many jobs were recovered. Each counts
    in ``tickwork_lease_recoveries_total``; one that died counts as a ``dead`` outcome too."""
    meters = meters or metrics.JobMeters()
    async with conn.transaction():
        recovered = await store.arun(conn, store.recover_expired_leases(BATCH, now))
    for job in recovered:
        meters(job.queue, job.kind).recovered.inc()
        log.warning(
            "lease expired, job made available again",
            extra=fields(
                action="lease_recovered",
                job_id=job.id,
                kind=job.kind,
                queue=job.queue,
                worker=job.picked_by,
            ),
        )
    async with conn.transaction():
        exhausted = await store.arun(conn, store.lock_expired_exhausted(registry.kinds, BATCH, now))
        for dying in exhausted:
            error = (
                f"lease expired on the last attempt: worker {dying.picked_by} stopped heartbeating"
            )
            if await deaths.mark_dead(conn, dying, registry.get(dying.kind), error, now):
                meter = meters(dying.queue, dying.kind)
                meter.recovered.inc()
                meter.dead.inc()
    return len(recovered) + len(exhausted)
