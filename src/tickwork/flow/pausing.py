"""Pause and resume, done one way whoever asks (the App, so the command line; the console):
in the caller's transaction, change ``tickwork.pauses``, wake whom the change concerns, and
write one audit record (action ``pause`` or ``resume``, target ``queue:NAME`` or
``namespace:NAME``) with the :class:`~tickwork.model.Actor`. Idempotent as the job actions of
:mod:`tickwork.transitions` are: a request id seen before finds its record and changes
nothing; pausing a paused target or resuming one that is not paused changes and records
nothing (the outcome's ``changed`` is False).

A pause takes effect for the claims whose statement starts after its commit (they read the
table themselves); nothing needs to be told. A resume notifies at commit: a queue's workers
claim at once, a namespace's firing loops look again at once (and its schedules that fell due
while paused have their occurrences before now marked missed, for their misfire policy).
"""

from __future__ import annotations

from datetime import datetime

from tickwork.db import audit as audit_db
from tickwork.db import connections, store
from tickwork.db import jobs as jobs_db
from tickwork.db import pauses as pauses_db
from tickwork.db import schedules as schedules_db
from tickwork.errors import InvalidInput
from tickwork.flow.pauses import Scope, check_name, check_reason, target
from tickwork.model import Actor
from tickwork.transitions import Outcome, replayed


def pause(
    conn: connections.Connection, scope: Scope, name: str, actor: Actor, now: datetime | None
) -> Outcome:
    """Pause the queue or schedule namespace ``name`` (a namespace must exist: a typo would
    otherwise pause nothing)."""
    name = check_name(scope, name)
    reason = check_reason(actor.reason)
    where = target(scope, name)
    if scope is Scope.NAMESPACE and not store.run(conn, pauses_db.namespace_exists(name)):
        raise InvalidInput("namespace", f"no schedule namespace {name!r}")
    if earlier := replayed(conn, "pause", where, actor, None):
        return earlier
    paused = store.run(conn, pauses_db.insert_pause(scope.value, name, actor.name, reason, now))
    if paused is None:
        return Outcome("pause", where, False, f"{scope.value} {name} is paused already")
    details = {"paused_at": paused.paused_at.isoformat()}
    audit_id = store.run(conn, audit_db.record_audit(actor, "pause", where, details, now))
    return Outcome("pause", where, True, f"{scope.value} {name} paused", audit_id)


def resume(
    conn: connections.Connection, scope: Scope, name: str, actor: Actor, now: datetime | None
) -> Outcome:
    """Resume the queue or schedule namespace ``name``."""
    name = check_name(scope, name)
    where = target(scope, name)
    if earlier := replayed(conn, "resume", where, actor, None):
        return earlier
    ended = store.run(conn, pauses_db.delete_pause(scope.value, name))
    if ended is None:
        return Outcome("resume", where, False, f"{scope.value} {name} is not paused")
    details: dict[str, object] = {
        "paused_at": ended.paused_at.isoformat(),
        "paused_by": ended.paused_by,
    }
    if scope is Scope.QUEUE:
        store.run(conn, jobs_db.notify_queue(name, None, None))  # whatever the clock
    else:
        missed = store.run(conn, schedules_db.resume_namespace_schedules(name, now))
        details["schedules_missed"] = missed
        store.run(conn, schedules_db.notify_namespace(name))
    audit_id = store.run(conn, audit_db.record_audit(actor, "resume", where, details, now))
    return Outcome("resume", where, True, f"{scope.value} {name} resumed", audit_id)
