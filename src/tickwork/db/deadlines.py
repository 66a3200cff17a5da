"""Operations on ``tickwork.occurrence_deadlines`` and the deadline and auto-suspend columns of
``tickwork.schedules`` (``db/sql/deadlines.sql``, migration 0025; docs/deadlines.md)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tickwork.db.store import Op, Row, column
from tickwork.model import JobId


@dataclass(frozen=True)
class DecidedDeadline:
    """An occurrence whose deadline passed, decided once: late or not."""

    job_id: JobId
    namespace: str
    name: str
    occurrence_at: datetime
    deadline_at: datetime
    late: bool
    """It had not succeeded by its deadline (recorded on its schedule)."""


@dataclass(frozen=True)
class ResumeState:
    """A schedule about to be resumed, as it was (locked)."""

    enabled: bool
    suspended: bool
    spec_suspend: bool
    dead_streak: int
    failures_suspended_at: datetime | None
    failures_suspended_job_id: JobId | None
    dead_streak_job_id: JobId | None
    snapshot: dict[str, Any]


def lock_due_schedules(batch: int, now: datetime | None) -> Op[list[tuple[str, str]]]:
    """Lock, in key order, the schedules of the earliest ``batch`` passed deadlines."""
    return Op(
        "deadline_lock_due_schedules",
        {"batch": batch, "now": now},
        lambda rows: [(row["namespace"], row["name"]) for row in rows],
    )


def _decided(rows: list[Row]) -> list[DecidedDeadline]:
    return [DecidedDeadline(**row) for row in rows]


def check_deadlines(
    schedules: Sequence[tuple[str, str]], batch: int, now: datetime | None
) -> Op[list[DecidedDeadline]]:
    """Decide the passed deadlines of ``schedules`` (locked first), at most ``batch``; record
    the late ones on their schedules; returns every one decided."""
    return Op(
        "deadline_check",
        {
            "namespaces": [namespace for namespace, _ in schedules],
            "names": [name for _, name in schedules],
            "batch": batch,
            "now": now,
        },
        _decided,
    )


def lock_for_resume(namespace: str, name: str) -> Op[ResumeState | None]:
    return Op(
        "schedule_lock_for_resume",
        {"namespace": namespace, "name": name},
        lambda rows: ResumeState(**rows[0]) if rows else None,
    )


def resume(namespace: str, name: str, now: datetime | None) -> Op[bool]:
    """Fire again and count dead occurrences from zero; False when the schedule is disabled
    or its spec suspends it (then nothing changes)."""
    return Op(
        "schedule_resume",
        {"namespace": namespace, "name": name, "now": now},
        lambda rows: bool(column("namespace")(rows)),
    )
