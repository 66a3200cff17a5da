"""The status a Schedule shows of its deadlines and auto-suspension (pure; docs/deadlines.md).

Two conditions beside Ready and Served, each only on a Schedule that uses its field (or whose
row still records it):

* ``Late`` (``spec.deadline``): True, reason ``DeadlineMissed``, while the latest occurrence
  found late has had no success of the schedule after its deadline (the next success clears
  it); the message names the occurrence, its deadline and its job. False, reason ``OnTime``.
* ``SuspendedAfterFailures`` (``spec.suspendAfterFailures``): True, reason ``TooManyFailures``,
  while the schedule is suspended by it; the message says since which job and how to resume.
  False, reason ``Counting``, with the count of consecutive dead occurrences.

A condition turning True, or True with a new message (a new late occurrence), posts a Warning
Event with its reason, once: the status the object shows is the memory, so a restart of the
operator posts nothing again. The status facts ``deadlinesMissed`` and ``consecutiveFailures``
come with them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tickwork.db.schedules import ScheduleRow
from tickwork.operator import status

LATE = "Late"
SUSPENDED = "SuspendedAfterFailures"
DEADLINE_MISSED = "DeadlineMissed"
ON_TIME = "OnTime"
TOO_MANY_FAILURES = "TooManyFailures"
COUNTING = "Counting"


def _watched(row: ScheduleRow) -> bool:
    return "deadline" in row.spec or row.late_deadline_at is not None


def _guarded(row: ScheduleRow) -> bool:
    return "suspendAfterFailures" in row.spec or row.failures_suspended_at is not None


def conditions(row: ScheduleRow | None) -> list[tuple[str, status.Ready]]:
    """The Late and SuspendedAfterFailures conditions ``row`` calls for (none without it)."""
    if row is None:
        return []
    shown: list[tuple[str, status.Ready]] = []
    if _watched(row):
        shown.append((LATE, _late(row)))
    if _guarded(row):
        shown.append((SUSPENDED, _suspended(row)))
    return shown


def _late(row: ScheduleRow) -> status.Ready:
    if not row.late:
        missed = row.deadlines_missed
        since = (
            "" if not missed else f" ({missed} missed since creation, each followed by a success)"
        )
        return status.Ready("False", ON_TIME, f"no occurrence is late{since}")
    return status.Ready(
        "True",
        DEADLINE_MISSED,
        f"the occurrence {status.timestamp(row.late_occurrence_at)} had not succeeded by its "
        f"deadline {status.timestamp(row.late_deadline_at)} (job {row.late_job_id}); "
        f"{row.deadlines_missed} deadline(s) missed since creation; the next success clears it",
    )


def _suspended(row: ScheduleRow) -> status.Ready:
    threshold = row.spec.get("suspendAfterFailures")
    if row.failures_suspended_at is None:
        limit = f" of {threshold} allowed" if threshold is not None else ""
        return status.Ready(
            "False",
            COUNTING,
            f"{row.dead_streak} consecutive occurrence(s) ended dead{limit}",
        )
    return status.Ready(
        "True",
        TOO_MANY_FAILURES,
        f"suspended at {status.timestamp(row.failures_suspended_at)}: job "
        f"{row.failures_suspended_job_id} was the consecutive occurrence ending dead that "
        f"reached spec.suspendAfterFailures, since job {row.dead_streak_job_id}; resume with "
        f"`tickwork schedules resume {row.namespace} {row.name}`, by toggling spec.suspend, "
        "or from the console (a run-now works meanwhile)",
    )


def facts(row: ScheduleRow | None) -> dict[str, Any]:
    """``deadlinesMissed`` and ``consecutiveFailures`` (None, so absent, where they do not
    apply)."""
    return {
        "deadlinesMissed": row.deadlines_missed if row is not None and _watched(row) else None,
        "consecutiveFailures": row.dead_streak if row is not None and _guarded(row) else None,
    }


def events(current: Mapping[str, Any], shown: list[tuple[str, status.Ready]]) -> list[status.Ready]:
    """The Warning Events to post: each condition True now that was not, or with another
    message (another late occurrence)."""
    found = []
    for kind, condition in shown:
        before = status.previous(current, kind)
        if condition.status == "True" and (
            before is None or (before.status, before.message) != ("True", condition.message)
        ):
            found.append(condition)
    return found
