"""A worker's ``/healthz`` answer: every periodic loop beats each time it comes round; one
that has not for too long is stuck, and a loop that crashed is named."""

from __future__ import annotations

import time

STUCK_AFTER_INTERVALS = 3
STUCK_GRACE_SECONDS = 120.0
"""A periodic loop that has not come round for this many of its intervals plus this grace
is stuck, and ``/healthz`` fails (the grace covers a slow database or a long retention pass)."""


class Liveness:
    def __init__(self) -> None:
        self._beats: dict[str, tuple[float, float]] = {}
        """Periodic loops: when each last came round, and how long it may take to again."""
        self.crash: str | None = None
        """Which loop crashed, and with what."""

    def beat(self, loop: str, interval: float) -> None:
        """``loop`` came round; it runs every ``interval`` seconds."""
        allowance = STUCK_AFTER_INTERVALS * interval + STUCK_GRACE_SECONDS
        self._beats[loop] = (time.monotonic(), allowance)

    def check(self, at: float | None = None) -> str | None:
        """None while every loop is alive, otherwise which one crashed or is stuck. ``at``
        is a ``time.monotonic()`` instant (default: now)."""
        if self.crash is not None:
            return self.crash
        at = time.monotonic() if at is None else at
        for name, (last, allowance) in list(self._beats.items()):  # the heartbeat's thread
            if at - last > allowance:
                return f"loop {name} stuck: last came round {at - last:.0f}s ago"
        return None
