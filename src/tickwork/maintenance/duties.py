"""The fleet's shared duties, in the order a worker's maintenance loop runs them, configured
from the worker's settings. A new duty is a new module shaped like :mod:`.service`, added
here."""

from __future__ import annotations

from tickwork import metrics
from tickwork.maintenance import claim_floors, deadlines, gauges, leases, retention, workers
from tickwork.maintenance.service import Service
from tickwork.settings import WorkerSettings


def fleet_duties(settings: WorkerSettings, meters: metrics.JobMeters) -> list[Service]:
    every = settings.maintenance_seconds
    return [
        leases.LeaseRecovery(leases.LeaseRecoveryConfig(interval=every), meters),
        retention.Retention(
            retention.RetentionConfig(
                interval=every,
                age_seconds=settings.retention_seconds,
                stats_age_seconds=settings.stats_retention_seconds,
                batch=settings.retention_batch,
            )
        ),
        workers.WorkerExpiry(
            workers.WorkerExpiryConfig(interval=every, ttl_seconds=settings.worker_ttl_seconds)
        ),
        claim_floors.ClaimFloors(claim_floors.ClaimFloorsConfig(interval=every)),
        deadlines.DeadlineCheck(deadlines.DeadlineCheckConfig(interval=every)),
        gauges.GaugeSampling(
            gauges.GaugeSamplingConfig(
                interval=settings.gauges_seconds,
                ttl_seconds=settings.worker_ttl_seconds,
                # the duty comes round no more often than the maintenance loop
                fresh_seconds=gauges.FRESH_INTERVALS * max(settings.gauges_seconds, every),
            )
        ),
    ]
