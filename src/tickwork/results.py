"""What a task returns, as its job keeps it (pure): the value stored on the job's row
(``tickwork.jobs.result``), or why it was not stored (``result_error``).

A return value is held to the payload's rules, checked by the payload's own checker
(:func:`tickwork.schedules.checks.check_payload`, limits in :mod:`tickwork.schedules.limits`):
plain JSON, at most 64 KiB encoded, 64 levels deep, finite numbers within 64 bits, text
without NUL. One that breaks them is not stored, and the job still succeeds: its work is
done, and failing it would run that work again for the sake of a report. ``result_error``
names the result and the reason instead (docs/results.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tickwork.errors import InvalidInput
from tickwork.schedules.checks import check_payload

FIELD = "result"
"""How messages name the return value (and its parts: ``result.rows[3]``)."""
MAX_ERROR_LENGTH = 500
"""A result error is cut to this many characters."""


@dataclass(frozen=True)
class Kept:
    """A succeeded task's return value as its job keeps it."""

    value: Any = None
    """The value stored (None: nothing: the task returned None, or the value was refused)."""
    error: str | None = None
    """Why the value the task returned was not stored; None when it was (or was None)."""


NOTHING = Kept()


def keep(returned: Any) -> Kept:
    """``returned`` as its job keeps it: itself when it passes the payload's checks, else
    nothing and the reason. Never raises, whatever the value (its own ``__eq__``, ``__len__``
    or ``__iter__`` raising included)."""
    if returned is None:
        return NOTHING
    try:
        check_payload(InvalidInput, FIELD, returned)
    except InvalidInput as exc:
        reason = exc.reason.removesuffix("; quote it")  # the payload's advice for YAML
        return Kept(error=_cut(f"not kept: {exc.field}: {reason}"))
    except Exception as exc:  # a value whose own methods fail while it is read
        return Kept(error=_cut(f"not kept: {FIELD}: could not be read: {type(exc).__name__}"))
    return Kept(returned)


def _cut(text: str) -> str:
    return text if len(text) <= MAX_ERROR_LENGTH else text[: MAX_ERROR_LENGTH - 1] + "…"
