"""What a concurrency limit, a rate limit and a tenant's weight are (pure: no clock, no database).

A *rule* belongs to a queue, a kind or a schedule namespace (one row of
``tickwork.flow_rules`` each) and may hold:

* ``max_running``: at most this many of the group's jobs run at once, fleet-wide;
* ``rate``: at most ``rate.starts`` of its jobs start in any window of ``rate.period_seconds``
  (a sliding window on the database clock), per value of the payload field ``rate_key`` when
  one is given (a job whose payload lacks the field counts under the empty key);
* ``weight`` (namespaces only): its share in fair claiming, against 1 for a namespace without.

A job is held by every rule of its queue, its kind and its schedule namespace, and by its
concurrency key's ``concurrency_limit``: the most restrictive applies (it starts only when all
of them have room). The claim enforces them in PostgreSQL (``job_claim_rules`` then
``job_claim``); this module only says what a valid rule is.
"""

from __future__ import annotations

import enum
import math
import re
from dataclasses import dataclass
from typing import Any

from tickwork.errors import InvalidInput
from tickwork.flow.pauses import check_target

MAX_RUNNING = 100_000
MAX_STARTS = 1_000_000
MAX_PERIOD_SECONDS = 86_400.0
MAX_WEIGHT = 1000
MAX_CONCURRENCY_LIMIT = 10_000
MAX_RATE_KEY = 200

UNITS = {"s": 1.0, "sec": 1.0, "second": 1.0, "m": 60.0, "min": 60.0, "minute": 60.0}
UNITS |= {"h": 3600.0, "hour": 3600.0, "d": 86400.0, "day": 86400.0}
_RATE = re.compile(r"^\s*(\d+)\s*/\s*(\d+(?:\.\d+)?)?\s*([a-z]+?)s?\s*$")


class Scope(enum.Enum):
    """What a rule limits."""

    QUEUE = "queue"
    KIND = "kind"
    NAMESPACE = "namespace"


def scope_of(text: object) -> Scope:
    """``"queue"``, ``"kind"`` or ``"namespace"`` as a :class:`Scope`."""
    for scope in Scope:
        if text == scope.value:
            return scope
    raise InvalidInput("scope", f"must be queue, kind or namespace, got {text!r}")


@dataclass(frozen=True)
class Rate:
    """At most ``starts`` starts in any window of ``period_seconds``."""

    starts: int
    period_seconds: float

    @classmethod
    def parse(cls, text: object, field: str = "rate") -> Rate:
        """``"100/min"``, ``"10/s"``, ``"50/10s"``, ``"1000/hour"``, ``"5/day"``."""
        if not isinstance(text, str):
            raise InvalidInput(field, f"must be text like 100/min, got {text!r}")
        match = _RATE.match(text.lower())
        if match is None or (match[3] not in UNITS):
            raise InvalidInput(
                field,
                f"{text!r} is not STARTS/PERIOD: a count, then a period in s, min, hour or "
                "day, optionally with a number (100/min, 10/s, 50/10s)",
            )
        count = int(match[1])
        period = float(match[2] or 1) * UNITS[match[3]]
        return cls(check_count(count, field, MAX_STARTS), check_period(period, field))

    def __str__(self) -> str:
        period = self.period_seconds
        for unit, seconds in (("day", 86400.0), ("hour", 3600.0), ("min", 60.0)):
            if period == seconds:
                return f"{self.starts}/{unit}"
        if period == 1.0:
            return f"{self.starts}/s"
        return f"{self.starts}/{period:g}s"


@dataclass(frozen=True)
class Rule:
    """The limits on one queue, kind or schedule namespace."""

    scope: Scope
    name: str
    max_running: int | None = None
    rate: Rate | None = None
    rate_key: str | None = None
    weight: int | None = None

    def __post_init__(self) -> None:
        check_name(self.scope, self.name)
        if self.max_running is not None:
            check_count(self.max_running, "max_running", MAX_RUNNING)
        if self.weight is not None:
            if self.scope is not Scope.NAMESPACE:
                raise InvalidInput("weight", "only a schedule namespace has a weight")
            check_count(self.weight, "weight", MAX_WEIGHT)
        if self.rate_key is not None:
            if self.rate is None:
                raise InvalidInput("rate_key", "needs a rate to key")
            check_rate_key(self.rate_key)
        if self.max_running is None and self.rate is None and self.weight is None:
            raise InvalidInput("limit", "give max_running, rate or (for a namespace) weight")

    def describe(self) -> str:
        """One line, e.g. ``max 3 running, 100/min per customer``."""
        parts = []
        if self.max_running is not None:
            parts.append(f"max {self.max_running} running")
        if self.rate is not None:
            per = f" per {self.rate_key}" if self.rate_key else ""
            parts.append(f"{self.rate}{per}")
        if self.weight is not None:
            parts.append(f"weight {self.weight}")
        return ", ".join(parts)


def check_name(scope: Scope, name: object) -> str:
    """``name`` as a limit's target, by the rules of a pause's."""
    return check_target(scope.value, name)


def check_count(value: Any, field: str, most: int) -> int:
    """A whole number from 1 to ``most``: 0, negatives, fractions, NaN, infinities, booleans
    and text are refused with the field's name."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInput(field, f"must be a whole number from 1 to {most:,}, got {value!r}")
    if isinstance(value, float) and (not math.isfinite(value) or not value.is_integer()):
        raise InvalidInput(field, f"must be a whole number from 1 to {most:,}, got {value!r}")
    if not 1 <= value <= most:
        raise InvalidInput(field, f"must be from 1 to {most:,}, got {value:,}")
    return int(value)


def check_period(seconds: float, field: str) -> float:
    if not math.isfinite(seconds) or not 0 < seconds <= MAX_PERIOD_SECONDS:
        raise InvalidInput(field, f"the period must be over 0 and at most a day, got {seconds:g}s")
    return seconds


def check_rate_key(key: object) -> str:
    """A payload field name (top level) keying a rate."""
    if not isinstance(key, str) or not key.strip():
        raise InvalidInput("rate_key", "must be a payload field name")
    if len(key) > MAX_RATE_KEY:
        raise InvalidInput("rate_key", f"longer than {MAX_RATE_KEY} characters")
    if "\x00" in key:
        raise InvalidInput("rate_key", "must not contain NUL (U+0000) characters")
    return key


def check_concurrency_limit(value: Any, field: str = "concurrency_limit") -> int:
    return check_count(value, field, MAX_CONCURRENCY_LIMIT)
