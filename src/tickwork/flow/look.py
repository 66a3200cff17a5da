"""When a worker locks the flow rules before its claim (``job_claim_rules``).

While rules limit what it serves, every claim locks them first (in the claim's transaction).
While none does, the worker claims with the one statement alone and looks again every
:data:`LOOK_SECONDS`: meanwhile a rule set since gives that claim no room in its group (the
claim reads the rules itself), so a new limit is never exceeded; it may only hold the group's
jobs on this worker for that long.

A worker whose claim found nothing sleeps until woken (a job enqueued, room freed on it) or
its poll interval; when the rules said a spent rate has room again sooner, until then; when
another claimer held one of its rules, a few milliseconds.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

LOOK_SECONDS = 1.0
CONTENDED_SECONDS = 0.02
"""How soon a worker whose claim found nothing claims again when another claimer held one of
its rules: that claimer commits within a claim's time, and the room it left is this one's."""


class RuleLook:
    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._monotonic = monotonic
        self._applying = False
        self._looked_at = -math.inf
        self._room_at: float | None = None

    def due(self) -> bool:
        """Whether the next claim locks the rules first."""
        return self._applying or self._monotonic() - self._looked_at >= LOOK_SECONDS

    def looked(
        self, applying: int, room_in_seconds: float | None = None, contended: int = 0
    ) -> None:
        """The rules locked found ``applying`` rules on what this worker serves, the first
        spent rate having room again in ``room_in_seconds`` (None: none spent), ``contended``
        of them held by another claimer."""
        self._applying = applying > 0
        self._looked_at = self._monotonic()
        self._room_at = None if room_in_seconds is None else self._looked_at + room_in_seconds
        if contended:
            self._room_at = self._looked_at + CONTENDED_SECONDS

    def idle_seconds(self, poll_seconds: float) -> float:
        """How long a worker whose claim found nothing waits before it claims again (unless
        woken): its poll interval, or less when a spent rate has room again sooner."""
        if self._room_at is None:
            return poll_seconds
        return max(0.001, min(poll_seconds, self._room_at - self._monotonic()))
