"""Time. Production uses the database clock: code passes ``now=None`` down to SQL, where
``coalesce(%(now)s, now())`` picks PostgreSQL's time. Tests pin ``now`` with
:class:`SettableClock` and move it by hand, so nothing waits for time to pass.

One clock is passed to the App, the worker, the operator and the console. What is not
handed to SQL but needs an instant as a value (a status timestamp, a session's expiry) asks
:meth:`Clock.wall`: this computer's time under the database clock, the pinned time in tests.
Durations and timeouts use ``time.monotonic``, which no clock replaces.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime | None:
        """The instant to pass to SQL, or ``None`` for the database clock."""

    def wall(self) -> datetime:
        """The instant as a value (aware, UTC under the database clock), for what is not
        passed to SQL."""


class DatabaseClock:
    """Production: always defer to PostgreSQL's clock."""

    def now(self) -> datetime | None:
        return None

    def wall(self) -> datetime:
        return datetime.now(UTC)


class SettableClock:
    """A clock that moves only when told to (tests)."""

    def __init__(self, start: datetime) -> None:
        if start.tzinfo is None:
            raise ValueError("SettableClock needs an aware datetime")
        self._now = start

    def now(self) -> datetime:
        return self._now

    def wall(self) -> datetime:
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
