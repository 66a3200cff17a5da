"""Worker expiry: rows of workers that stopped refreshing themselves are removed."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from tickwork.db import connections, store
from tickwork.db import workers as workers_db
from tickwork.logs import fields
from tickwork.maintenance.service import positive

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WorkerExpiryConfig:
    interval: float = 5.0
    """Seconds between two passes somewhere in the fleet."""
    ttl_seconds: float = 120.0
    """A worker row not refreshed for this long is removed."""

    def __post_init__(self) -> None:
        positive(self, "interval", "ttl_seconds")


class WorkerExpiry:
    name = "expire_workers"
    shared = True

    def __init__(self, config: WorkerExpiryConfig = WorkerExpiryConfig()) -> None:
        self.config = config

    @property
    def interval(self) -> float:
        return self.config.interval

    async def run_once(self, conn: connections.AsyncConnection, now: datetime | None) -> list[str]:
        """Remove the expired rows; returns their workers' names."""
        async with conn.transaction():
            gone = await store.arun(conn, workers_db.expire_workers(self.config.ttl_seconds, now))
        for name in gone:
            log.info(
                "expired a worker that stopped refreshing",
                extra=fields(action="worker_expired", worker=name),
            )
        return gone
