"""What happens after a failed attempt: a pure decision."""

from __future__ import annotations

from dataclasses import dataclass

from tickwork.model import DEFAULT_MAX_ATTEMPTS, Backoff, Job
from tickwork.tasks import DEFAULT_BACKOFF, Task


@dataclass(frozen=True)
class RetryLater:
    delay_seconds: float


@dataclass(frozen=True)
class GiveUp:
    """Attempts are exhausted: the job becomes dead."""


def after_failure(job: Job, task: Task | None) -> RetryLater | GiveUp:
    """The job's own retry policy wins over the task's, which wins over the default."""
    limit = job.max_attempts or (task.max_attempts if task else DEFAULT_MAX_ATTEMPTS)
    if job.attempt >= limit:
        return GiveUp()
    policy: Backoff = job.retry or (task.retry if task else DEFAULT_BACKOFF)
    return RetryLater(policy.delay(job.attempt))
