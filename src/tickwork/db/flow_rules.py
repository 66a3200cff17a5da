"""Operations on ``tickwork.flow_rules`` (``db/sql/flow_rules.sql``, migration 0021): the
concurrency and rate limits of queues, kinds and schedule namespaces, and namespaces' weights,
as plain rows. What a rule means is :mod:`tickwork.flow.limits`'s (:mod:`tickwork.flow.limiting`
turns these rows into rules); the claim reads the table in its own statements
(``job_claim_rules``, ``job_claim``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from tickwork.db.store import Op, Row


@dataclass(frozen=True)
class RuleRow:
    """A stored rule, who set it and when; in listings, its group's running jobs and the
    starts of its rate's last period (all keys together)."""

    scope: str
    name: str
    max_running: int | None
    rate: int | None
    period_seconds: float | None
    rate_key: str | None
    weight: int | None
    set_by: str
    set_at: datetime
    running: int | None = None
    recent_starts: int | None = None


def _rows(rows: list[Row]) -> list[RuleRow]:
    return [RuleRow(**row) for row in rows]


def _first(rows: list[Row]) -> RuleRow | None:
    return RuleRow(**rows[0]) if rows else None


def set_rule(
    scope: str,
    name: str,
    *,
    max_running: int | None,
    rate: int | None,
    period_seconds: float | None,
    rate_key: str | None,
    weight: int | None,
    actor: str,
    now: datetime | None,
) -> Op[RuleRow | None]:
    """Set the rule of ``name``, replacing what it had; the stored rule."""
    params = {
        "scope": scope,
        "name": name,
        "max_running": max_running,
        "rate": rate,
        "period_seconds": period_seconds,
        "rate_key": rate_key,
        "weight": weight,
        "actor": actor,
        "now": now,
    }
    return Op("rule_upsert", params, _first)


def get_rule(scope: str, name: str) -> Op[RuleRow | None]:
    """The rule of ``name``, or None."""
    return Op("rule_get", {"scope": scope, "name": name}, _first)


def delete_rule(scope: str, name: str) -> Op[RuleRow | None]:
    """Remove the rule of ``name``; the rule it had, or None."""
    return Op("rule_delete", {"scope": scope, "name": name}, _first)


def list_rules(scope: str | None = None, now: datetime | None = None) -> Op[list[RuleRow]]:
    """The rules of ``scope`` (None: all), with their running jobs and recent starts."""
    return Op("rule_list", {"scope": scope, "now": now}, _rows)


def lock_task_rules() -> Op[None]:
    """Serialize the writes of tasks' kind rules until the commit."""
    return Op("rule_lock_task_rules", {}, lambda rows: None)


HELD_REASONS = ("paused", "queue_limit", "kind_limit", "namespace_limit", "rate_limit")
"""Why a due waiting job waits (``tickwork_fleet_jobs_held``'s reason), first reason first."""


@dataclass(frozen=True)
class HeldJobs:
    """The due waiting jobs of a queue that no claim would take now, for one reason."""

    queue: str
    reason: str
    count: int


def held_jobs(now: datetime | None) -> Op[list[HeldJobs]]:
    """Per queue and reason, the due waiting jobs a pause or a rule with no room holds."""
    return Op("rule_held_jobs", {"now": now}, lambda rows: [HeldJobs(**row) for row in rows])
