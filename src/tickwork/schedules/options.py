"""What a schedule is made of besides its timing: the job it enqueues (:class:`JobTemplate`,
:class:`ContainerTemplate`), its policies (concurrency, misfire, pending jobs on delete,
interval mode) and the history it keeps, with their defaults.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tickwork.model import DEFAULT_QUEUE, Backoff


class ConcurrencyPolicy(enum.StrEnum):
    """What an occurrence does while the schedule's previous job is pending or running."""

    ALLOW = "Allow"
    FORBID = "Forbid"
    BUFFER_ONE = "BufferOne"
    REPLACE = "Replace"


class MisfirePolicy(enum.StrEnum):
    """Which missed occurrences still fire: none, the most recent one, or the last few."""

    SKIP = "Skip"
    LATEST = "Latest"
    CATCH_UP = "CatchUp"


class PendingJobsOnDelete(enum.StrEnum):
    """What disabling the schedule by pruning (its Schedule deleted, or left out of a pruning
    sync) does with its pending jobs: cancel them (running ones finish), or keep them."""

    CANCEL = "Cancel"
    KEEP = "Keep"


DEFAULT_SUCCESSFUL_JOBS_HISTORY_LIMIT = 3
"""batch/v1 CronJob's default: the finished jobs of a schedule retention keeps that succeeded."""


DEFAULT_FAILED_JOBS_HISTORY_LIMIT = 1
"""batch/v1 CronJob's default: the finished jobs kept that did not succeed (dead or
cancelled)."""


@dataclass(frozen=True)
class HistoryLimits:
    """How many of a schedule's newest finished jobs retention keeps, per outcome."""

    succeeded: int = DEFAULT_SUCCESSFUL_JOBS_HISTORY_LIMIT
    failed: int = DEFAULT_FAILED_JOBS_HISTORY_LIMIT
    """Dead and cancelled jobs together (neither succeeded)."""


class IntervalMode(enum.StrEnum):
    """``every`` counted from a fixed anchor, or from the end of the previous job."""

    FIXED_RATE = "FixedRate"
    FIXED_DELAY = "FixedDelay"


@dataclass(frozen=True)
class JobTemplate:
    """The job every occurrence of a schedule enqueues."""

    kind: str
    queue: str = DEFAULT_QUEUE
    payload: Any = field(default_factory=dict)
    """Any JSON value: dicts with string keys, lists, strings, finite numbers, booleans, None,
    within the payload limits of :mod:`tickwork.schedules.limits`."""
    priority: int = 0
    max_attempts: int | None = None
    """None: the task's own, applied by the worker that claims the job."""
    retry: Backoff | None = None
    """None: the task's own retry policy applies."""
    timeout_seconds: float | None = None
    concurrency_key: str | None = None
    concurrency_limit: int | None = None
    """How many jobs of ``concurrency_key`` may run at once (None: 1); only with a key."""


@dataclass(frozen=True)
class ContainerTemplate:
    """``spec.jobTemplate``: each occurrence's job runs one Kubernetes Job made from
    ``template`` (:mod:`tickwork.schedules.container_jobs`)."""

    template: Mapping[str, Any]
    """The batch/v1 ``JobTemplateSpec`` (checked by :mod:`tickwork.schedules.job_templates`)."""
    namespace: str | None = None
    """The Kubernetes namespace of the Jobs: the Schedule object's, set by the operator; None
    (``tickwork sync -f``): the schedule namespace."""
    owner_uid: str | None = None
    """The Schedule object's uid, for the Jobs' owner reference (set by the operator)."""
