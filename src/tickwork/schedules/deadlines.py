"""``spec.deadline`` and ``spec.suspendAfterFailures`` (pure; docs/deadlines.md): reading them
from a manifest, checking them, and their stored form.

A deadline is either ``succeedWithinSeconds`` (an occurrence must have succeeded that long
after it) or ``by`` (``HH:MM``, 24-hour: by the next time the wall clock of the schedule's
``timeZone`` reaches it after the occurrence). PostgreSQL computes each occurrence's deadline
when its job is inserted (``tickwork.occurrence_deadline``, migration 0025) and the duty of
:mod:`tickwork.maintenance.deadlines` finds the ones missed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tickwork.schedules.checks import DefinitionError, limit_problem, shown, type_name
from tickwork.schedules.spec_fields import Fields

DEADLINE_FIELDS = frozenset({"succeedWithinSeconds", "by"})

_BY = re.compile(r"(?:[01][0-9]|2[0-3]):[0-5][0-9]", re.ASCII)
"""``HH:MM``, 00:00 to 23:59, ASCII digits only (``\\d`` would take other scripts' digits)."""


@dataclass(frozen=True)
class Deadline:
    """By when each occurrence must have succeeded: exactly one of the two is set."""

    succeed_within_seconds: int | None = None
    """Seconds after the occurrence."""
    by: str | None = None
    """``HH:MM``: the first time after the occurrence that the wall clock of the schedule's
    zone reaches it (a skipped reading is reached when the clock jumps past it; a repeated
    one, the first time)."""

    def to_spec(self) -> dict[str, Any]:
        if self.succeed_within_seconds is not None:
            return {"succeedWithinSeconds": self.succeed_within_seconds}
        return {"by": self.by}


def deadline_from_spec(fields: Fields) -> Deadline | None:
    """``spec.deadline`` (types checked here, values by :func:`check_deadline`)."""
    deadline = fields.mapping("deadline", DEADLINE_FIELDS)
    if deadline is None:
        return None
    return Deadline(deadline.integer("succeedWithinSeconds"), deadline.string("by"))


Fail = Callable[[str, str], DefinitionError]
"""Makes the error of a field (its path) with a reason."""


def check_deadline(deadline: Deadline, error: Fail) -> None:
    """Raise ``error(path, reason)`` unless exactly one part is set and it is in range."""
    within, by = deadline.succeed_within_seconds, deadline.by
    if (within is None) == (by is None):
        which = "both are" if within is not None else "neither is"
        reason = f"set exactly one of succeedWithinSeconds or by ({which} set)"
        raise error("spec.deadline", reason)
    if within is not None:
        path = "spec.deadline.succeedWithinSeconds"
        if isinstance(within, bool) or not isinstance(within, int):
            raise error(path, f"must be an integer, not {type_name(within)}")
        if problem := limit_problem(path, within):
            raise error(path, problem)
    if by is not None:
        path = "spec.deadline.by"
        if not isinstance(by, str):
            raise error(path, f"must be a string, not {type_name(by)}")
        if not _BY.fullmatch(by):
            reason = f"must be a time of day as HH:MM (00:00 to 23:59), not {shown(by)}"
            raise error(path, reason)


def check_suspend_after_failures(value: int, error: Fail) -> None:
    path = "spec.suspendAfterFailures"
    if isinstance(value, bool) or not isinstance(value, int):
        raise error(path, f"must be an integer, not {type_name(value)}")
    if problem := limit_problem(path, value):
        raise error(path, problem)
