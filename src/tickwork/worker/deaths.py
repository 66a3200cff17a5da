"""Dead jobs and their task's ``on_dead`` hook: a job whose last attempt failed in this worker
becomes dead and runs its hook in the same transaction (:func:`mark_dead`); a job that lease
recovery made dead (maybe in a worker that does not know its kind) carries ``on_dead_pending``
until a worker registering the kind runs the hook and clears the flag in one transaction
(:class:`PendingHooks`, run by every worker on each maintenance pass)."""

from __future__ import annotations

import inspect
import logging
from dataclasses import dataclass
from datetime import datetime

from tickwork import metrics
from tickwork.db import connections, store
from tickwork.db import jobs as jobs_db
from tickwork.logs import fields
from tickwork.maintenance.service import positive
from tickwork.model import Job
from tickwork.tasks import Registry, Task
from tickwork.worker.executor import describe
from tickwork.worker.held import job_fields

log = logging.getLogger(__name__)


async def _call_hook(conn: connections.AsyncConnection, job: Job, task: Task, error: str) -> None:
    if task.on_dead is not None:
        result = task.on_dead(job, conn, error)
        if inspect.isawaitable(result):
            await result


def _hook_failed(job: Job) -> None:
    log.exception(
        "on_dead hook failed",
        extra=job_fields("on_dead_failed", job),
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
        extra=job_fields("job_dead", job, worker=job.picked_by),
    )
    return True


@dataclass(frozen=True)
class PendingHooksConfig:
    interval: float = 5.0
    """Seconds between two passes (the worker's maintenance loop)."""
    batch: int = 100
    """Dead jobs whose hooks one pass settles."""

    def __post_init__(self) -> None:
        positive(self, "interval", "batch")


class PendingHooks:
    """Not a shared duty: only a worker registering a kind may run its on_dead hook, so every
    worker runs the pending hooks of its own kinds."""

    name = "run_pending_hooks"
    shared = False

    def __init__(
        self, registry: Registry, config: PendingHooksConfig = PendingHooksConfig()
    ) -> None:
        self.registry = registry
        self.config = config

    @property
    def interval(self) -> float:
        return self.config.interval

    async def run_once(self, conn: connections.AsyncConnection, now: datetime | None) -> int:
        """Run the pending on_dead hooks of one batch of dead jobs of the registry's kinds,
        each in the transaction that clears its flag (a failing hook's writes are rolled back
        and its error appended to ``last_error``). Returns how many hooks were settled."""
        async with conn.transaction():
            pending = await store.arun(
                conn, jobs_db.lock_dead_hooks_pending(self.registry.kinds, self.config.batch)
            )
            for job in pending:
                task = self.registry.get(job.kind)
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
        extra=job_fields("version_mismatch", job),
    )
