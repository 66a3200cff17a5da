"""Writing what became of each job a worker ran: successes batched by the completer
(whatever finished while the last write was in flight), failures and cancellations one by
one. Every write is fenced by version and retried on a new connection for as long as the
connection is lost (:meth:`Outcomes.persist`); a version mismatch is logged and counted, and
the job's record is dropped once its outcome is written or given up."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from tickwork import metrics
from tickwork.clock import Clock, sleep
from tickwork.db import connections, store
from tickwork.db import jobs as jobs_db
from tickwork.logs import fields
from tickwork.model import Job, JobId, JobStatus
from tickwork.tasks import Registry
from tickwork.worker import deaths, executor, progress, retry
from tickwork.worker.held import HeldJobs, job_fields

log = logging.getLogger(__name__)

T = TypeVar("T")
Pool = connections.AsyncPool


async def after_error(pool: Pool, exc: Exception, outage: connections.Outage | None = None) -> None:
    """Log through ``outage`` and wait its delay (when given); after a lost connection,
    drop the pool's connections that broke with it."""
    delay = outage.failed(exc) if outage is not None else 0.0
    if isinstance(exc, connections.ConnectionLost):
        try:
            await connections.discard_broken(pool)
        except Exception as check_failed:  # the pool's own trouble: the retry will tell
            log.debug("pool check failed: %s", check_failed)
    await sleep(delay)


