"""Lease recovery: running jobs whose worker stopped heartbeating are recovered whatever their
kind, so that no job stays running without a live lease and no concurrency key stays held.
Each becomes available again (the attempt counts), dead on its last attempt (its on_dead hook
left pending for a worker that registers the kind:
:class:`tickwork.worker.deaths.PendingHooks`), or cancelled when it had been asked to stop."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from tickwork import metrics
from tickwork.db import connections, store
from tickwork.db import jobs as jobs_db
from tickwork.logs import fields
from tickwork.maintenance.service import positive
from tickwork.model import JobStatus

log = logging.getLogger(__name__)


_BECAME = {
    JobStatus.AVAILABLE: "lease expired, job made available again",
    JobStatus.DEAD: "lease expired on the last attempt, job is dead (on_dead pending)",
    JobStatus.CANCELLED: "lease expired on a job asked to stop, job is cancelled",
}


@dataclass(frozen=True)
class LeaseRecoveryConfig:
    interval: float = 5.0
    """Seconds between two passes somewhere in the fleet."""
    batch: int = 1000
    """Most jobs recovered by one pass."""

    def __post_init__(self) -> None:
        positive(self, "interval", "batch")


class LeaseRecovery:
    name = "recover_leases"
    shared = True

    def __init__(
        self,
        config: LeaseRecoveryConfig = LeaseRecoveryConfig(),
        meters: metrics.JobMeters | None = None,
    ) -> None:
        self.config = config
        self.meters = meters or metrics.JobMeters()

    @property
    def interval(self) -> float:
        return self.config.interval

    async def run_once(self, conn: connections.AsyncConnection, now: datetime | None) -> int:
        """Recover one batch of expired leases; returns how many jobs were recovered. Each
        counts in ``tickwork_lease_recoveries_total``; one that died or was cancelled counts
        as that outcome too."""
        async with conn.transaction():
            recovered = await store.arun(
                conn, jobs_db.recover_expired_leases(self.config.batch, now)
            )
        for job in recovered:
            meter = self.meters(job.schedule_namespace, job.queue, job.kind)
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
