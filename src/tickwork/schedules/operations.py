"""Operator actions on one schedule, outside its timetable: the revision-fenced single fire,
backfill and manual trigger (idempotent by request id). Each runs on the caller's
connection, in one transaction, and its jobs carry the caller's trace context
(:func:`tickwork.tracing.capture`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from tickwork import tracing, transitions
from tickwork.db import audit as audit_db
from tickwork.db import clock as clock_db
from tickwork.db import connections, store
from tickwork.db import jobs as jobs_db
from tickwork.db import schedules as schedules_db
from tickwork.errors import InvalidInput, InvalidTransition, ScheduleNotFound
from tickwork.model import Actor, JobId
from tickwork.schedules import occurrences, policies
from tickwork.schedules import sync as schedule_sync
from tickwork.schedules.definition import ScheduleDefinition

MAX_BACKFILL = 1_000
"""Most occurrences one backfill call takes; a range holding more is refused with their
number (counted up to :data:`BACKFILL_COUNTED`), to be split. It bounds one call's
transaction and the backlog of a schedule whose backfilled jobs run one at a time."""

BACKFILL_COUNTED = 10 * MAX_BACKFILL
"""How far a refused backfill counts its range's occurrences (under the schedule's row
lock: 10,000 cron occurrences take about 70 ms); beyond it, "more than"."""

_TICK = timedelta(microseconds=1)


@dataclass(frozen=True)
class BackfillReport:
    created: int
    """Jobs created."""
    existing: int
    """Occurrences in the range that had their job already."""


def _record(
    conn: connections.Connection,
    actor: Actor,
    action: str,
    namespace: str,
    name: str,
    details: dict[str, Any],
    before: dict[str, Any] | None,
    now: datetime | None,
) -> int:
    """The audit record of an action on a schedule; with the schedule's snapshot ``before``
    (read by the caller under lock), the snapshots before and after too."""
    target = f"schedule:{namespace}/{name}"
    if before is None:
        return store.run(conn, audit_db.record_audit(actor, action, target, details, now))
    op = audit_db.audit_schedule((namespace, name), action, actor, details, before, now)
    return store.run(conn, op)


def _lock(
    conn: connections.Connection, namespace: str, name: str
) -> tuple[schedules_db.LockedSchedule, ScheduleDefinition]:
    locked = store.run(conn, schedules_db.lock_schedule(namespace, name))
    if locked is None:
        raise ScheduleNotFound(f"no schedule {name!r} in namespace {namespace!r}")
    return locked, ScheduleDefinition.from_spec(name, locked.spec)


def _aware(field: str, value: datetime) -> None:
    if value.tzinfo is None:
        raise InvalidInput(field, "must be timezone-aware")


def fire(
    conn: connections.Connection,
    namespace: str,
    name: str,
    revision: int,
    occurrence_at: datetime,
    now: datetime | None,
) -> JobId | None:
    """The job of one occurrence if the schedule is enabled and still at ``revision``."""
    _aware("occurrence_at", occurrence_at)
    locked = store.run(conn, schedules_db.lock_schedule(namespace, name))
    if locked is None or locked.revision != revision or not locked.enabled:
        return None
    definition = ScheduleDefinition.from_spec(name, locked.spec)
    if schedule_sync.fixed_delay(definition) is None:
        timetable = definition.timetable(namespace)
        zone = occurrences.load_zone(definition.time_zone)
        if timetable.next_after(occurrence_at - _TICK, zone) != occurrence_at:
            raise InvalidInput(
                "occurrence_at",
                f"{occurrence_at.isoformat()} is not an occurrence of {namespace}/{name}",
            )
    job = policies.schedule_job(namespace, definition, occurrence_at, locked.state)
    created = store.run(conn, jobs_db.insert_schedule_jobs([job], now, tracing.capture()))
    if not created:
        return None
    store.run(conn, schedules_db.record_job(namespace, name, created[0].id, occurrence_at))
    return created[0].id


def backfill(
    conn: connections.Connection,
    namespace: str,
    name: str,
    start: datetime,
    end: datetime,
    actor: Actor,
    now: datetime | None,
) -> BackfillReport:
    """The jobs of every occurrence in [start, end] that has none yet, through the
    occurrence key: running it twice creates nothing twice. They keep the schedule's
    overlap policy (:func:`policies.backfill_jobs`); more than :data:`MAX_BACKFILL`
    occurrences are refused."""
    _aware("start", start)
    _aware("end", end)
    if end < start:
        raise InvalidInput("end", "must not be before start")
    if end > store.run(conn, clock_db.database_now(now)):
        raise InvalidInput("end", "is in the future: the schedule fires those itself")
    locked, definition = _lock(conn, namespace, name)
    if not locked.enabled:
        raise InvalidTransition(f"schedule {namespace}/{name} is disabled")
    if schedule_sync.fixed_delay(definition) is not None:
        raise InvalidInput("name", "a FixedDelay schedule has no timetable to backfill")
    found = definition.timetable(namespace).between(
        start - _TICK,
        end,
        occurrences.load_zone(definition.time_zone),
        limit=BACKFILL_COUNTED + 1,
    )
    if len(found) > MAX_BACKFILL:
        raise InvalidInput("end", _too_many(len(found), start, end))
    jobs = policies.backfill_jobs(namespace, definition, found, locked.state)
    created = store.run(conn, jobs_db.insert_schedule_jobs(jobs, now, tracing.capture()))
    report = BackfillReport(created=len(created), existing=len(found) - len(created))
    details = {
        "start": start.isoformat(),
        "end": end.isoformat(),
        "created": report.created,
        "existing": report.existing,
    }
    _record(conn, actor, "backfill", namespace, name, details, None, now)
    return report


def _too_many(count: int, start: datetime, end: datetime) -> str:
    counted = f"more than {BACKFILL_COUNTED:,}" if count > BACKFILL_COUNTED else f"{count:,}"
    return (
        f"{counted} occurrences from {start.isoformat()} to {end.isoformat()}; "
        f"at most {MAX_BACKFILL:,} in one call — split the range"
    )


TRIGGER = "trigger"


def trigger(
    conn: connections.Connection,
    namespace: str,
    name: str,
    actor: Actor,
    now: datetime | None,
    *,
    before: dict[str, Any] | None = None,
    details: Mapping[str, Any] | None = None,
) -> transitions.Outcome:
    """One job now, outside the timetable (no occurrence); works while suspended. The one
    path of every trigger: the App (and so ``tickwork trigger``), the console and the
    operator's run-now annotation.

    Idempotent by the actor's request id, decided under the schedule's row lock: a request id
    already recorded for this schedule (its ``trigger`` audit record, which retention never
    deletes) returns the earlier job and creates nothing, so concurrent callers with one
    request id, in any processes, get one job. The audit record holds ``details`` besides the
    job id, and the schedule's snapshots when ``before`` is given."""
    locked, definition = _lock(conn, namespace, name)
    target = f"schedule:{namespace}/{name}"
    if earlier := transitions.replayed(conn, TRIGGER, target, actor, None):
        return earlier
    if not locked.enabled:
        raise InvalidTransition(f"schedule {namespace}/{name} is disabled")
    job = policies.schedule_job(namespace, definition, None, locked.state)
    job_id = store.run(conn, jobs_db.insert_schedule_jobs([job], now, tracing.capture()))[0].id
    store.run(conn, schedules_db.record_job(namespace, name, job_id, None))
    recorded = {**(details or {}), "job_id": job_id}
    audit_id = _record(conn, actor, TRIGGER, namespace, name, recorded, before, now)
    return transitions.Outcome(
        TRIGGER,
        target,
        True,
        f"schedule {namespace}/{name} triggered: job {job_id}",
        audit_id,
        job_id,
    )
