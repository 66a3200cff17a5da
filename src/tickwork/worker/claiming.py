"""Claiming: how a worker takes jobs. :meth:`Claimer.run_once` is one claim statement (after
the flow rules' locks when some apply, :mod:`tickwork.flow.look`); :meth:`Claimer.run` is the
loop that claims whenever there is room (the worker's slots plus the jobs it holds ahead,
:mod:`.prefetch`), sleeps until a job's task returns, a notification or the poll, and after a
failed claim first adopts what that claim may have taken under this process's incarnation.
The jobs claimed go to :class:`~tickwork.worker.held.HeldJobs`, where the slots take them."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable

from tickwork import metrics
from tickwork.clock import Clock, sleep
from tickwork.db import connections, store
from tickwork.db import jobs as jobs_db
from tickwork.flow.look import RuleLook
from tickwork.logs import fields
from tickwork.model import Job
from tickwork.settings import WorkerSettings
from tickwork.worker import prefetch
from tickwork.worker.held import HeldJobs
from tickwork.worker.outcomes import after_error

log = logging.getLogger(__name__)

Pool = connections.AsyncPool


class Claimer:
    def __init__(
        self,
        *,
        name: str,
        incarnation: uuid.UUID,
        queues: list[str],
        kinds: list[str],
        max_attempts: dict[str, int],
        settings: WorkerSettings,
        clock: Clock,
        held: HeldJobs,
        meters: metrics.JobMeters,
        pool: Callable[[], Pool],
    ) -> None:
        self.name = name
        """The worker's name as registered (the jobs' ``worker`` column)."""
        self._incarnation = incarnation
        self._queues = queues
        self._kinds = kinds
        self._max_attempts = max_attempts
        self._settings = settings
        self._clock = clock
        self._held = held
        self._meters = meters
        self._pool = pool
        self.wake = asyncio.Event()
        """Set when a job may have become available (a notification): claim now."""
        self._rules = RuleLook()
        """Whether the next claim locks the flow rules first (job_claim_rules)."""
        self.estimates = prefetch.Estimates()
        """Claim round trip and time per job, measured: how many jobs to hold ahead."""

    def jobs_ahead(self) -> int:
        """Jobs to hold beyond the free slots now: ``--prefetch`` when given, otherwise
        adapted to the measured claim round trip and time per job (:mod:`.prefetch`)."""
        if self._settings.prefetch is not None:
            return self._settings.prefetch
        return self.estimates.ahead(self._settings.concurrency, 2 * self._settings.claim_batch)

    async def run_once(self, limit: int) -> list[Job]:
        """One claim statement; the jobs go to the held jobs, lined up for the slots."""
        try:
            now = self._clock.now()
            claim = jobs_db.claim_jobs(
                self.name,
                self._queues,
                self._max_attempts,
                limit,
                self._settings.lease_seconds,
                now,
                incarnation=self._incarnation,
            )
            async with self._pool().connection() as conn:
                if self._rules.due():
                    async with conn.transaction():
                        rules = jobs_db.lock_claim_rules(self._queues, self._kinds, now)
                        looked = await store.arun(conn, rules)
                        self._rules.looked(
                            looked.applying, looked.room_in_seconds, looked.contended
                        )
                        jobs = await store.arun(conn, claim)
                else:
                    jobs = await store.arun(conn, claim)
        except connections.UniqueViolation:
            # Two workers raced for the same concurrency key; the index refused the second.
            log.debug(
                "concurrency key race lost; claiming again",
                extra=fields(action="claim_race", worker=self.name),
            )
            return []
        for job in jobs:
            self._held.claimed(job)
        if self._meters.enabled:
            self._count(jobs)
        return jobs

    def _count(self, jobs: list[Job]) -> None:
        """Claims, and queue latency: run_at to the claim (both on the database's clock)."""
        latencies: dict[metrics.JobMeter, list[float]] = {}
        for job in jobs:
            if job.started_at is not None:
                latency = (job.started_at - job.run_at).total_seconds()
                latencies.setdefault(self._meters.of(job), []).append(latency)
        for meter, values in latencies.items():
            meter.claimed.inc(len(values))
            meter.latency.observe_many(values)

    async def run(self) -> None:
        if not self._kinds:
            return  # a worker that only fires schedules claims nothing
        outage = connections.Outage("claiming jobs", log, "claim_failed")
        settings, held = self._settings, self._held
        while True:
            capacity = settings.concurrency + self.jobs_ahead()
            low_water = max(1, min(settings.claim_batch, capacity // 2))
            # Successes waiting for their batched write take no room (the claim overlaps the
            # write), up to as many again as the capacity: a stalled write stops the claims.
            room = min(capacity - held.unfinished, 2 * capacity - len(held))
            if room < low_water and not (room > 0 and held.none_waiting):
                held.room.clear()
                await held.room.wait()
                continue
            self.wake.clear()
            asked = min(room, settings.claim_batch)
            try:
                if outage.attempts:  # the failed claim may have committed: adopt what it took
                    await self.adopt()
                began = time.perf_counter()
                got = await self.run_once(asked)
                self.estimates.claimed(time.perf_counter() - began)
            except Exception as exc:
                await after_error(self._pool(), exc, outage)
                continue
            outage.recovered()
            if not got:  # a short batch may have left a job behind a key it took: claim again
                await sleep(self._rules.idle_seconds(settings.poll_seconds), self.wake)
                if not held.unfinished:  # ran dry: the next jobs may be slow ones
                    self.estimates.idle()

    async def adopt(self) -> None:
        """Hold the jobs claimed under this process's incarnation that it does not hold: what a
        claim whose answer was lost took."""
        async with self._pool().connection() as conn:
            jobs = await store.arun(conn, jobs_db.adopt_jobs(self._incarnation, self._held.ids()))
        for job in jobs:
            self._held.claimed(job)
        if jobs:
            log.info(
                "adopted jobs a lost claim answer left running under this process",
                extra=fields(action="jobs_adopted", count=len(jobs), worker=self.name),
            )
