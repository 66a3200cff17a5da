"""Job transitions that someone asks for — run a delayed job now, cancel a job, retry a dead
one — done one way whoever asks: the App (and so the command line, which acts through it) and
the admin console. Each runs in the caller's transaction: lock the job, check the action
applies, change the job, and write one audit record with the :class:`~tickwork.model.Actor`
(who, why, the request id) and the job's snapshot before and after.

Idempotent twice over: an action repeated under the same request id (a resubmitted form, a
client's retry) finds its audit record and changes nothing; and an action whose effect is
already there (cancelling a cancelled job) changes nothing and records nothing. The outcome
says which; the App reports the second as :class:`~tickwork.errors.InvalidTransition`, the
console as a message. An action that does not apply to the job's status raises
:class:`~tickwork.errors.InvalidTransition`, an unknown job
:class:`~tickwork.errors.JobNotFound`, for every caller.

The outcomes a worker records (succeeded, retried, dead, cancelled after a stop request) are
the fenced, batched writes of :mod:`tickwork.db.jobs`, run by the worker; lease recovery and
the Replace policy end jobs in batches too.

What the end of a schedule's job does to its schedule (last status and success, a FixedDelay
schedule's next run, the carried state) happens in one place for every outcome: the
statement-level trigger ``jobs_ended`` (migrations 0009, 0028), not Python. Jobs end in many
statements — a worker's batch of successes, a failure on the last attempt, a stop honoured,
lease recovery, an operator's cancel, Replace — and a trigger cannot be forgotten by any of
them, whereas a Python write would have to follow each one (as the worker's success write
did, while dead and cancelled jobs went through a row trigger). Per statement, it locks the
schedules of the whole batch in key order, so the worker's batched outcome path keeps one
statement and one round trip per batch (one fewer than the separate success write) and
concurrent batches cannot deadlock on schedule rows. A successful job's return value, the
carried state only Python knows, travels in ``jobs.result``, written by the completion itself.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from tickwork.db import audit as audit_db
from tickwork.db import connections, store
from tickwork.db import jobs as jobs_db
from tickwork.errors import InvalidTransition, JobNotFound
from tickwork.model import Actor, JobId, JobStatus


class JobAction(enum.Enum):
    RUN_NOW = "run_now"
    CANCEL = "cancel"
    RETRY = "retry"


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
    replayed: bool = False
    """Done before under the same request id (``changed`` is False)."""


def job_target(job_id: int) -> str:
    """The audit target of a job."""
    return f"job:{job_id}"


@dataclass(frozen=True)
class _Rule:
    applies: tuple[JobStatus, ...]
    """The states it applies to, in the order error messages name them."""
    op: Callable[[int, datetime | None], store.Op[bool]]
    settled: Callable[[jobs_db.LockedJob], str | None]
    """Why there is nothing to do, or None."""


def _run_now_settled(job: jobs_db.LockedJob) -> str | None:
    return "already due" if job.status is JobStatus.AVAILABLE and job.due else None


def _cancel_settled(job: jobs_db.LockedJob) -> str | None:
    return "already cancelled" if job.status is JobStatus.CANCELLED else None


def _retry_settled(job: jobs_db.LockedJob) -> str | None:
    if job.status in (JobStatus.AVAILABLE, JobStatus.RUNNING):
        return f"already {job.status.value}"
    return None


_RULES = {
    JobAction.RUN_NOW: _Rule((JobStatus.AVAILABLE,), jobs_db.run_job_now, _run_now_settled),
    JobAction.CANCEL: _Rule(
        (JobStatus.AVAILABLE, JobStatus.RUNNING, JobStatus.WAITING),
        jobs_db.cancel_job,
        _cancel_settled,
    ),
    JobAction.RETRY: _Rule(
        (JobStatus.DEAD, JobStatus.CANCELLED), jobs_db.retry_dead_job, _retry_settled
    ),
}


def replayed(
    conn: connections.Connection, action: str, target: str, actor: Actor, job_id: int | None
) -> Outcome | None:
    """The outcome of the same action done before under the actor's request id, if it was
    (None as well without a request id)."""
    if actor.request_id is None:
        return None
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
        replayed=True,
    )


def act_on_job(
    conn: connections.Connection,
    action: JobAction,
    job_id: int,
    actor: Actor,
    now: datetime | None,
    may_act: Callable[[str | None], None] | None = None,
    *,
    idempotent: bool = True,
) -> Outcome:
    """Apply ``action`` to the job in ``conn``'s transaction (the caller commits).
    ``may_act`` is given the job's schedule namespace (None: enqueued outside any schedule)
    before anything is read or changed, and raises to refuse. ``idempotent``: a job already
    where the action leads is an outcome with nothing changed (the console's double click);
    otherwise the App's callers (the command line) are told the job is not in a state the
    action applies to."""
    target = job_target(job_id)
    rule = _RULES[action]
    locked = store.run(conn, jobs_db.lock_job(job_id, now))
    if locked is None:
        raise JobNotFound(f"no job with id {job_id}")
    if may_act is not None:
        may_act(locked.namespace)
    if earlier := replayed(conn, action.value, target, actor, job_id):
        return earlier
    if idempotent and (reason := rule.settled(locked)):
        return Outcome(
            action.value, target, False, f"job {job_id} is {reason}", None, JobId(job_id)
        )
    if locked.status not in rule.applies:
        allowed = " or ".join(s.value for s in rule.applies)
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