class Outcomes:
    def __init__(
        self,
        *,
        name: str,
        registry: Registry,
        clock: Clock,
        meters: metrics.JobMeters,
        held: HeldJobs,
        pool: Callable[[], Pool],
        stopping: asyncio.Event,
        grace_seconds: float,
        max_interruptions: int,
    ) -> None:
        self.name = name
        """The worker's name as registered (in log lines and interruption errors)."""
        self._registry = registry
        self._clock = clock
        self._meters = meters
        self._held = held
        self._pool = pool
        self._stopping = stopping
        """Once set, a write lost for longer than ``grace_seconds`` is given up."""
        self._grace = grace_seconds
        self._max_interruptions = max_interruptions
        self.done: list[Job] = []
        """Succeeded jobs waiting for the completer."""
        self._ready = asyncio.Event()
        self._closing = False

    def succeeded(self, job: Job) -> None:
        self.done.append(job)
        self._ready.set()

    def close(self) -> None:
        """The completer writes what is left and returns."""
        self._closing = True
        self._ready.set()

    async def persist(self, what: str, write: Callable[[], Awaitable[T]]) -> tuple[T, bool]:
        """``write()``'s result, retried on a new connection for as long as the connection is
        lost (every write is fenced by version, so a late one changes nothing); and whether it
        was retried: then a version mismatch may be the first attempt's own commit. Once the
        worker is shutting down, it gives up after the shutdown grace (the lease runs out)."""
        outage = connections.Outage(what, log, "outcome_failed")
        retried = False
        while True:
            try:
                result = await write()
            except connections.ConnectionLost as exc:
                retried = True
                if self._stopping.is_set() and outage.seconds > self._grace:
                    raise
                await after_error(self._pool(), exc, outage)
                continue
            outage.recovered()
            return result, retried

    def _mismatch(self, job: Job, retried: bool, what: str, stage: str) -> None:
        if retried:
            log.info(
                "%s not recorded on a retry: the first try committed, or the job changed elsewhere",
                what,
                extra=job_fields("outcome_unconfirmed", job),
            )
            return
        metrics.VERSION_MISMATCHES.labels(stage).inc()
        log.warning(
            "version mismatch: job changed elsewhere, %s not recorded",
            what,
            extra=job_fields("version_mismatch", job),
        )

    async def cancelled(self, job: Job) -> None:
        async def write() -> bool:
            async with self._pool().connection() as conn:
                return await store.arun(conn, jobs_db.record_cancelled(job, self._clock.now()))

        applied, retried = await self.persist("recording a cancellation", write)
        self._held.forget(job.id)
        if not applied:
            self._mismatch(job, retried, "cancellation", "cancel")
            return
        self._meters.of(job).cancelled.inc()
        log.info(
            "job cancelled",
            extra=job_fields("job_cancelled", job, worker=self.name),
        )

    async def interrupted(self, job: Job) -> None:
        """``job``'s task was interrupted because this worker's shutdown grace ran out: a
        worker shutting down is not the job failing. Handed back at once, its attempt not
        spent (:func:`tickwork.db.jobs.interrupted`: cancelled when it was asked to stop, dead
        once interrupted more than ``max_interruptions`` times)."""

        async def write() -> JobStatus | None:
            async with self._pool().connection() as conn:
                return await store.arun(
                    conn,
                    jobs_db.interrupted(job, self.name, self._max_interruptions, self._clock.now()),
                )

        became, retried = await self.persist("handing back an interrupted job", write)
        self._held.forget(job.id)
        if became is None:
            self._mismatch(job, retried, "interruption", "interrupt")
            return
        meter = self._meters.of(job)
        if became is JobStatus.DEAD:
            meter.dead.inc()
            log.warning(
                "job interrupted by shutdowns more than %d times: dead",
                self._max_interruptions,
                extra=job_fields("job_dead", job, worker=self.name),
            )
            return
        if became is JobStatus.CANCELLED:
            meter.cancelled.inc()
        log.info(
            "job interrupted by the shutdown: handed back, attempt not spent"
            if became is JobStatus.AVAILABLE
            else "job interrupted by the shutdown after it was asked to stop: cancelled",
            extra=job_fields("job_interrupted", job, worker=self.name),
        )

    async def failed(self, job: Job, failure: executor.Failed) -> None:
        task = self._registry.get(job.kind)
        decision = retry.after_failure(job, task)
        now = self._clock.now()
        error = failure.error
        meter = self._meters.of(job)
        if isinstance(decision, retry.GiveUp):

            async def dead() -> bool:
                async with self._pool().connection() as conn:
                    return await deaths.mark_dead(conn, job, task, error, now)

            if (await self.persist("recording a dead job", dead))[0]:
                meter.dead.inc()
            return
        delay = decision.delay_seconds

        async def later() -> JobStatus | None:
            async with self._pool().connection() as conn, conn.transaction():
                return await store.arun(conn, jobs_db.retry_job_later(job, delay, error, now))

        became, retried = await self.persist("recording a failure", later)
        if became is JobStatus.CANCELLED:  # asked to stop meanwhile: not retried
            meter.cancelled.inc()
            log.info(
                "job failed after it was asked to stop; cancelled, not retried",
                extra=job_fields(
                    "job_cancelled",
                    job,
                    worker=self.name,
                    error=executor.summary(error),
                ),
            )
        elif became is JobStatus.AVAILABLE:
            (meter.timed_out if failure.timed_out else meter.retried).inc()
            log.info(
                "job failed; retrying later",
                extra=job_fields(
                    "job_retry",
                    job,
                    worker=self.name,
                    error=executor.summary(error),
                ),
            )
        else:
            self._mismatch(job, retried, "failure", "retry")

    async def completer(self) -> None:
        """Write successes in batches: whatever finished while the last write was in flight."""
        while True:
            await self._ready.wait()
            self._ready.clear()
            batch, self.done = self.done, []
            if batch:
                await self.complete(batch)
            if self._closing and not self.done:
                return

    async def complete(self, jobs: list[Job]) -> None:
        async def write() -> set[JobId]:
            async with self._pool().connection() as conn:
                # Each job's result (a schedule job's is its schedule's carried state: the
                # jobs_ended trigger) and last progress, in the outcome's statement.
                results, errors, reported = {}, {}, []
                for job in jobs:
                    held = self._held.get(job.id)
                    if held is None:
                        continue
                    if held.result is not None:
                        results[job.id] = held.result
                    elif held.result_error is not None:
                        errors[job.id] = held.result_error
                    if held.progress is not None:
                        reported.append(held)
                op = jobs_db.complete_jobs(
                    jobs,
                    self._clock.now(),
                    results,
                    result_errors=errors,
                    progress=progress.pending_json(reported),
                )
                return await store.arun(conn, op)

        try:
            applied, retried = await self.persist("recording successes", write)
        except Exception as exc:
            # Not written (a lost connection is retried until a shutdown's grace is over):
            # the leases run out and the jobs run again.
            log.error(
                "could not record successes: %s",
                exc,
                exc_info=exc,
                extra=fields(action="complete_failed", count=len(jobs)),
            )
        else:
            self._check_applied(jobs, applied, retried)
        for job in jobs:
            self._held.forget(job.id)

    def _check_applied(self, jobs: list[Job], applied: set[JobId], retried: bool) -> None:
        """Count the successes written; log and count the ones a version mismatch dropped."""
        if len(applied) < len(jobs):
            for job in jobs:
                if job.id not in applied:
                    self._mismatch(job, retried, "success", "complete")
        if not self._meters.enabled:
            return
        succeeded: dict[metrics.JobMeter, int] = {}
        for job in jobs:
            if job.id in applied:
                meter = self._meters.of(job)
                succeeded[meter] = succeeded.get(meter, 0) + 1
        for meter, count in succeeded.items():
            meter.succeeded.inc(count)
