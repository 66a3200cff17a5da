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
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol


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


async def sleep(seconds: float | None, wake: asyncio.Event | None = None) -> None:
    """The one place tickwork waits: returns after ``seconds`` (never, if ``None``) or as soon
    as ``wake`` is set.

    ``asyncio.timeout`` rather than ``asyncio.wait_for``: on Python 3.11 ``wait_for`` returns
    normally when it is cancelled just as the event is set, and a cancelled loop that does not
    stop is a worker that never shuts down."""
    if wake is None and seconds is not None:
        await asyncio.sleep(max(seconds, 0.0))
        return
    wake = wake or asyncio.Event()  # nothing sets it: only the time ends the wait
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(None if seconds is None else max(seconds, 0.0)):
            await wake.wait()


async def cancel_all(tasks: Iterable[asyncio.Task[Any]]) -> None:
    """Cancel ``tasks`` and wait until every one has ended, cancelling again any that swallowed
    the cancellation (a library's ``wait_for`` can, on Python 3.11). Their errors are theirs:
    a done-callback or the caller reads them."""
    pending = {task for task in tasks if not task.done()}
    while pending:
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=1.0)
