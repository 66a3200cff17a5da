"""The stored form of a schedule: the canonical camelCase ``spec`` the database keeps as jsonb
(the same shape as a manifest's), written from a definition's parts, and the few fields read
straight from a stored spec without reading the whole definition (history limits, pending
jobs on delete, the kind it fires).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from tickwork.model import Backoff
from tickwork.schedules import container_jobs
from tickwork.schedules.checks import tidy_number
from tickwork.schedules.options import (
    DEFAULT_FAILED_JOBS_HISTORY_LIMIT,
    DEFAULT_SUCCESSFUL_JOBS_HISTORY_LIMIT,
    ContainerTemplate,
    HistoryLimits,
    JobTemplate,
    PendingJobsOnDelete,
)


def stored_pending_jobs_on_delete(spec: Mapping[str, Any]) -> PendingJobsOnDelete:
    """The behaviour a stored spec asks for when it is pruned: Cancel unless it says Keep
    (a spec stored before the field existed has none, and gets the default)."""
    if spec.get("pendingJobsOnDelete") == PendingJobsOnDelete.KEEP:
        return PendingJobsOnDelete.KEEP
    return PendingJobsOnDelete.CANCEL


def stored_history_limits(spec: Mapping[str, Any]) -> HistoryLimits:
    """The history limits of a stored spec; one stored before the fields existed has none
    and gets CronJob's defaults."""
    succeeded = spec.get("successfulJobsHistoryLimit")
    failed = spec.get("failedJobsHistoryLimit")
    return HistoryLimits(
        DEFAULT_SUCCESSFUL_JOBS_HISTORY_LIMIT if succeeded is None else succeeded,
        DEFAULT_FAILED_JOBS_HISTORY_LIMIT if failed is None else failed,
    )


def stored_kind(spec: Mapping[str, Any]) -> str | None:
    """The kind of the jobs a stored spec fires (None when it says none)."""
    if spec.get("jobTemplate") is not None:
        return container_jobs.KIND
    job = spec.get("job")
    kind = job.get("kind") if isinstance(job, Mapping) else None
    return kind if isinstance(kind, str) else None


def format_duration(value: timedelta) -> str:
    """``value`` as ``occurrences.parse_duration`` reads it: ``1d12h``, ``1h30m``, ``1.5s``."""
    micros = value // timedelta(microseconds=1)
    text = ""
    for unit, size in (("d", 86_400_000_000), ("h", 3_600_000_000), ("m", 60_000_000)):
        count, micros = divmod(micros, size)
        text += f"{count}{unit}" if count else ""
    seconds, fraction = divmod(micros, 1_000_000)
    if fraction:
        text += f"{seconds}.{fraction:06d}".rstrip("0") + "s"
    elif seconds or not text:
        text += f"{seconds}s"
    return text


def retry_to_spec(retry: Backoff) -> dict[str, float]:
    return {
        "baseDelaySeconds": tidy_number(retry.base),
        "backoffRate": tidy_number(retry.rate),
        "maxDelaySeconds": tidy_number(retry.max),
    }


def job_to_spec(job: JobTemplate, *, container: bool) -> dict[str, Any]:
    """``spec.job``; with a ``jobTemplate``, without the kind and payload it implies."""
    spec: dict[str, Any] = {} if container else {"kind": job.kind}
    spec["queue"] = job.queue
    if not container:
        spec["payload"] = copy_json(job.payload)
    spec["priority"] = job.priority
    if job.max_attempts is not None:
        spec["maxAttempts"] = job.max_attempts
    if job.retry is not None:
        spec["retryPolicy"] = retry_to_spec(job.retry)
    if job.timeout_seconds is not None:
        spec["timeoutSeconds"] = tidy_number(job.timeout_seconds)
    if job.concurrency_key is not None:
        spec["concurrencyKey"] = job.concurrency_key
    if job.concurrency_limit is not None:
        spec["concurrencyLimit"] = job.concurrency_limit
    return spec


def target_to_spec(container: ContainerTemplate) -> dict[str, str]:
    target = {"namespace": container.namespace, "ownerUid": container.owner_uid}
    return {key: value for key, value in target.items() if value is not None}


def copy_json(value: Any) -> Any:
    """A deep copy of a JSON-like value, so no caller shares a mutable payload (checked by
    :func:`check_payload` first: it nests at most ``PAYLOAD_MAX_DEPTH`` levels)."""
    if isinstance(value, dict):
        return {key: copy_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [copy_json(item) for item in value]
    return value


TARGET_FIELD = "jobTemplateTarget"
"""Where a stored spec keeps a :class:`ContainerTemplate`'s namespace and owner uid (a manifest
cannot set it: :func:`check_manifest_rules`)."""


TARGET_LENGTHS = {"namespace": 63, "ownerUid": 128}
"""A Kubernetes namespace is a DNS label; a uid is a UUID (36 characters), with room."""
