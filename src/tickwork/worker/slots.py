"""Running jobs: the worker's slots, each taking the next claimed job and running its task
(:mod:`.executor`; sync tasks in the thread pool), then handing what became of it to
:class:`~tickwork.worker.outcomes.Outcomes`. A job runs inside its slot's own asyncio task, so
stopping one is cancelling the slot while it awaits the task: for a job lost to another worker
or asked to stop (the heartbeat's findings, :meth:`Slots.found`), and at shutdown (a job
handed back, or interrupted when the grace is over)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tickwork import metrics, results
from tickwork.clock import Clock
from tickwork.db import connections, store
from tickwork.db import jobs as jobs_db
from tickwork.model import Job, JobId
from tickwork.tasks import CANCEL_REQUESTED, Registry
from tickwork.worker import executor, prefetch
from tickwork.worker.heartbeat import Beat
from tickwork.worker.held import Held, HeldJobs, job_fields
from tickwork.worker.outcomes import Outcomes
from tickwork.worker.progress import ProgressWriter

log = logging.getLogger(__name__)

Pool = connections.AsyncPool

_CANCELLED_ERROR = "interrupted: the task was cancelled"
"""A task that raised CancelledError itself (not asked to stop, the worker not stopping)."""
_TURN_SECONDS = 0.001
"""A slot running jobs that never wait yields to the loop after this long."""


class Slots:
    def __init__(
        self,
        *,
        name: str,
        registry: Registry,
        concurrency: int,
        clock: Clock,
        held: HeldJobs,
        outcomes: Outcomes,
        estimates: prefetch.Estimates,
        meters: metrics.JobMeters,
        stopping: asyncio.Event,
        pool: Callable[[], Pool],
        progress: ProgressWriter,
    ) -> None:
        self.name = name
        """The worker's name as registered (in log lines)."""
        self._registry = registry
        self._clock = clock
        self._held = held
        self._outcomes = outcomes
        self._estimates = estimates
        self._meters = meters
        self._stopping = stopping
        self._pool = pool
        self._progress = progress
        # Spare threads: a sync task that outlives its timeout keeps its thread (Python cannot
        # kill threads); the slots still bound how many tasks run at once.
        self.threads = ThreadPoolExecutor(2 * concurrency, thread_name_prefix="tickwork-task")

    async def run(self) -> None:
        """One slot: run the claimed jobs one after another until told to stop."""
        turn = time.perf_counter()
        while True:
            job = await self._held.next_job()
            if job is None:
                return
            if self._held.lost(job.id):
                self._held.forget(job.id)
                continue
            began = time.perf_counter()
            try:
                await self.run_job(job)
            except Exception as exc:
                # Not written (a lost connection is retried until a shutdown's grace is over):
                # the lease runs out and the job runs again.
                log.error(
                    "could not record the outcome: %s",
                    exc,
                    exc_info=exc,
                    extra=job_fields("outcome_failed", job),
                )
                self._held.forget(job.id)
            ended = time.perf_counter()
            self._estimates.ran(ended - began)
            # Let the claimer, the completer and the other slots have their turn every
            # millisecond: a task that never awaits (a no-op) would otherwise run the whole
            # line of claimed jobs before the next claim is even sent, and claims would never
            # overlap work.
            if ended - turn >= _TURN_SECONDS:
                await asyncio.sleep(0)
                turn = time.perf_counter()

    async def run_job(self, job: Job) -> None:
        task = self._registry.get(job.kind)
        assert task is not None, "claimed only registered kinds"
        held = self._held.get(job.id)
        assert held is not None, "held from its claim until its outcome"
        if held.cancelling:  # asked to stop before it started
            await self._outcomes.cancelled(job)
            return
        # The job runs inside this slot's own task (no task per job): to interrupt it, the
        # heartbeat or the shutdown cancels the slot while it is registered here, which is
        # only while it awaits inside execute().
        slot = asyncio.current_task()
        assert slot is not None
        held.slot = slot
        started = time.perf_counter()
        try:
            outcome: executor.Outcome = await executor.execute(job, task, self.threads)
            if self._meters.enabled:
                self._meters.of(job).duration.observe(time.perf_counter() - started)
        except asyncio.CancelledError:
            slot.uncancel()
            if held.lost:
                self._held.forget(job.id)
                return
            if self._stopping.is_set() and not held.cancelling:
                if task.hand_back_on_shutdown:  # its work goes on: the next attempt adopts it
                    await self._hand_back_running(job)
                else:  # the grace ran out: not the job failing
                    await self._outcomes.interrupted(job)
                return
            outcome = executor.Failed(_CANCELLED_ERROR)
        finally:
            held.slot = None
        await self._record(held, outcome)

    async def _record(self, held: Held, outcome: executor.Outcome) -> None:
        """What became of a job whose task returned (or raised)."""
        job = held.job
        if held.lost:
            log.info(
                "job was cancelled or taken over while running; outcome dropped",
                extra=job_fields("outcome_dropped", job),
            )
            self._held.forget(job.id)
        elif held.cancelling:  # whatever the task's outcome: it was asked to stop
            await self._progress.write([held])
            await self._outcomes.cancelled(job)
        elif isinstance(outcome, executor.Succeeded):
            if outcome.result is not None:
                _keep(held, outcome.result)
            self._held.finish(job.id)
            self._outcomes.succeeded(job)
        else:
            await self._progress.write([held])  # how far it got, before the failure
            await self._outcomes.failed(job, outcome)
            self._held.forget(job.id)

    async def _hand_back_running(self, job: Job) -> None:
        async def write() -> set[JobId]:
            async with self._pool().connection() as conn:
                return await store.arun(conn, jobs_db.hand_back_jobs([job], self._clock.now()))

        returned, _ = await self._outcomes.persist("handing back a running job", write)
        self._held.forget(job.id)
        log.info(
            "handed back at shutdown; a later attempt takes over its work"
            if returned
            else "not handed back: the job changed elsewhere",
            extra=job_fields("job_handed_back", job, worker=self.name),
        )

    def interrupt_handed_back(self) -> None:
        """At shutdown, interrupt the running tasks whose jobs are handed back (their work
        goes on outside the worker); their slots hand the jobs back."""
        for held in self._held:
            task = self._registry.get(held.job.kind)
            if held.slot is None or held.cancelling or task is None:
                continue  # not running, or stopping already (a cancel request)
            if task.hand_back_on_shutdown:
                held.slot.cancel()

    def found(self, beat: Beat) -> None:
        """A heartbeat's findings, on the loop: drop the jobs that are no longer ours, stop
        the ones asked to stop. A record dropped or replaced meanwhile is left alone, and so is
        a job whose task has returned: its outcome's write is fenced by version."""
        for held in beat.held:
            if held.finished or self._held.get(held.job.id) is not held:
                continue
            if held.job.id not in beat.kept:
                self._lose(held)
            elif beat.kept[held.job.id] and not held.cancelling:
                self._stop_job(held)

    def _lose(self, held: Held) -> None:
        log.info(
            "job no longer ours (recovered elsewhere)",
            extra=job_fields("job_lost", held.job, worker=self.name),
        )
        held.lost = True
        if held.slot is not None:
            held.slot.cancel()

    def _stop_job(self, held: Held) -> None:
        """``job`` was asked to stop: cancel its async task (a sync one cannot be stopped and
        runs on); the slot records it cancelled when the task has returned."""
        job = held.job
        log.info("job asked to stop", extra=job_fields("cancel_requested", job, worker=self.name))
        held.cancelling = True
        task = self._registry.get(job.kind)
        if held.slot is not None and task is not None and task.is_async:
            held.slot.cancel(CANCEL_REQUESTED)


def _keep(held: Held, returned: Any) -> None:
    """Keep a succeeded job's return value for its outcome's write, or why it is not kept
    (logged: the job still succeeds)."""
    kept = results.keep(returned)
    held.result, held.result_error = kept.value, kept.error
    if kept.error is not None:
        log.warning(
            "result %s",
            kept.error,
            extra=job_fields("result_not_kept", held.job),
        )
