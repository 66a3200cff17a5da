"""Where a worker's firing claims start each namespace's search for due schedules.

A firing moves each schedule it fires to its next run, and the index entry of its old due
time stays in ``schedules_due_idx`` until a vacuum. A claim looking for a namespace's earliest
due schedule from the start of the namespace's range steps over all of them: at a million
schedules due within a minute, up to 10,000 a namespace by the minute's end, most of a claim's
buffers. Each claim row carries its namespace's earliest due schedule at the claim
(``due_floor``: a schedule waiting to retry a failed firing counts); no due schedule of the
namespace was earlier, so the next claim may start its search there.

A floor is a hint with a short life, not a record: a schedule can come to be due below it
only when something moves it back (a sync that changes its definition or resumes it), and a
sync wakes the firing loop, which forgets the floors; one whose notification was lost is
found once the floor expires, ``FLOOR_SECONDS`` after the claim that found it. The cost of
starting from the earliest again is one walk of the namespace's range per expiry."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime

from tickwork.db.schedules import DueSchedule

FLOOR_SECONDS = 1.0
"""How long a floor is offered after the claim that found it."""


class DueFloors:
    """The floors a worker's claims found, by namespace, each with the time (``monotonic``)
    its claim began."""

    def __init__(
        self, seconds: float = FLOOR_SECONDS, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        self.seconds = seconds
        self.monotonic = monotonic
        self._floors: dict[str, tuple[datetime, float]] = {}
        self._forgotten_at = float("-inf")

    def offer(self, namespaces: Sequence[str]) -> tuple[list[datetime | None], float]:
        """The floor of each namespace (None: none, or expired), and the time to pass to
        :meth:`note` with what the claim that starts now found."""
        now = self.monotonic()
        floors: list[datetime | None] = []
        for namespace in namespaces:
            found = self._floors.get(namespace)
            if found is not None and now - found[1] >= self.seconds:
                del self._floors[namespace]
                found = None
            floors.append(found[0] if found is not None else None)
        return floors, now

    def note(self, due: Iterable[DueSchedule], claimed_at: float) -> None:
        """Keep the floors a claim begun at ``claimed_at`` found (none when the floors were
        forgotten since it began: its snapshot may predate the move that made them wrong)."""
        if claimed_at <= self._forgotten_at:
            return
        for row in due:
            self._floors[row.namespace] = (row.due_floor, claimed_at)

    def forget(self) -> None:
        """Drop every floor: a schedule may have moved below one (a sync woke the loop)."""
        self._floors.clear()
        self._forgotten_at = self.monotonic()
