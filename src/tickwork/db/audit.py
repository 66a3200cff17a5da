"""Operations on ``tickwork.audit_log`` (``db/sql/audit.sql``; the record of a job action,
whose snapshot after reads the job, is ``admin_audit_job`` in ``jobs.sql``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb

from tickwork.db.store import Op


@dataclass(frozen=True)
class Actor:
    """Who acted, why, and under which request id."""

    name: str
    reason: str | None
    request_id: str


def _actor_params(actor: Actor, action: str, now: datetime | None) -> dict[str, Any]:
    return {
        "actor": actor.name,
        "action": action,
        "reason": actor.reason,
        "request_id": actor.request_id,
        "now": now,
    }


def _id(rows: list[dict[str, Any]]) -> int:
    return int(rows[0]["id"])


def record_audit(
    *,
    actor: str,
    action: str,
    target: str,
    reason: str | None,
    request_id: str | None,
    details: Mapping[str, Any],
    now: datetime | None,
) -> Op[int]:
    return Op(
        "audit_insert",
        {
            "actor": actor,
            "action": action,
            "target": target,
            "reason": reason,
            "request_id": request_id,
            "details": Jsonb(dict(details)),
            "now": now,
        },
        _id,
    )


@dataclass(frozen=True)
class Replay:
    """An action already recorded under the same request id."""

    audit_id: int
    details: dict[str, Any]


def replay(request_id: str, action: str, target: str) -> Op[Replay | None]:
    return Op(
        "audit_replay",
        {"request_id": request_id, "action": action, "target": target},
        lambda rows: Replay(rows[0]["id"], rows[0]["details"]) if rows else None,
    )


def audit_job(
    job_id: int, action: str, actor: Actor, before: Mapping[str, Any], now: datetime | None
) -> Op[int]:
    """The record of an action on a job, with its snapshot before (given) and after."""
    params = _actor_params(actor, action, now)
    params.update(id=job_id, before=Jsonb(dict(before)))
    return Op("admin_audit_job", params, _id)


def audit_schedule(
    namespace: str,
    name: str,
    *,
    action: str,
    target: str,
    actor: Actor,
    details: Mapping[str, Any],
    before: Mapping[str, Any],
    now: datetime | None,
) -> Op[int]:
    params = _actor_params(actor, action, now)
    params.update(
        namespace=namespace,
        name=name,
        target=target,
        details=Jsonb(dict(details)),
        before=Jsonb(dict(before)),
    )
    return Op("audit_schedule", params, _id)


def session_ended(target: str) -> Op[bool]:
    """A logout was recorded for the session ``target``."""
    return Op("audit_session_ended", {"target": target}, lambda rows: bool(rows[0]["ended"]))


def end_session(target: str, actor: Actor, now: datetime | None) -> Op[int]:
    params = _actor_params(actor, "logout", now)
    params.update(target=target)
    return Op("audit_end_session", params, _id)
