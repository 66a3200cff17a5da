"""Operations on ``tickwork.duties`` (``db/sql/duties.sql``): the maintenance duties the
workers take in turn."""

from __future__ import annotations

from datetime import datetime

from tickwork.db.store import Op, nothing


def claim_duty(duty: str, worker: str, interval_seconds: float, now: datetime | None) -> Op[bool]:
    """Take ``duty`` when it is due; False leaves it to the others."""
    return Op(
        "duty_claim",
        {"duty": duty, "worker": worker, "interval_seconds": interval_seconds, "now": now},
        bool,
    )


def add_duty(duty: str, now: datetime | None) -> Op[None]:
    """Make the row of ``duty`` unless it exists, due at ``now``."""
    return Op("duty_add", {"duty": duty, "now": now}, nothing)
