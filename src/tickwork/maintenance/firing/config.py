"""Schedule firing's configuration and what one pass reports."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from tickwork.errors import ConfigurationError
from tickwork.maintenance.service import positive

RETRY_FIRST = timedelta(seconds=1)
"""A schedule whose firing failed is claimed again this much later..."""
RETRY_MAX = timedelta(minutes=5)
"""...doubling with each consecutive failure, up to this."""


@dataclass(frozen=True)
class FiringConfig:
    batch: int = 500
    """Schedules claimed by one transaction."""
    chunk: int = 1000
    """Most occurrences of one schedule settled by one pass (a backlog takes several)."""
    budget: int = 10_000
    """Occurrences computed per transaction; claimed schedules beyond it wait for the next."""
    max_sleep: float = 30.0
    """Longest sleep between passes, so a lost notification costs at most this much."""
    busy_sleep: float = 0.05
    """Sleep while due schedules are held by another worker, or were deferred."""
    error_sleep: float = 1.0
    """Sleep after a database error."""
    cache_size: int = 100_000
    """Parsed definitions kept by the loop (about 1 KB each)."""
    warm_idle: float = 0.5
    """With at least this many seconds to sleep, the loop first parses the definitions of
    the schedules due next, so parsing is off the path from due time to job."""
    warm_chunk: int = 500
    """Definitions fetched and parsed per step of warming (it stops when the sleep is up)."""
    share_wait: float = 10.0
    """Seconds another worker's share of a namespace is overdue before this worker claims it
    while it has its own share to fire (with less to do, it claims any due schedule)."""
    share_refresh: float = 10.0
    """How often the live workers are read again to see who shares what."""
    connections: int = 2
    """Passes that fire a backlog at once, each on a connection of its own and given a part
    of the worker's share (at most one per namespace in it): while one waits for the
    database, another plans its batch. Without a backlog, one pass fires."""

    def __post_init__(self) -> None:
        positive(
            self,
            "batch",
            "chunk",
            "budget",
            "max_sleep",
            "busy_sleep",
            "error_sleep",
            "cache_size",
            "warm_chunk",
            "share_refresh",
            "connections",
        )
        if self.share_wait < 0:
            raise ConfigurationError(f"share_wait: must be >= 0, not {self.share_wait!r}")
        if self.warm_idle < 0:
            raise ConfigurationError(f"warm_idle: must be >= 0, not {self.warm_idle!r}")


DEFAULTS = FiringConfig()


@dataclass
class FireReport:
    """What a pass did."""

    claimed: int = 0
    """Due schedules claimed."""
    fired: int = 0
    """Jobs created."""
    skipped: int = 0
    """Occurrences thrown away by a misfire or overlap policy."""
    existing: int = 0
    """Occurrences that had a job already."""
    deferred: int = 0
    """Schedules left as they were for the next pass (Replace could not cancel a job)."""
    backlog: int = 0
    """Schedules with due occurrences left for another pass (a chunk or the budget ran out)."""
    failed: int = 0
    """Schedules whose firing failed, set aside until their retry."""
    busy: bool = False
    """The pass stopped with more due (asked to, see ``run_once``'s ``until_busy``)."""

    def add(self, other: FireReport) -> None:
        self.claimed += other.claimed
        self.fired += other.fired
        self.skipped += other.skipped
        self.existing += other.existing
        self.deferred += other.deferred
        self.backlog += other.backlog
        self.failed += other.failed
