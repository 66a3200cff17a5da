"""Results and progress on ``tickwork.jobs`` (``db/sql/results.sql``): the worker's progress
writes, and the reads behind ``tickwork jobs get``, the console and the Schedule's status.
A succeeded job's result is written with its outcome (:func:`tickwork.db.jobs.complete_jobs`)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb

from tickwork.db.store import Op, Row
from tickwork.model import Job, JobId


@dataclass(frozen=True)
class Progress:
    """A job's latest progress as stored (:class:`tickwork.progress.Report` plus when)."""

    fraction: float | None
    """0..1; None: not known."""
    message: str | None
    attempt: int | None
    """The attempt that reported it."""
    at: datetime | None
    """When the worker wrote it (the database's clock)."""

    @classmethod
    def from_json(cls, value: Any) -> Progress | None:
        """The stored object, read leniently: a field of the wrong type is None."""
        if not isinstance(value, Mapping):
            return None
        fraction, message = value.get("fraction"), value.get("message")
        attempt, at = value.get("attempt"), value.get("at")
        return cls(
            fraction=float(fraction) if isinstance(fraction, int | float) else None,
            message=message if isinstance(message, str) else None,
            attempt=attempt if isinstance(attempt, int) else None,
            at=_instant(at),
        )


def _instant(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


@dataclass(frozen=True)
class JobResult:
    """What a job returned and reported."""

    result: Any
    """The value its task returned (None: none, or not kept)."""
    result_error: str | None
    """Why the value its task returned was not kept."""
    progress: Progress | None


NO_RESULT = JobResult(None, None, None)


def _result(row: Row) -> JobResult:
    text = row["result_json"]
    return JobResult(
        result=None if text is None else json.loads(text),
        result_error=row["result_error"],
        progress=Progress.from_json(row["progress"]),
    )


def job_results(ids: Sequence[int]) -> Op[dict[JobId, JobResult]]:
    """The result, result error and progress of each job of ``ids`` that exists."""
    return Op(
        "job_results",
        {"ids": list(ids)},
        lambda rows: {JobId(row["id"]): _result(row) for row in rows},
    )


def write_progress(
    reports: Sequence[tuple[Job, Mapping[str, Any]]], now: datetime | None
) -> Op[set[JobId]]:
    """Store each running job's latest progress report (fenced by version); the ids written."""
    return Op(
        "job_progress_many",
        {
            "ids": [job.id for job, _ in reports],
            "versions": [job.version for job, _ in reports],
            "progress": [Jsonb(dict(report)) for _, report in reports],
            "now": now,
        },
        lambda rows: {JobId(row["id"]) for row in rows},
    )
