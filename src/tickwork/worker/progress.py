"""The worker's side of ``job.progress()`` (:mod:`tickwork.progress`): the latest report of
each job it runs, kept on the job's record (:attr:`~.held.Held.progress`; a report replaces
the one before, so a task reporting in a tight loop costs a dict lookup a call), and written
in one statement for all of them every :data:`PROGRESS_SECONDS` (so at most once per
interval per job). The report still pending when the task returns is written with its outcome:
a success's in the completion itself (:meth:`.outcomes.Outcomes.complete`), any other outcome's
by :meth:`ProgressWriter.write` just before it. A write never holds up a task and never fails
a job: its errors are logged (once per outage) and the next round tries again."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tickwork.clock import Clock, sleep
from tickwork.db import connections, store
from tickwork.db import results as results_db
from tickwork.logs import fields
from tickwork.model import Job
from tickwork.progress import Report
from tickwork.worker.held import Held, HeldJobs, job_fields

log = logging.getLogger(__name__)

PROGRESS_SECONDS = 2.0
"""How often a worker writes the progress its jobs reported: at most once per this per job."""


def pending(held: Held) -> Report | None:
    """The job's report not written yet, if any."""
    report = held.progress
    return None if report is None or report is held.progress_written else report


def pending_json(helds: Sequence[Held]) -> dict[Any, Mapping[str, Any]]:
    """Job id -> its pending report as stored, for the completion of ``helds``."""
    found = {}
    for held in helds:
        report = pending(held)
        if report is not None:
            found[held.job.id] = report.to_json()
    return found


class ProgressWriter:
    def __init__(
        self,
        *,
        held: HeldJobs,
        pool: Callable[[], connections.AsyncPool],
        clock: Clock,
        interval: float = PROGRESS_SECONDS,
    ) -> None:
        self._held = held
        self._pool = pool
        self._clock = clock
        self.interval = interval
        self._outage = connections.Outage("writing progress", log, "progress_failed")
        self._noted: set[tuple[Any, int]] = set()
        """(job id, attempt) whose report was changed to be stored, logged once."""

    def report(self, job: Job, report: Report) -> None:
        """The sink of :data:`tickwork.progress.SINK`: keep ``job``'s latest report. Called on
        the task's thread; a report of a job this worker no longer runs (a task's leftover
        thread) is dropped."""
        held = self._held.get(job.id)
        if held is None or held.job is not job or held.finished:
            return
        held.progress = report
        if report.note is not None and (job.id, job.attempt) not in self._noted:
            self._noted.add((job.id, job.attempt))
            log.warning(
                "progress report changed to be stored: %s",
                report.note,
                extra=job_fields("progress_changed", job),
            )

    async def run(self) -> None:
        while True:
            await sleep(self.interval)
            await self.run_once()

    async def run_once(self) -> int:
        """Write every pending report in one statement; how many were written."""
        return await self.write([h for h in self._held.snapshot() if not h.finished])

    async def write(self, helds: Sequence[Held]) -> int:
        """Write the pending reports of ``helds`` (fenced by version: a job that ended or
        changed hands keeps what it has); errors are logged, never raised."""
        reports = [(held, report) for held in helds if (report := pending(held)) is not None]
        if not reports:
            return 0
        try:
            op = results_db.write_progress(
                [(held.job, report.to_json()) for held, report in reports], self._clock.now()
            )
            async with self._pool().connection() as conn:
                written = await store.arun(conn, op)
        except Exception as exc:
            self._outage.failed(exc)
            return 0
        self._outage.recovered()
        for held, report in reports:
            held.progress_written = report
        self._noted = {key for key in self._noted if key[0] in self._held}
        log.debug("progress written", extra=fields(action="progress_written", count=len(written)))
        return len(written)
