"""Operations on ``tickwork.claim_floors`` (migration 0013; the query lives in
``db/sql/jobs.sql`` because it reads the jobs): per queue and kind, the run_at the claim
starts its scan at, so that the entries of jobs claimed while an old snapshot keeps vacuum
from removing them are skipped on the index alone."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from tickwork.db.store import Op, Row


@dataclass(frozen=True)
class ClaimFloor:
    queue: str
    kind: str
    floor: datetime


def _floors(rows: list[Row]) -> list[ClaimFloor]:
    return [ClaimFloor(row["queue"], row["kind"], row["floor"]) for row in rows]


def refresh_claim_floors(
    margin_seconds: float, valid_seconds: float, now: datetime | None
) -> Op[list[ClaimFloor]]:
    """Write every floor again: the oldest run_at of the pair's available jobs (never later
    than ``now``) less ``margin_seconds``, valid for ``valid_seconds``."""
    return Op(
        "claim_floor_refresh",
        {"margin_seconds": margin_seconds, "valid_seconds": valid_seconds, "now": now},
        _floors,
    )
