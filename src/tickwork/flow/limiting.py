"""Setting and removing flow rules, done one way whoever asks (the App, so the command line;
the console; the operator for TenantPolicies; a worker for its tasks' options): in the
caller's transaction, change ``tickwork.flow_rules``, wake the queues' workers, and write one
audit record (action ``limit`` or ``unlimit``, target ``queue:NAME``, ``kind:NAME`` or
``namespace:NAME``) with the :class:`~tickwork.model.Actor`. Setting the rule a group has
already, or removing one it does not have, changes and records nothing.

A rule takes effect for the claims whose statements start after its commit: they read the
table themselves (a worker that saw no rule on what it serves looks again within
:data:`tickwork.flow.look.LOOK_SECONDS`, and meanwhile gives the group no room).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from tickwork.db import audit as audit_db
from tickwork.db import connections, store
from tickwork.db import flow_rules as rules_db
from tickwork.db import jobs as jobs_db
from tickwork.flow.limits import Rate, Rule, Scope, check_name
from tickwork.model import Actor
from tickwork.transitions import Outcome, replayed


@dataclass(frozen=True)
class StoredRule:
    """A rule as stored: who set it and when; in listings, its group's running jobs and the
    starts of its rate's last period (all keys together)."""

    rule: Rule
    set_by: str
    set_at: datetime
    running: int | None = None
    recent_starts: int | None = None


def stored(row: rules_db.RuleRow) -> StoredRule:
    rate = None
    if row.rate is not None and row.period_seconds is not None:
        rate = Rate(row.rate, row.period_seconds)
    rule = Rule(Scope(row.scope), row.name, row.max_running, rate, row.rate_key, row.weight)
    return StoredRule(rule, row.set_by, row.set_at, row.running, row.recent_starts)


def list_rules(
    conn: connections.Connection, scope: Scope | None, now: datetime | None
) -> list[StoredRule]:
    rows = store.run(conn, rules_db.list_rules(scope.value if scope else None, now))
    return [stored(row) for row in rows]


def _target(scope: Scope, name: str) -> str:
    return f"{scope.value}:{name}"


def _current(conn: connections.Connection, scope: Scope, name: str) -> Rule | None:
    row = store.run(conn, rules_db.get_rule(scope.value, name))
    return None if row is None else stored(row).rule


def set_rule(
    conn: connections.Connection, rule: Rule, actor: Actor, now: datetime | None
) -> Outcome:
    """Set ``rule`` on its queue, kind or schedule namespace, replacing what it had."""
    where = _target(rule.scope, rule.name)
    if earlier := replayed(conn, "limit", where, actor, None):
        return earlier
    if _current(conn, rule.scope, rule.name) == rule:
        return Outcome("limit", where, False, f"{rule.scope.value} {rule.name} has that limit")
    op = rules_db.set_rule(
        rule.scope.value,
        rule.name,
        max_running=rule.max_running,
        rate=rule.rate.starts if rule.rate else None,
        period_seconds=rule.rate.period_seconds if rule.rate else None,
        rate_key=rule.rate_key,
        weight=rule.weight,
        actor=actor.name,
        now=now,
    )
    store.run(conn, op)
    if rule.scope is Scope.QUEUE:  # more room, perhaps: the queue's workers claim again
        store.run(conn, jobs_db.notify_queue(rule.name, None, None))
    details = {"rule": rule.describe()}
    audit_id = store.run(conn, audit_db.record_audit(actor, "limit", where, details, now))
    message = f"{rule.scope.value} {rule.name}: {rule.describe()}"
    return Outcome("limit", where, True, message, audit_id)


def remove_rule(
    conn: connections.Connection, scope: Scope, name: str, actor: Actor, now: datetime | None
) -> Outcome:
    """Remove the rule of a queue, kind or schedule namespace."""
    name = check_name(scope, name)
    where = _target(scope, name)
    if earlier := replayed(conn, "unlimit", where, actor, None):
        return earlier
    ended = store.run(conn, rules_db.delete_rule(scope.value, name))
    if ended is None:
        return Outcome("unlimit", where, False, f"{scope.value} {name} has no limit")
    if scope is Scope.QUEUE:
        store.run(conn, jobs_db.notify_queue(name, None, None))
    details = {"rule": stored(ended).rule.describe(), "set_by": ended.set_by}
    audit_id = store.run(conn, audit_db.record_audit(actor, "unlimit", where, details, now))
    return Outcome("unlimit", where, True, f"{scope.value} {name}: no limit", audit_id)
