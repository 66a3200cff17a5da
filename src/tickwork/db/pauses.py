"""Operations on ``tickwork.pauses`` (``db/sql/pauses.sql``, migration 0020): the paused queues
and schedule namespaces, and the listings of queues and namespaces with their paused state.
What a pause means is :mod:`tickwork.flow`'s; the claims read the table in their own
statements (``job_claim``, ``schedule_claim_due``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from tickwork.db.store import Op, Row


@dataclass(frozen=True)
class PauseRow:
    """A paused target: a queue or a schedule namespace."""

    scope: str
    name: str
    paused_by: str
    paused_at: datetime
    reason: str | None


def _pauses(rows: list[Row]) -> list[PauseRow]:
    return [PauseRow(**row) for row in rows]


def _first(rows: list[Row]) -> PauseRow | None:
    return PauseRow(**rows[0]) if rows else None


def insert_pause(
    scope: str, name: str, actor: str, reason: str | None, now: datetime | None
) -> Op[PauseRow | None]:
    """Pause ``name``; None when it was paused already (nothing changed)."""
    params = {"scope": scope, "name": name, "actor": actor, "reason": reason, "now": now}
    return Op("pause_insert", params, _first)


def delete_pause(scope: str, name: str) -> Op[PauseRow | None]:
    """Resume ``name``; the pause it ended, or None when it was not paused."""
    return Op("pause_delete", {"scope": scope, "name": name}, _first)


def list_pauses(scope: str | None = None) -> Op[list[PauseRow]]:
    return Op("pause_list", {"scope": scope}, _pauses)


def namespace_exists(name: str) -> Op[bool]:
    return Op("pause_namespace_exists", {"name": name}, lambda rows: bool(rows[0]["found"]))


@dataclass(frozen=True)
class QueueState:
    """A queue with waiting or running jobs, or paused."""

    name: str
    available: int
    running: int
    pause: PauseRow | None


@dataclass(frozen=True)
class NamespaceState:
    """A schedule namespace with its enabled schedules."""

    name: str
    schedules: int
    pause: PauseRow | None


def _pause_of(scope: str, row: Row) -> PauseRow | None:
    if row["paused_at"] is None:
        return None
    return PauseRow(scope, row["name"], row["paused_by"], row["paused_at"], row["reason"])


def list_queues() -> Op[list[QueueState]]:
    return Op(
        "pause_queues_known",
        {},
        lambda rows: [
            QueueState(r["name"], r["available"], r["running"], _pause_of("queue", r)) for r in rows
        ],
    )


def list_namespaces() -> Op[list[NamespaceState]]:
    return Op(
        "pause_namespaces_known",
        {},
        lambda rows: [
            NamespaceState(r["name"], r["schedules"], _pause_of("namespace", r)) for r in rows
        ],
    )
