"""Claim floors: per queue and kind, where the claim starts its scan of the available jobs.

The claim reads the jobs in claim order from the start of ``jobs_claim_idx``; while an old
snapshot is open (a long report, a forgotten ``REPEATABLE READ`` session), vacuum cannot
remove the entries of the jobs claimed since, and each claim reads all of their rows before it
finds an available one: its cost grows with the length of that transaction (bench/soak.py).
This duty writes, every interval, a floor per queue and kind: the oldest run_at of its
available jobs, never later than the time of the refresh, less ``margin_seconds``. The claim
starts at the lowest floor of what it serves and judges the older entries on the index alone.

A job made available with a run_at older than its floor (enqueued with a past run_at, handed
back at shutdown, an occurrence fired later than the margin) waits for the next refresh, one
interval at most. A floor is valid for ``VALID_INTERVALS`` intervals: when no worker refreshes
floors any more, the claim scans from the start again.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from tickwork.db import claim_floors as claim_floors_db
from tickwork.db import connections, store
from tickwork.maintenance.service import positive

VALID_INTERVALS = 3
"""Refresh intervals a floor stays valid for (a pass or two may be late)."""


@dataclass(frozen=True)
class ClaimFloorsConfig:
    interval: float = 5.0
    """Seconds between two refreshes somewhere in the fleet."""
    margin_seconds: float = 10.0
    """How far below the oldest available job (or the refresh time) a floor is set: jobs
    enqueued by a transaction that started up to this long before the refresh, and
    occurrences fired up to this late, are never held back by it."""

    def __post_init__(self) -> None:
        positive(self, "interval", "margin_seconds")


class ClaimFloors:
    name = "claim_floors"
    shared = True

    def __init__(self, config: ClaimFloorsConfig = ClaimFloorsConfig()) -> None:
        self.config = config

    @property
    def interval(self) -> float:
        return self.config.interval

    async def run_once(
        self, conn: connections.AsyncConnection, now: datetime | None
    ) -> list[claim_floors_db.ClaimFloor]:
        """Write every floor again; returns them."""
        async with conn.transaction():
            return await store.arun(
                conn,
                claim_floors_db.refresh_claim_floors(
                    self.config.margin_seconds, VALID_INTERVALS * self.config.interval, now
                ),
            )
