"""The console's actions — run a delayed job now, cancel a job, retry a dead one, trigger a
schedule, pause or resume a queue or a schedule namespace, set or remove the limit of a queue,
a kind or a namespace — each in one transaction. The job
actions are :mod:`tickwork.transitions`' (the App's too): lock, change, and one audit record
with who, why, the request id and the job's snapshot before and after. A trigger's record
holds the schedule's snapshot before and after.

Idempotent twice over: an action repeated under the same request id (a resubmitted form, a
client's retry) finds its audit record and changes nothing; and an action whose effect is
already there (cancelling a cancelled job) changes nothing and records nothing.

A caller scoped to some schedule namespaces acts only on their schedules and jobs, and
pauses only those namespaces (a queue's pause holds every namespace's jobs: it needs an
unscoped operator), and sets no limit (a limit, a namespace's weight included, shares the
fleet between every namespace: it needs an unscoped operator); anything else raises
:class:`reads.OutOfScope` (403) before any change.
"""

from __future__ import annotations

from datetime import datetime

from tickwork import transitions
from tickwork.admin.reads import OutOfScope, require
from tickwork.db import admin as admin_db
from tickwork.db import connections, store
from tickwork.db import schedules as schedules_db
from tickwork.errors import ScheduleNotFound
from tickwork.flow import limiting, limits, pausing
from tickwork.flow.pauses import Scope as PauseScope
from tickwork.model import Actor
from tickwork.schedules import operations, resuming
from tickwork.transitions import JobAction as JobAction
from tickwork.transitions import Outcome as Outcome


def act_on_job(
    conn: connections.Connection,
    action: JobAction,
    job_id: int,
    actor: Actor,
    now: datetime | None,
    scope: admin_db.Scope,
) -> Outcome:
    """Apply ``action`` to the job in ``conn``'s transaction (the caller commits)."""

    def may_act(namespace: str | None) -> None:
        require(scope, namespace, f"job {job_id}")

    return transitions.act_on_job(conn, action, job_id, actor, now, may_act)


def trigger(
    conn: connections.Connection,
    namespace: str,
    name: str,
    actor: Actor,
    now: datetime | None,
    scope: admin_db.Scope,
) -> Outcome:
    """One job of the schedule now, outside its timetable, in ``conn``'s transaction: the
    App's trigger (:func:`operations.trigger`, which replays a request id under the lock),
    with the schedule's snapshots in its audit record."""
    require(scope, namespace, f"namespace {namespace}")
    before = store.run(conn, schedules_db.lock_snapshot(namespace, name))
    if before is None:
        raise ScheduleNotFound(f"no schedule {name!r} in namespace {namespace!r}")
    return operations.trigger(conn, namespace, name, actor, now, before=before)


def resume_schedule(
    conn: connections.Connection,
    namespace: str,
    name: str,
    actor: Actor,
    now: datetime | None,
    scope: admin_db.Scope,
) -> Outcome:
    """Resume a schedule ``spec.suspendAfterFailures`` suspended, in ``conn``'s transaction:
    the App's resume (:func:`resuming.resume`, which replays a request id under the lock)."""
    require(scope, namespace, f"namespace {namespace}")
    return resuming.resume(conn, namespace, name, actor, now)


PAUSE_ACTIONS = {"pause": pausing.pause, "resume": pausing.resume}


def pause_or_resume(
    conn: connections.Connection,
    action: str,
    target: PauseScope,
    name: str,
    actor: Actor,
    now: datetime | None,
    scope: admin_db.Scope,
) -> Outcome:
    """Pause or resume (``action``) the queue or schedule namespace ``name``: the App's
    :mod:`tickwork.flow.pausing`, audited and idempotent alike."""
    if target is PauseScope.NAMESPACE:
        require(scope, name, f"namespace {name}")
    elif scope is not None:
        raise OutOfScope(f"queue {name}: pausing a queue holds every namespace's jobs")
    return PAUSE_ACTIONS[action](conn, target, name, actor, now)


def set_limit(
    conn: connections.Connection,
    rule: limits.Rule,
    actor: Actor,
    now: datetime | None,
    scope: admin_db.Scope,
) -> Outcome:
    """Set ``rule`` on its queue, kind or namespace: the App's :mod:`tickwork.flow.limiting`,
    audited and idempotent alike."""
    _may_limit(scope, rule.scope, rule.name)
    return limiting.set_rule(conn, rule, actor, now)


def remove_limit(
    conn: connections.Connection,
    target: limits.Scope,
    name: str,
    actor: Actor,
    now: datetime | None,
    scope: admin_db.Scope,
) -> Outcome:
    """Remove the limit of the queue, kind or namespace ``name``."""
    _may_limit(scope, target, name)
    return limiting.remove_rule(conn, target, name, actor, now)


def _may_limit(scope: admin_db.Scope, target: limits.Scope, name: str) -> None:
    if scope is not None:
        raise OutOfScope(f"{target.value} {name}: a limit shares the fleet between namespaces")
