"""Rendering for the terminal: aligned tables for people, JSON for programs.

JSON output follows the contract in DESIGN.md: objects with stable keys, timestamps in
ISO 8601 with their UTC offset, absent values as ``null``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from tickwork.model import Job
from tickwork.worker import executor

MAX_CELL = 60


def iso(value: datetime | None) -> str | None:
    """ISO 8601 in UTC with its offset (``+00:00``), or None."""
    return None if value is None else value.astimezone(UTC).isoformat()


def dumps(value: Any) -> str:
    """Indented JSON; datetimes as :func:`iso`."""
    return json.dumps(value, indent=2, default=_default, ensure_ascii=False)


def _default(value: Any) -> Any:
    if isinstance(value, datetime):
        return iso(value)
    raise TypeError(f"{type(value).__name__} is not JSON-serialisable")


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Columns padded to their widest cell; ``None`` shows as ``-``; long cells are cut."""
    cells = [[_cell(value) for value in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    lines = [headers, *cells]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in lines
    )


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, datetime):
        text = value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")
    else:
        text = " ".join(str(value).split())
    return text if len(text) <= MAX_CELL else text[: MAX_CELL - 1] + "…"


def job_object(job: Job) -> Mapping[str, Any]:
    """A job as the ``-o json`` contract describes it."""
    schedule = job.schedule
    return {
        "id": job.id,
        "kind": job.kind,
        "queue": job.queue,
        "status": job.status.value,
        "attempt": job.attempt,
        "max_attempts": job.max_attempts,
        "priority": job.priority,
        "payload": job.payload,
        "run_at": iso(job.run_at),
        "created_at": iso(job.created_at),
        "started_at": iso(job.started_at),
        "finished_at": iso(job.finished_at),
        "schedule_namespace": schedule.namespace if schedule else None,
        "schedule_name": schedule.name if schedule else None,
        "occurrence_at": iso(schedule.occurrence_at) if schedule else None,
        "picked_by": job.picked_by,
        "last_error": job.last_error,
        "unique_key": job.unique_key,
        "concurrency_key": job.concurrency_key,
        "lease_expires_at": iso(job.lease_expires_at),
    }


JOB_HEADERS = ("ID", "KIND", "QUEUE", "STATUS", "ATTEMPT", "PRIORITY", "RUN AT", "LAST ERROR")


def job_row(job: Job) -> tuple[Any, ...]:
    return (
        job.id,
        job.kind,
        job.queue,
        job.status.value,
        f"{job.attempt}/{job.max_attempts or '-'}",  # '-': the task's, once claimed
        job.priority,
        job.run_at,
        executor.summary(job.last_error) or None,
    )
