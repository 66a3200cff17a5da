"""Time. Production uses the database clock: code passes ``now=None`` down to SQL, where
``coalesce(%(now)s, now())`` picks PostgreSQL's time. Tests pin ``now`` with
:class:`SettableClock` and move it by hand, so nothing waits for time to pass.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime | None:
        """The instant to pass to SQL, or ``None`` for the database clock."""


class DatabaseClock:
    """Production: always defer to PostgreSQL's clock."""

    def now(self) -> datetime | None:
        return None


class SettableClock:
    """A clock that moves only when told to (tests)."""

    def __init__(self, start: datetime) -> None:
        if start.tzinfo is None:
            raise ValueError("SettableClock needs an aware datetime")
        self._now = start

    def now(self) -> datetime:
        return self._now

    def set(self, instant: datetime) -> None:
        self._now = instant

    def advance(self, seconds: float) -> datetime:
        self._now += timedelta(seconds=seconds)
        return self._now


async def sleep(seconds: float, wake: asyncio.Event | None = None) -> None:
    """The one place tickwork waits: returns after ``seconds`` or as soon as ``wake`` is set."""
    if wake is None:
        await asyncio.sleep(max(seconds, 0.0))
        return
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(wake.wait(), timeout=max(seconds, 0.0))
