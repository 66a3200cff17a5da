"""Retention: finished jobs older than the retention age are deleted in batches, and each
schedule keeps only its newest finished jobs: ``successfulJobsHistoryLimit`` succeeded ones and
``failedJobsHistoryLimit`` that did not succeed (dead or cancelled), as batch/v1 CronJob. The
counts of how jobs ended (``tickwork.job_counts``), which outlive both, are merged as they age
(per minute for the charts' hours, then per hour, then per day, one row per group: a
schedule's totals read a few hundred rows per outcome, however often it runs) and deleted
after the stats retention age.

The age rule applies to every finished job first. The history limits then apply to the
schedules queued since the last pass (a job of theirs ended, or a sync changed their limits:
``tickwork.schedule_history_pending``, filled by triggers), so a pass reads the histories of
the schedules that changed, never every schedule's. Several passes may run at once: each takes
its schedules with SKIP LOCKED, and ranks on one snapshot, so none deletes a job that has fewer
than its limit of newer jobs of its outcome.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from tickwork.db import connections, store
from tickwork.db import job_counts as job_counts_db
from tickwork.db import jobs as jobs_db
from tickwork.maintenance.service import positive
from tickwork.schedules.limits import MAX_HISTORY_LIMIT
from tickwork.schedules.options import (
    DEFAULT_FAILED_JOBS_HISTORY_LIMIT,
    DEFAULT_SUCCESSFUL_JOBS_HISTORY_LIMIT,
)


@dataclass(frozen=True)
class RetentionConfig:
    interval: float = 5.0
    """Seconds between two passes somewhere in the fleet."""
    age_seconds: float = 7 * 86400.0
    """Finished jobs older than this are deleted (7 days)."""
    stats_age_seconds: float = 90 * 86400.0
    """Counts of minutes older than this are deleted (90 days)."""
    per_minute_seconds: float = 6 * 3600.0
    """Counts older than this (6 hours: twice the console's charts) are merged per hour."""
    per_hour_seconds: float = 7 * 86400.0
    """Counts older than this (7 days) are merged per day."""
    batch: int = 1000
    """Jobs deleted per statement (one transaction each); also the most jobs of one outcome
    one statement deletes from one schedule's history."""
    history_batch: int = 100
    """Schedules whose history one statement trims."""

    def __post_init__(self) -> None:
        positive(
            self,
            "interval",
            "age_seconds",
            "stats_age_seconds",
            "per_minute_seconds",
            "per_hour_seconds",
            "batch",
            "history_batch",
        )


class Retention:
    name = "retention"
    shared = True

    def __init__(self, config: RetentionConfig = RetentionConfig()) -> None:
        self.config = config

    @property
    def interval(self) -> float:
        return self.config.interval

    async def run_once(self, conn: connections.AsyncConnection, now: datetime | None) -> int:
        """Delete jobs by age, then trim the queued schedules' histories, then merge and
        delete old counts; returns how many jobs and counts were deleted or merged away."""
        config = self.config
        age, batch = config.age_seconds, config.batch
        done = await self._batches(conn, jobs_db.delete_finished_jobs(age, batch, now))
        done += await self._by_history(conn)
        for op in (
            job_counts_db.compact("hour", config.per_minute_seconds, batch, now),
            job_counts_db.compact("day", config.per_hour_seconds, batch, now),
            job_counts_db.delete_old(config.stats_age_seconds, batch, now),
        ):
            done += await self._batches(conn, op)
        return done

    async def _batches(self, conn: connections.AsyncConnection, op: store.Op[int]) -> int:
        """Run a deleting ``op`` (one transaction each) until it deletes less than a batch."""
        total = 0
        while True:
            async with conn.transaction():
                deleted = await store.arun(conn, op)
            total += deleted
            if deleted < self.config.batch:
                return total

    async def _by_history(self, conn: connections.AsyncConnection) -> int:
        op = jobs_db.trim_histories(
            self.config.history_batch,
            self.config.batch,
            DEFAULT_SUCCESSFUL_JOBS_HISTORY_LIMIT,
            DEFAULT_FAILED_JOBS_HISTORY_LIMIT,
            MAX_HISTORY_LIMIT,
        )
        total = 0
        while True:
            async with conn.transaction():
                trim = await store.arun(conn, op)
            total += trim.deleted
            # Done when the queue is empty, or another pass holds what is left.
            if trim.picked == 0 or (trim.seen < self.config.history_batch and not trim.capped):
                return total
