"""The console's actions — run a delayed job now, cancel a job, retry a dead one, trigger a
schedule — each in one transaction that locks its target, changes it, and writes an audit
record with who, why, the request id, and the target's snapshot before and after.

Idempotent twice over: an action repeated under the same request id (a resubmitted form, a
client's retry) finds its audit record and changes nothing; and an action whose effect is
already there (cancelling a cancelled job) changes nothing and records nothing.

A caller scoped to some schedule namespaces acts only on their schedules and jobs; anything
else raises :class:`reads.OutOfScope` (403) before any change.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tickwork.admin.reads import job_target, require, schedule_target
from tickwork.db import admin as admin_db
from tickwork.db import audit as audit_db
from tickwork.db import jobs as jobs_db
from tickwork.db import schedules as schedules_db
from tickwork.db import store
from tickwork.db.connections import Connection
from tickwork.errors import InvalidTransition, JobNotFound, ScheduleNotFound
from tickwork.model import JobId, JobStatus
from tickwork.schedules import operations


@dataclass(frozen=True)
class Outcome:
    action: str
    target: str
    changed: bool
    """False: nothing to do (already in that state, or this request id was done before)."""
    message: str
    audit_id: int | None = None
    """The audit record of the change (or of the earlier request with this id)."""
    job_id: JobId | None = None
    """The job acted on or created."""


@dataclass(frozen=True)
class _JobRule:
    applies: frozenset[JobStatus]
    op: Callable[[int, datetime | None], store.Op[bool]]
    settled: Callable[[jobs_db.LockedJob], str | None]
    """Why there is nothing to do, or None."""


class JobAction(enum.Enum):
    RUN_NOW = "run_now"
    CANCEL = "cancel"
    RETRY = "retry"


def _run_now_settled(job: jobs_db.LockedJob) -> str | None:
    return "already due" if job.status is JobStatus.AVAILABLE and job.due else None


def _cancel_settled(job: jobs_db.LockedJob) -> str | None:
    return "already cancelled" if job.status is JobStatus.CANCELLED else None


def _retry_settled(job: jobs_db.LockedJob) -> str | None:
    if job.status in (JobStatus.AVAILABLE, JobStatus.RUNNING):
        return f"already {job.status.value}"
    return None


_RULES = {
    JobAction.RUN_NOW: _JobRule(
        frozenset({JobStatus.AVAILABLE}), jobs_db.run_job_now, _run_now_settled
    ),
    JobAction.CANCEL: _JobRule(
        frozenset({JobStatus.AVAILABLE, JobStatus.RUNNING}), jobs_db.cancel_job, _cancel_settled
    ),
    JobAction.RETRY: _JobRule(
        frozenset({JobStatus.DEAD, JobStatus.CANCELLED}), jobs_db.retry_dead_job, _retry_settled
    ),
}


def _replayed(
    conn: Connection, action: str, target: str, actor: audit_db.Actor, job_id: int | None
) -> Outcome | None:
    """The outcome of the same action done before under this request id, if it was."""
    earlier = store.run(conn, audit_db.replay(actor.request_id, action, target))
    if earlier is None:
        return None
    job_id = earlier.details.get("job_id", job_id)
    return Outcome(
        action,
        target,
        changed=False,
        message=f"done before under request id {actor.request_id}",
        audit_id=earlier.audit_id,
        job_id=JobId(int(job_id)) if job_id is not None else None,
    )


def act_on_job(
    conn: Connection,
    action: JobAction,
    job_id: int,
    actor: audit_db.Actor,
    now: datetime | None,
    scope: admin_db.Scope,
) -> Outcome:
    """Apply ``action`` to the job in ``conn``'s transaction (the caller commits)."""
    target = job_target(job_id)
    rule = _RULES[action]
    locked = store.run(conn, jobs_db.lock_job(job_id, now))
    if locked is None:
        raise JobNotFound(f"no job with id {job_id}")
    require(scope, locked.namespace, f"job {job_id}")
    if earlier := _replayed(conn, action.value, target, actor, job_id):
        return earlier
    if reason := rule.settled(locked):
        return Outcome(
            action.value, target, False, f"job {job_id} is {reason}", None, JobId(job_id)
        )
    if locked.status not in rule.applies:
        allowed = " or ".join(sorted(s.value for s in rule.applies))
        raise InvalidTransition(
            f"job {job_id} is {locked.status.value}; {action.value} applies only to {allowed} jobs"
        )
    if not store.run(conn, rule.op(job_id, now)):
        raise InvalidTransition(f"job {job_id} changed while locked")  # cannot happen: held
    audit_id = store.run(
        conn, audit_db.audit_job(job_id, action.value, actor, locked.snapshot, now)
    )
    return Outcome(
        action.value, target, True, f"job {job_id}: {action.value} done", audit_id, JobId(job_id)
    )


@dataclass(frozen=True)
class _ScheduleAudit(operations.Audit):
    """The audit of :func:`operations.trigger`, written with the schedule's snapshot before
    (given) and after (read by the insert, after the trigger's own writes)."""

    namespace: str = ""
    name: str = ""
    before: dict[str, Any] = field(default_factory=dict)

    def record(
        self, action: str, target: str, details: dict[str, Any], now: datetime | None
    ) -> store.Op[int]:
        actor = audit_db.Actor(self.actor, self.reason, self.request_id or "")
        return audit_db.audit_schedule(
            self.namespace,
            self.name,
            action=action,
            target=target,
            actor=actor,
            details=details,
            before=self.before,
            now=now,
        )


TRIGGER = "trigger"


def trigger(
    conn: Connection,
    namespace: str,
    name: str,
    actor: audit_db.Actor,
    now: datetime | None,
    scope: admin_db.Scope,
) -> Outcome:
    """One job of the schedule now, outside its timetable, in ``conn``'s transaction."""
    require(scope, namespace, f"namespace {namespace}")
    target = schedule_target(namespace, name)
    locked = store.run(conn, schedules_db.lock_snapshot(namespace, name))
    if locked is None:
        raise ScheduleNotFound(f"no schedule {name!r} in namespace {namespace!r}")
    if earlier := _replayed(conn, TRIGGER, target, actor, None):
        return earlier
    audit = _ScheduleAudit(actor.name, actor.reason, actor.request_id, namespace, name, locked)
    job_id = operations.trigger(conn, namespace, name, audit, now)
    replay = store.run(conn, audit_db.replay(actor.request_id, TRIGGER, target))
    return Outcome(
        TRIGGER,
        target,
        True,
        f"schedule {namespace}/{name} triggered: job {job_id}",
        replay.audit_id if replay else None,
        job_id,
    )
