"""The task registry: what a worker knows how to run."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tickwork.errors import InvalidInput
from tickwork.flow import limits as flow_limits
from tickwork.model import DEFAULT_MAX_ATTEMPTS, DEFAULT_QUEUE, Backoff, Job
from tickwork.schedules import limits

DEFAULT_BACKOFF = Backoff()

CANCEL_REQUESTED = "tickwork: the job was asked to stop"
"""The message of the CancelledError an async task gets when its job was asked to stop
(``tickwork cancel``, the Replace policy); a task interrupted for another reason (the worker
shutting down, the job's lease taken over elsewhere) gets a CancelledError without it."""

TaskFunction = Callable[[Job], Any]
DeadHook = Callable[[Job, Any, str], Any]
"""``on_dead(job, conn, error)``: sync or async; ``conn`` is the worker's
async connection (``psycopg.AsyncConnection``) in the transaction that marks the job dead."""


@dataclass(frozen=True)
class Task:
    kind: str
    function: TaskFunction
    queue: str = DEFAULT_QUEUE
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    retry: Backoff = DEFAULT_BACKOFF
    timeout: float | None = None
    on_dead: DeadHook | None = None
    own_timeout: bool = False
    """The task enforces the job's timeout itself (container jobs: the Kubernetes Job's
    activeDeadlineSeconds): the worker does not interrupt it, and a TimeoutError it raises is
    the job timing out."""
    hand_back_on_shutdown: bool = False
    """The job's work goes on outside the worker and a later attempt picks it up (container
    jobs: the Kubernetes Job keeps running and is adopted): at a worker's shutdown the running
    task is interrupted at once and its job handed back, the attempt not counted, instead of
    being given the grace period and then failed."""
    max_running: int | None = None
    """At most this many jobs of the kind run at once, fleet-wide (the kind's flow rule)."""
    rate: flow_limits.Rate | None = None
    """At most so many of its jobs start per period (``"10/s"`` is read as one)."""
    rate_key: str | None = None
    """The payload field the rate is counted per (None: one count for the kind)."""
    is_async: bool = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "is_async", inspect.iscoroutinefunction(self.function))
        if self.rate is not None and not isinstance(self.rate, flow_limits.Rate):
            object.__setattr__(self, "rate", flow_limits.Rate.parse(self.rate, "rate"))
        if self.rate is not None:
            flow_limits.check_count(self.rate.starts, "rate", flow_limits.MAX_STARTS)
            flow_limits.check_period(self.rate.period_seconds, "rate")
        if self.max_running is not None:
            most = flow_limits.MAX_RUNNING
            running = flow_limits.check_count(self.max_running, "max_running", most)
            object.__setattr__(self, "max_running", running)
        if self.rate_key is not None:
            if self.rate is None:
                raise InvalidInput("rate_key", "needs a rate to key")
            flow_limits.check_rate_key(self.rate_key)
        _ = self.rule  # a kind the rules table cannot name is refused now, not at a start

    @property
    def rule(self) -> flow_limits.Rule | None:
        """The kind's flow rule this task declares (None: it declares no limit); a worker
        registering the task writes it at its start (:mod:`tickwork.flow.task_rules`)."""
        if self.max_running is None and self.rate is None:
            return None
        return flow_limits.Rule(
            flow_limits.Scope.KIND,
            self.kind,
            max_running=self.max_running,
            rate=self.rate,
            rate_key=self.rate_key,
        )


def check_job_fields(
    *,
    kind: str | None = None,
    queue: str | None = None,
    priority: int | None = None,
    max_attempts: int | None = None,
    timeout: float | None = None,
    **keys: str | None,
) -> None:
    """Refuse values the jobs table would refuse, naming the field; ``keys``: text fields
    (``unique_key``, ``concurrency_key``) checked for what PostgreSQL text cannot hold."""
    if kind is not None and not kind.strip():
        raise InvalidInput("kind", "must not be empty")
    if queue is not None and not queue.strip():
        raise InvalidInput("queue", "must not be empty")
    for name, text in (("kind", kind), ("queue", queue), *keys.items()):
        if text is not None and "\x00" in text:  # PostgreSQL text cannot hold it
            raise InvalidInput(name, "must not contain NUL (U+0000) characters")
    if priority is not None and not 0 <= priority <= limits.MAX_SMALLINT:
        raise InvalidInput(
            "priority", f"must be between 0 and {limits.MAX_SMALLINT}, got {priority}"
        )
    if max_attempts is not None and max_attempts < 1:
        raise InvalidInput("max_attempts", f"must be at least 1, got {max_attempts}")
    if timeout is not None and timeout <= 0:
        raise InvalidInput("timeout", f"must be positive, got {timeout}")


class Registry:
    """Tasks by kind."""

    def __init__(self) -> None:
        self._tasks: dict[str, Task] = {}

    def add(self, task: Task) -> None:
        check_job_fields(
            kind=task.kind, queue=task.queue, max_attempts=task.max_attempts, timeout=task.timeout
        )
        if task.kind in self._tasks:
            raise InvalidInput("kind", f"task {task.kind!r} is already registered")
        self._tasks[task.kind] = task

    def get(self, kind: str) -> Task | None:
        return self._tasks.get(kind)

    def items(self) -> list[tuple[str, Task]]:
        return sorted(self._tasks.items())

    @property
    def kinds(self) -> list[str]:
        return sorted(self._tasks)

    def queues(self) -> list[str]:
        return sorted({t.queue for t in self._tasks.values()})
