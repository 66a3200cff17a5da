"""Lease recovery: running jobs whose worker stopped heartbeating are recovered whatever their
kind, so that no job stays running without a live lease and no concurrency key stays held.
Each becomes available again (the attempt counts), dead on its last attempt (its on_dead hook
left pending for a worker that registers the kind:
:func:`tickwork.worker.deaths.run_pending_hooks`), or cancelled when it had been asked to stop."""

from __future__ import annotations

import logging
from datetime import datetime

from tickwork import metrics
from tickwork.db import connections, store
from tickwork.db import jobs as jobs_db
from tickwork.logs import fields
from tickwork.model import JobStatus

log = logging.getLogger(__name__)

NAME = "recover_leases"
BATCH = 1000

_BECAME = {
    JobStatus.AVAILABLE: "lease expired, job made available again",
    JobStatus.DEAD: "lease expired on the last attempt, job is dead (on_dead pending)",
    JobStatus.CANCELLED: "lease expired on a job asked to stop, job is cancelled",
}


async def run_once(
    conn: connections.AsyncConnection,
    now: datetime | None,
    meters: metrics.JobMeters | None = None,
) -> int:
    """Recover one batch of expired leases; returns how many jobs were recovered. Each counts
    in ``tickwork_lease_recoveries_total``; one that died or was cancelled counts as that
    outcome too."""
    meters = meters or metrics.JobMeters()
    async with conn.transaction():
        recovered = await store.arun(conn, jobs_db.recover_expired_leases(BATCH, now))
    for job in recovered:
        meter = meters(job.schedule_namespace, job.queue, job.kind)
        meter.recovered.inc()
        if job.status is JobStatus.DEAD:
            meter.dead.inc()
        elif job.status is JobStatus.CANCELLED:
            meter.cancelled.inc()
        log.warning(
            _BECAME[job.status],
            extra=fields(
                action="lease_recovered",
                job_id=job.id,
                kind=job.kind,
                queue=job.queue,
                worker=job.picked_by,
            ),
        )
    return len(recovered)
