"""What a pause is (pure: no clock, no database).

A pause holds a *target*: a queue (no worker of the fleet claims its waiting jobs; its
running jobs finish) or a schedule namespace (its schedules fire nothing, held as if
suspended; on resume, the occurrences missed meanwhile are decided by each schedule's misfire
policy, as after a suspend). A pause is persisted (one row per target, until resumed), names
who paused and why, and is audited with the target ``queue:NAME`` or ``namespace:NAME``.
Pausing a paused target, or resuming one that is not paused, changes nothing.
"""

from __future__ import annotations

import enum
from datetime import datetime

from tickwork.errors import InvalidInput

MAX_NAME = 200
"""The longest queue or namespace name a pause takes (a Kubernetes namespace has at most 63
characters; queue names are free text)."""

MAX_REASON = 1000


class Scope(enum.Enum):
    """What a pause holds."""

    QUEUE = "queue"
    NAMESPACE = "namespace"


def target(scope: Scope, name: str) -> str:
    """The audit target of a pause or resume."""
    return f"{scope.value}:{name}"


def check_name(scope: Scope, name: str) -> str:
    """``name`` as a pause target, or InvalidInput naming the field."""
    return check_target(scope.value, name)


def check_target(field: str, name: object) -> str:
    """A queue's, kind's or namespace's name as flow control takes it (a pause's or a
    limit's target), or InvalidInput naming ``field``."""
    if not isinstance(name, str) or not name.strip():
        raise InvalidInput(field, "must not be empty")
    if name != name.strip():
        raise InvalidInput(field, f"{name!r} has leading or trailing spaces")
    if len(name) > MAX_NAME:
        raise InvalidInput(field, f"longer than {MAX_NAME} characters")
    if "\x00" in name:
        raise InvalidInput(field, "must not contain NUL (U+0000) characters")
    return name


def check_reason(reason: str | None) -> str | None:
    """The reason as stored: None for none or blank, at most ``MAX_REASON`` characters."""
    if reason is None or not reason.strip():
        return None
    if len(reason) > MAX_REASON:
        raise InvalidInput("reason", f"longer than {MAX_REASON} characters")
    if "\x00" in reason:
        raise InvalidInput("reason", "must not contain NUL (U+0000) characters")
    return reason.strip()


def paused_seconds(paused_at: datetime, now: datetime) -> float:
    """How long a target has been paused at ``now`` (0 for a clock behind the pause)."""
    return max(0.0, (now - paused_at).total_seconds())
