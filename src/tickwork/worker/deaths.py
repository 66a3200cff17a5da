"""Dead jobs and their task's ``on_dead`` hook: a job whose last attempt failed in this worker
becomes dead and runs its hook in the same transaction (:func:`mark_dead`); a job that lease
recovery made dead (maybe in a worker that does not know its kind) carries ``on_dead_pending``
until a worker registering the kind runs the hook and clears the flag in one transaction
(:func:`run_pending_hooks`)."""

from __future__ import annotations

import inspect
import logging
from datetime import datetime

from tickwork import metrics
from tickwork.db import connections, store
from tickwork.db import jobs as jobs_db
from tickwork.logs import fields
from tickwork.model import Job
from tickwork.tasks import Registry, Task
from tickwork.worker.executor import describe

log = logging.getLogger(__name__)

PENDING_BATCH = 100


async def _call_hook(conn: connections.AsyncConnection, job: Job, task: Task, error: str) -> None:
    if task.on_dead is not None:
        result = task.on_dead(job, conn, error)
        if inspect.isawaitable(result):
            await result


def _hook_failed(job: Job) -> None:
    log.exception(
        "on_dead hook failed",
        extra=fields(action="on_dead_failed", job_id=job.id, kind=job.kind, attempt=job.attempt),
    )


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
            if not await store.arun(conn, jobs_db.mark_job_dead(job, error, now)):
                _mismatch(job, "dead")
                return False
            if task is not None:
                await _call_hook(conn, job, task, error)
    except Exception as exc:
        _hook_failed(job)
        async with conn.transaction():
            error = f"{error}\non_dead hook failed: {describe(exc)}"
            if not await store.arun(conn, jobs_db.mark_job_dead(job, error, now)):
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


async def run_pending_hooks(conn: connections.AsyncConnection, registry: Registry) -> int:
    """Run the pending on_dead hooks of one batch of dead jobs of ``registry``'s kinds, each in
    the transaction that clears its flag (a failing hook's writes are rolled back and its
    error appended to ``last_error``). Returns how many hooks were settled."""
    async with conn.transaction():
        pending = await store.arun(
            conn, jobs_db.lock_dead_hooks_pending(registry.kinds, PENDING_BATCH)
        )
        for job in pending:
            task = registry.get(job.kind)
            error = job.last_error or ""
            try:
                async with conn.transaction():  # a savepoint: a failing hook's writes roll back
                    if task is not None:
                        await _call_hook(conn, job, task, error)
            except Exception as exc:
                _hook_failed(job)
                error = f"{error}\non_dead hook failed: {describe(exc)}"
            await store.arun(conn, jobs_db.dead_hook_ran(job, error))
            log.info(
                "on_dead hook of a job recovered dead has run",
                extra=fields(action="on_dead_ran", job_id=job.id, kind=job.kind),
            )
    return len(pending)


def _mismatch(job: Job, change: str) -> None:
    metrics.VERSION_MISMATCHES.labels(change).inc()
    log.warning(
        f"version mismatch: job changed elsewhere, not marking it {change}",
        extra=fields(action="version_mismatch", job_id=job.id, kind=job.kind, attempt=job.attempt),
    )
