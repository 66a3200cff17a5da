"""The database clock (``db/sql/clock.sql``)."""

from __future__ import annotations

from datetime import datetime

from tickwork.db.store import Op


def database_now(now: datetime | None = None) -> Op[datetime]:
    """The database clock (or ``now`` when a test pins time)."""
    return Op("clock_now", {"now": now}, lambda rows: rows[0]["now"])
