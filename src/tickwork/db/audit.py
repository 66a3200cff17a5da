"""Operations on ``tickwork.audit_log`` (``db/sql/audit.sql``; the record of a job action,
whose snapshot after reads the job, is ``admin_audit_job`` in ``jobs.sql``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb

from tickwork.db.store import Op
from tickwork.model import Actor as Actor


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
    actor: Actor, action: str, target: str, details: Mapping[str, Any], now: datetime | None
) -> Op[int]:
    extra = {"target": target, "details": Jsonb(dict(details))}
    return Op("audit_insert", {**_actor_params(actor, action, now), **extra}, _id)


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
    extra = {"id": job_id, "before": Jsonb(dict(before))}
    return Op("admin_audit_job", {**_actor_params(actor, action, now), **extra}, _id)


def audit_schedule(
    key: tuple[str, str],
    action: str,
    actor: Actor,
    details: Mapping[str, Any],
    before: Mapping[str, Any],
    now: datetime | None,
) -> Op[int]:
    """The record of an action on the schedule ``key`` (namespace, name): its details, and
    its snapshot before (given) and after."""
    params = _actor_params(actor, action, now)
    params.update(namespace=key[0], name=key[1], target=f"schedule:{key[0]}/{key[1]}")
    params.update(details=Jsonb(dict(details)), before=Jsonb(dict(before)))
    return Op("audit_schedule", params, _id)


def audit_schedules_disabled(
    namespace: str,
    actor: Actor,
    details: Mapping[str, Mapping[str, Any]],
    now: datetime | None,
) -> Op[list[int]]:
    """One ``disable`` record per schedule of ``namespace`` named in ``details`` (name to
    its details), in one statement."""
    params = _actor_params(actor, "disable", now)
    params.update(
        namespace=namespace,
        names=list(details),
        details=[Jsonb(dict(d)) for d in details.values()],
    )
    return Op("audit_schedules_disabled", params, lambda rows: [int(r["id"]) for r in rows])


def session_ended(target: str) -> Op[bool]:
    """A logout was recorded for the session ``target``."""
    return Op("audit_session_ended", {"target": target}, lambda rows: bool(rows[0]["ended"]))


def end_session(target: str, actor: Actor, now: datetime | None) -> Op[int]:
    params = _actor_params(actor, "logout", now)
    params.update(target=target)
    return Op("audit_end_session", params, _id)
