"""Resuming a schedule that ``spec.suspendAfterFailures`` suspended (docs/deadlines.md): the
one path of ``app.resume_schedule``, ``tickwork schedules resume`` and the console's Resume.

Under the schedule's row lock: a request id already recorded for this schedule's resume changes
nothing; a disabled schedule, or one whose own ``spec.suspend`` is true (the desired state wins:
change the manifest), is refused; otherwise the schedule fires again (the suspended stretch is
missed, its misfire policy decides what still fires), its count of dead occurrences starts
from zero, and one audit record keeps what it was.
"""

from __future__ import annotations

from datetime import datetime

from tickwork import transitions
from tickwork.db import audit as audit_db
from tickwork.db import connections, store
from tickwork.db import deadlines as deadlines_db
from tickwork.db import schedules as schedules_db
from tickwork.errors import InvalidTransition, ScheduleNotFound
from tickwork.model import Actor

RESUME = "resume"


def resume(
    conn: connections.Connection, namespace: str, name: str, actor: Actor, now: datetime | None
) -> transitions.Outcome:
    """Resume the schedule in ``conn``'s transaction (the caller commits)."""
    key = f"{namespace}/{name}"
    state = store.run(conn, deadlines_db.lock_for_resume(namespace, name))
    if state is None:
        raise ScheduleNotFound(f"no schedule {name!r} in namespace {namespace!r}")
    target = f"schedule:{key}"
    if earlier := transitions.replayed(conn, RESUME, target, actor, None):
        return earlier
    if not state.enabled:
        raise InvalidTransition(f"schedule {key} is disabled: a sync listing it enables it")
    if state.spec_suspend:
        raise InvalidTransition(
            f"schedule {key} is suspended by its spec (spec.suspend: true): set it to false "
            "in its manifest"
        )
    if state.failures_suspended_at is None and state.dead_streak == 0:
        message = f"schedule {key} is not suspended and counts no dead occurrence"
        return transitions.Outcome(RESUME, target, False, message)
    store.run(conn, deadlines_db.resume(namespace, name, now))
    store.run(conn, schedules_db.notify_namespace(namespace))
    details = {"before": state.snapshot}
    audit_id = store.run(conn, audit_db.record_audit(actor, RESUME, target, details, now))
    if state.failures_suspended_at is not None:
        message = (
            f"schedule {key} resumed (suspended after job "
            f"{state.failures_suspended_job_id} ended dead); its count of dead occurrences "
            "starts again"
        )
    else:
        message = f"schedule {key}: its count of {state.dead_streak} dead occurrences reset"
    return transitions.Outcome(RESUME, target, True, message, audit_id)
