"""Operations on ``tickwork.flow_rules`` (``db/sql/flow_rules.sql``, migration 0021): the
concurrency and rate limits of queues, kinds and schedule namespaces, and namespaces' weights.
What a rule means is :mod:`tickwork.flow.limits`'s; the claim reads the table in its own
statements (``job_claim_rules``, ``job_claim``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from tickwork.db.store import Op, Row
from tickwork.flow.limits import Rate, Rule, Scope


@dataclass(frozen=True)
class RuleRow:
    """A stored rule, who set it and when; in listings, its group's running jobs and the
    starts of its rate's last period."""

    rule: Rule
    set_by: str
    set_at: datetime
    running: int | None = None
    recent_starts: int | None = None


def _rule(row: Row) -> RuleRow:
    rate = None
    if row["rate"] is not None:
        rate = Rate(row["rate"], row["period_seconds"])
    rule = Rule(
        Scope(row["scope"]), row["name"], row["max_running"], rate, row["rate_key"], row["weight"]
    )
    return RuleRow(rule, row["set_by"], row["set_at"], row.get("running"), row.get("recent_starts"))


def _first(rows: list[Row]) -> RuleRow | None:
    return _rule(rows[0]) if rows else None


def set_rule(rule: Rule, actor: str, now: datetime | None) -> Op[RuleRow | None]:
    """Set ``rule``, replacing its group's; the stored rule."""
    params = {
        "scope": rule.scope.value,
        "name": rule.name,
        "max_running": rule.max_running,
        "rate": rule.rate.starts if rule.rate else None,
        "period_seconds": rule.rate.period_seconds if rule.rate else None,
        "rate_key": rule.rate_key,
        "weight": rule.weight,
        "actor": actor,
        "now": now,
    }
    return Op("rule_upsert", params, _first)


def delete_rule(scope: Scope, name: str) -> Op[RuleRow | None]:
    """Remove the rule of ``name``; the rule it had, or None."""
    return Op("rule_delete", {"scope": scope.value, "name": name}, _first)


def list_rules(scope: Scope | None = None, now: datetime | None = None) -> Op[list[RuleRow]]:
    params = {"scope": scope.value if scope else None, "now": now}
    return Op("rule_list", params, lambda rows: [_rule(row) for row in rows])
