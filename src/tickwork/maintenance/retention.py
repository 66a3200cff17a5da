"""Retention: finished jobs older than the retention age are deleted in batches."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from tickwork.db import connections, store
from tickwork.db import jobs as jobs_db
from tickwork.maintenance.service import positive


@dataclass(frozen=True)
class RetentionConfig:
    interval: float = 5.0
    """Seconds between two passes somewhere in the fleet."""
    age_seconds: float = 7 * 86400.0
    """Finished jobs older than this are deleted (7 days)."""
    batch: int = 1000
    """Jobs deleted per statement (one transaction each)."""

    def __post_init__(self) -> None:
        positive(self, "interval", "age_seconds", "batch")


class Retention:
    name = "retention"
    shared = True

    def __init__(self, config: RetentionConfig = RetentionConfig()) -> None:
        self.config = config

    @property
    def interval(self) -> float:
        return self.config.interval

    async def run_once(self, conn: connections.AsyncConnection, now: datetime | None) -> int:
        """Delete batch after batch until none is left; returns the count."""
        age, batch = self.config.age_seconds, self.config.batch
        total = 0
        while True:
            async with conn.transaction():
                deleted = await store.arun(conn, jobs_db.delete_finished_jobs(age, batch, now))
            total += deleted
            if deleted < batch:
                return total
