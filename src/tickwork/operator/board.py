"""The rows read back from PostgreSQL for the objects' status, refreshed every
``interval`` seconds and right after each sync round: five queries, whatever the number of
objects (the schedules, their open jobs, their last jobs, the live workers, the pauses)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection

from tickwork import metrics
from tickwork.clock import sleep
from tickwork.db.jobs import LastJob, OpenJob
from tickwork.db.schedules import ScheduleRow
from tickwork.logs import fields
from tickwork.operator.database import Database, DatabaseError
from tickwork.operator.served import Fleet

ACTIVE_SHOWN = 10
"""At most this many open jobs per schedule are read (and listed in ``status.active``)."""

log = logging.getLogger(__name__)

Key = tuple[str, str]
"""(schedule namespace, name)."""


class Board:
    def __init__(
        self,
        database: Database,
        namespaces: Callable[[], Collection[str]],
        live_worker_seconds: float,
    ) -> None:
        self.database = database
        self.namespaces = namespaces
        self.live_worker_seconds = live_worker_seconds
        self.rows: dict[Key, ScheduleRow] = {}
        self.active: dict[Key, list[OpenJob]] = {}
        self.last_jobs: dict[Key, LastJob] = {}
        self.fleet: Fleet | None = None
        """The live workers (None: not read yet)."""
        self.error: str | None = None
        """Why the last refresh failed (the database is unavailable), else None."""
        self._wake = asyncio.Event()

    def wake(self) -> None:
        self._wake.set()

    async def run(self, interval: float, on_refresh: Callable[[], None]) -> None:
        while True:
            self._wake.clear()
            await self.refresh()
            on_refresh()
            await sleep(interval, self._wake)

    async def refresh(self) -> None:
        namespaces = set(self.namespaces())
        try:
            rows = await self.database.schedules()
            jobs = await self.database.open_jobs(sorted(namespaces), ACTIVE_SHOWN)
            last_jobs = await self.database.last_jobs(sorted(namespaces))
            workers = await self.database.live_workers(self.live_worker_seconds)
            pauses = await self.database.pauses()
        except DatabaseError as error:
            metrics.OPERATOR_ERRORS.labels("database").inc()
            reason = " ".join(str(error).split()) or type(error).__name__
            if self.error is None:
                log.warning("status refresh failed: %s", reason, extra=fields(action="status"))
            self.error = f"database unavailable: {reason}"
        else:
            self.rows = {(r.namespace, r.name): r for r in rows if r.namespace in namespaces}
            active: dict[Key, list[OpenJob]] = {}
            for job in jobs:
                active.setdefault((job.namespace, job.name), []).append(job)
            self.active = active
            self.last_jobs = {(job.namespace, job.name): job for job in last_jobs}
            self.fleet = Fleet.of(workers, pauses)
            self.error = None
