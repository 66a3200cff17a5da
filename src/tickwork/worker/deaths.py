"""Marking a job dead and running its task's ``on_dead`` hook in the same transaction."""

from __future__ import annotations

import inspect
import logging
from datetime import datetime

from tickwork import metrics
from tickwork.db import connections, store
from tickwork.logs import fields
from tickwork.model import Job
from tickwork.tasks import Task
from tickwork.worker.executor import describe

log = logging.getLogger(__name__)


async def mark_dead(
    conn: connections.AsyncConnection,
    job: Job,
    task: Task | None,
    error: str,
    now: datetime | None,
) -> bool:
    """Make ``job`` dead (fenced by version) and run ``on_dead(job, conn, error)`` on the same
    transaction. If the hook fails, its writes are rolled back and the job still becomes dead,
    with the hook's error appended to ``last_error`` so nothing is lost unseen. Returns False
    when the version moved (someone else changed the job)."""
    try:
        async with conn.transaction():
            if not await store.arun(conn, store.mark_job_dead(job, error, now)):
                _mismatch(job, "dead")
                return False
            if task is not None and task.on_dead is not None:
                result = task.on_dead(job, conn, error)
                if inspect.isawaitable(result):
                    await result
    except Exception as exc:
        log.exception(
            "on_dead hook failed",
            extra=fields(
                action="on_dead_failed", job_id=job.id, kind=job.kind, attempt=job.attempt
            ),
        )
        async with conn.transaction():
            error = f"{error}\non_dead hook failed: {describe(exc)}"
            if not await store.arun(conn, store.mark_job_dead(job, error, now)):
                _mismatch(job, "dead")
                return False
    log.warning(
        "job is dead: attempts exhausted",
        extra=fields(
            action="job_dead",
            job_id=job.id,
            kind=job.kind,
            attempt=job.attempt,
            worker=job.picked_by,
        ),
    )
    return True


def _mismatch(job: Job, change: str) -> None:
    metrics.VERSION_MISMATCHES.labels(change).inc()
    log.warning(
        f"version mismatch: job changed elsewhere, not marking it {change}",
        extra=fields(action="version_mismatch", job_id=job.id, kind=job.kind, attempt=job.attempt),
    )
