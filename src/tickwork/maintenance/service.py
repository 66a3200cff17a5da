"""The shape of a background service: a frozen config dataclass (documented defaults, checked
when built), a ``run_once(conn, now)`` that tests call directly with a pinned ``now``, and an
interval. The worker's maintenance loop goes through a list of them (:mod:`.duties`); a new
duty is a new module of this shape, added to that list."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from tickwork.db import connections
from tickwork.errors import ConfigurationError


class Service(Protocol):
    name: str
    """Its row in ``tickwork.duties`` (a shared service) or its name in logs."""
    shared: bool
    """True: one worker in the fleet runs it per interval, the one that claims its row with
    SKIP LOCKED (no leader). False: every worker runs it on each pass of its loop."""

    @property
    def interval(self) -> float:
        """Seconds between two runs of a shared service."""

    async def run_once(self, conn: connections.AsyncConnection, now: datetime | None) -> object:
        """One run at ``now`` (None: the database clock); returns what it did, for tests."""


def positive(config: object, *names: str) -> None:
    """Refuse a config whose fields ``names`` are not above zero, naming the field."""
    for name in names:
        if not getattr(config, name) > 0:
            raise ConfigurationError(f"{name}: must be positive, not {getattr(config, name)!r}")
