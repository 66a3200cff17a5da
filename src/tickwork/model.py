"""Domain objects of the job engine: plain, frozen, typed. No I/O here."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NewType, Protocol

from tickwork.errors import InvalidInput, InvalidTransition
from tickwork.progress import Reported
from tickwork.progress import report as report_progress

JobId = NewType("JobId", int)

TraceContext = dict[str, str]
"""A trace context as the OpenTelemetry propagator's text carrier (W3C ``traceparent`` and
``tracestate``), stored with a job (:mod:`tickwork.tracing`)."""

DEFAULT_QUEUE = "default"
DEFAULT_MAX_ATTEMPTS = 25


class JobStatus(enum.StrEnum):
    WAITING = "waiting"
    """Enqueued with ``after``: waits for its parents to succeed (never claimed)."""
    AVAILABLE = "available"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    DEAD = "dead"
    CANCELLED = "cancelled"


@dataclass(frozen=True)
class Backoff:
    """Retry delay ``min(base * rate ** (attempt - 1), max)`` seconds."""

    base: float = 30.0
    rate: float = 1.5
    max: float = 3600.0

    def __post_init__(self) -> None:
        if self.base < 0:
            raise InvalidInput("retry.base", "must be >= 0")
        if self.rate < 1:
            raise InvalidInput("retry.rate", "must be >= 1")
        if self.max < self.base:
            raise InvalidInput("retry.max", "must be >= retry.base")

    def delay(self, attempt: int) -> float:
        """Seconds to wait before the next attempt, after ``attempt`` failed (1-based)."""
        exponent = max(attempt - 1, 0)
        try:
            # float: an int rate must not build a huge integer for a huge attempt number.
            value = self.base * float(self.rate) ** exponent
        except OverflowError:
            return self.max if self.base > 0 else 0.0
        return min(value, self.max)


@dataclass(frozen=True)
class ScheduleRef:
    """The schedule occurrence a job was created for."""

    namespace: str
    name: str
    occurrence_at: datetime


@dataclass(frozen=True)
class Job:
    """One row of ``tickwork.jobs`` as a worker or an operator sees it."""

    id: JobId
    kind: str
    queue: str
    payload: Any
    priority: int
    run_at: datetime
    status: JobStatus
    attempt: int
    max_attempts: int | None
    """None until a worker claims the job and applies its task's setting."""
    version: int
    retry: Backoff | None = None
    timeout: float | None = None
    concurrency_key: str | None = None
    unique_key: str | None = None
    schedule: ScheduleRef | None = None
    picked_by: str | None = None
    lease_expires_at: datetime | None = None
    last_error: str | None = None
    created_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    trace_context: TraceContext | None = None
    """The trace context the job was created in (:mod:`tickwork.tracing`); None: none."""

    def progress(self, fraction: float | None, message: str | None = None) -> Reported:
        """Report how far the task has got: ``await job.progress(0.4, "copied 4 of 10")`` (a
        sync task leaves out the ``await``); never waits, written by the worker at most once
        per interval (:mod:`tickwork.progress`, docs/results.md)."""
        return report_progress(self, fraction, message)

    def spawn(
        self, jobs: Sequence[Spawn], *, join: Spawn | None = None, key: str = "spawn"
    ) -> list[JobId]:
        """From inside this job's task: create ``jobs`` (and a ``join`` job that waits for
        all of them) in one transaction; their ids, the join's last. They wait for this job:
        they start once its task has succeeded, and are cancelled if it ends dead or
        cancelled. An entry's ``after`` names other entries (by ``name``) or existing jobs of
        this job's tenant (by id). Idempotent per ``key``: a retried attempt spawning again
        under the same key gets the first attempt's jobs (docs/workflows.md)."""
        return _spawner().spawn(self, jobs, join, key)

    async def spawn_async(
        self, jobs: Sequence[Spawn], *, join: Spawn | None = None, key: str = "spawn"
    ) -> list[JobId]:
        """:meth:`spawn` for async tasks."""
        return await _spawner().spawn_async(self, jobs, join, key)


@dataclass(frozen=True)
class Spawn:
    """A job that a task spawns (:meth:`Job.spawn`). Unset fields take the task's settings."""

    kind: str
    payload: Any = None
    name: str | None = None
    """Lets other entries of the same spawn wait for this one (their ``after``)."""
    after: Sequence[str | int] = ()
    """Names of other entries of the same spawn, or ids of existing jobs, to wait for."""
    queue: str | None = None
    priority: int = 0
    max_attempts: int | None = None
    retry: Backoff | None = None
    timeout: float | None = None
    concurrency_key: str | None = None
    concurrency_limit: int | None = None


class Spawner(Protocol):
    """What creates spawned jobs (the worker's App)."""

    def spawn(
        self, job: Job, jobs: Sequence[Spawn], join: Spawn | None, key: str
    ) -> list[JobId]: ...

    async def spawn_async(
        self, job: Job, jobs: Sequence[Spawn], join: Spawn | None, key: str
    ) -> list[JobId]: ...


SPAWNER: ContextVar[Spawner | None] = ContextVar("tickwork_spawner", default=None)
"""Set by a worker for the tasks it runs."""


def _spawner() -> Spawner:
    spawner = SPAWNER.get()
    if spawner is None:
        raise InvalidTransition("job.spawn works only inside a task run by a tickwork worker")
    return spawner


@dataclass(frozen=True)
class Actor:
    """Who asks for an audited action (the App's caller, the command line's user, a console
    identity), why, and under which request id: an action repeated under the same request id
    is done once."""

    name: str
    reason: str | None = None
    request_id: str | None = None


@dataclass(frozen=True)
class OpenJobs:
    """A schedule's pending (available) and running jobs."""

    available: int
    running: int


@dataclass(frozen=True)
class NewJob:
    """A job to create, however it was asked for: the arguments of :meth:`App.enqueue`
    (checked), or a schedule's job template fired for an occurrence (``occurrence_at``) or a
    manual trigger (a schedule but no occurrence)."""

    kind: str
    queue: str
    payload: Any = None
    priority: int = 0
    run_at: datetime | None = None
    """None: now."""
    max_attempts: int | None = None
    """None: the task's own, resolved when a worker claims the job."""
    retry: Backoff | None = None
    timeout: float | None = None
    concurrency_key: str | None = None
    concurrency_limit: int | None = None
    """How many jobs of ``concurrency_key`` may run at once; None: 1."""
    unique_key: str | None = None
    """While a job of this kind and key is available or running, it is returned instead."""
    schedule_namespace: str | None = None
    schedule_name: str | None = None
    occurrence_at: datetime | None = None
