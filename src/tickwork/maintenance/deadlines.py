"""Deadlines: the shared duty that finds the occurrences that missed their deadline
(``spec.deadline``; docs/deadlines.md).

Each fired occurrence of a schedule with a deadline has a row in
``tickwork.occurrence_deadlines`` (written by a trigger when its job is inserted, with its
deadline computed by PostgreSQL) and a success recorded there when its job succeeds. Every
interval, one worker (the one that claims the duty's row; no leader) takes the rows whose
deadline has passed: it locks their schedules in key order, then deletes the rows with SKIP
LOCKED, so each occurrence is decided exactly once even when several workers race; one that
had not succeeded by its deadline is recorded on its schedule (count, latest occurrence) and
counted in ``tickwork_schedule_deadlines_missed_total``. The operator shows it as the ``Late``
condition until the next success.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from tickwork import metrics
from tickwork.db import connections, store
from tickwork.db import deadlines as deadlines_db
from tickwork.logs import fields
from tickwork.maintenance.service import positive

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DeadlineCheckConfig:
    interval: float = 5.0
    """Seconds between two checks somewhere in the fleet: a missed deadline is found at most
    about this long after it passed."""
    batch: int = 1000
    """Deadlines decided per statement; a run repeats until none is left."""

    def __post_init__(self) -> None:
        positive(self, "interval", "batch")


class DeadlineCheck:
    name = "check_deadlines"
    shared = True

    def __init__(self, config: DeadlineCheckConfig = DeadlineCheckConfig()) -> None:
        self.config = config

    @property
    def interval(self) -> float:
        return self.config.interval

    async def run_once(
        self, conn: connections.AsyncConnection, now: datetime | None
    ) -> list[deadlines_db.DecidedDeadline]:
        """Decide every deadline passed at ``now`` (in batches); returns the decided ones."""
        decided: list[deadlines_db.DecidedDeadline] = []
        batch = self.config.batch
        while True:
            async with conn.transaction():
                locked = await store.arun(conn, deadlines_db.lock_due_schedules(batch, now))
                done = (
                    await store.arun(conn, deadlines_db.check_deadlines(locked, batch, now))
                    if locked
                    else []
                )
            for occurrence in done:
                if occurrence.late:
                    _report(occurrence)
            decided.extend(done)
            if len(done) < batch:  # none left, or the rest taken by another worker
                return decided


def _report(late: deadlines_db.DecidedDeadline) -> None:
    metrics.SCHEDULE_DEADLINES_MISSED.labels(late.namespace, late.name).inc()
    log.warning(
        "schedule %s/%s: the occurrence %s missed its deadline %s (job %s)",
        late.namespace,
        late.name,
        late.occurrence_at.isoformat(),
        late.deadline_at.isoformat(),
        late.job_id,
        extra=fields(
            action="deadline_missed",
            schedule=f"{late.namespace}/{late.name}",
            job_id=late.job_id,
        ),
    )
