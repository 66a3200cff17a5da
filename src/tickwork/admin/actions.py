"""The console's actions — run a delayed job now, cancel a job, retry a dead one, trigger a
schedule — each in one transaction. The job actions are :mod:`tickwork.transitions`' (the
App's too): lock, change, and one audit record with who, why, the request id and the job's
snapshot before and after. A trigger's record holds the schedule's snapshot before and after.

Idempotent twice over: an action repeated under the same request id (a resubmitted form, a
client's retry) finds its audit record and changes nothing; and an action whose effect is
already there (cancelling a cancelled job) changes nothing and records nothing.

A caller scoped to some schedule namespaces acts only on their schedules and jobs; anything
else raises :class:`reads.OutOfScope` (403) before any change.
"""

from __future__ import annotations

from datetime import datetime

from tickwork import transitions
from tickwork.admin.reads import require
from tickwork.db import admin as admin_db
from tickwork.db import connections, store
from tickwork.db import schedules as schedules_db
from tickwork.errors import ScheduleNotFound
from tickwork.model import Actor
from tickwork.schedules import operations
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
