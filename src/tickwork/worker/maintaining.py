"""The worker's maintenance loop: every ``--maintenance-seconds`` it runs each service of
:func:`tickwork.maintenance.duties.fleet_duties` (and the pending on_dead hooks of the kinds it
registers): a shared duty only when this worker claims its row for the interval (one worker of
the fleet does it), the others every time. A failed round is logged once and retried sooner."""

from __future__ import annotations

import logging
from collections.abc import Callable

from tickwork.clock import Clock, sleep
from tickwork.db import connections, store
from tickwork.db import duties as duties_db
from tickwork.maintenance.service import Service
from tickwork.worker.liveness import Liveness
from tickwork.worker.outcomes import after_error

log = logging.getLogger(__name__)

Pool = connections.AsyncPool


class MaintenanceLoop:
    def __init__(
        self,
        *,
        name: str,
        services: list[Service],
        interval: float,
        clock: Clock,
        liveness: Liveness,
        pool: Callable[[], Pool],
    ) -> None:
        self.name = name
        """The worker's name as registered (the holder of the duties it claims)."""
        self.services = services
        """What it runs, in order."""
        self._interval = interval
        self._clock = clock
        self._liveness = liveness
        self._pool = pool

    async def run_once(self) -> None:
        """Run each service: a shared one when this worker manages to claim its duty row for
        the interval, the others every time."""
        async with self._pool().connection() as conn:
            for service in self.services:
                if service.shared:
                    async with conn.transaction():
                        claim = duties_db.claim_duty(
                            service.name, self.name, service.interval, self._clock.now()
                        )
                        mine = await store.arun(conn, claim)
                    if not mine:
                        continue
                await service.run_once(conn, self._clock.now())

    async def run(self) -> None:
        outage = connections.Outage("maintenance", log, "maintenance_failed")
        while True:
            self._liveness.beat("maintenance", self._interval)
            delay = self._interval
            try:
                await self.run_once()
            except Exception as exc:
                delay = min(outage.failed(exc), delay)
                await after_error(self._pool(), exc)
            else:
                outage.recovered()
            await sleep(delay)
