"""What happens after a failed attempt: a pure decision."""

from __future__ import annotations

from dataclasses import dataclass

from tickwork.model import Backoff, Job
from tickwork.tasks import DEFAULT_BACKOFF, Task


@dataclass(frozen=True)
class RetryLater:
    delay_seconds: float


@dataclass(frozen=True)
class GiveUp:
    """Attempts are exhausted: the job becomes dead."""


def after_failure(job: Job, task: Task | None) -> RetryLater | GiveUp:
    """The job's own retry policy wins over the task's, which wins over the default."""
    if job.attempt >= job.max_attempts:
        return GiveUp()
    policy: Backoff = job.retry or (task.retry if task else DEFAULT_BACKOFF)
    return RetryLater(policy.delay(job.attempt))
