"""Desired-state sync: make a namespace's stored schedules match a list of definitions.

Like a migration, all or nothing: every definition is validated first, then one transaction
locks the namespace (checking its owner), creates what is new, updates what really changed
(the revision bumps; the next run is recomputed), leaves the rest alone (same revision, same
next run) and, when pruning, disables what is no longer listed. Re-listing a disabled
schedule enables it again, as a change.

Pruning is how a schedule is deleted (the operator's finalizer syncs without the deleted
object): in the same transaction as the disable, the pending jobs of each disabled schedule
whose stored spec says ``pendingJobsOnDelete: Cancel`` (the default, also for specs stored
before the field existed) are cancelled; running ones finish. Each disabled schedule gets an
audit record by the syncing owner with what became of its pending jobs, and the cancelled
jobs count as cancelled in ``tickwork_jobs_completed_total``. Re-enabling a schedule brings
no cancelled job back; an update (a revision change) cancels nothing.

Next runs: a new (or re-enabled) schedule starts with its first occurrence after now, with no
backlog. A changed one keeps an occurrence that was already due but not fired yet. Resuming
a suspended schedule marks everything before now as missed, so its misfire policy decides
what the suspended stretch still fires.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from tickwork import metrics
from tickwork.db import audit as audit_db
from tickwork.db import connections, store
from tickwork.db import jobs as jobs_db
from tickwork.db import namespaces as namespaces_db
from tickwork.db import schedules as db
from tickwork.errors import InvalidInput, NamespaceOwned
from tickwork.model import Actor
from tickwork.schedules import calendars, occurrences
from tickwork.schedules.checks import DefinitionError
from tickwork.schedules.definition import ScheduleDefinition, validate_all
from tickwork.schedules.options import IntervalMode, PendingJobsOnDelete
from tickwork.schedules.stored import stored_pending_jobs_on_delete

MAX_NAMESPACE_LENGTH = 253

ANALYZE_AFTER = 1000
"""A sync creating this many schedules refreshes the table's statistics."""

AUDITED_JOB_IDS = 100
"""The audit record of a disabled schedule lists at most this many cancelled job ids (its
count is exact)."""

_TICK = timedelta(microseconds=1)


@dataclass(frozen=True)
class SyncReport:
    """Names of the schedules a sync created, updated, left unchanged and disabled, and how
    many pending jobs it cancelled per disabled schedule (those with none are left out)."""

    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    disabled: list[str] = field(default_factory=list)
    cancelled: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Plan:
    report: SyncReport
    creates: list[db.ScheduleWrite]
    updates: list[db.ScheduleWrite]
    keeps: frozenset[str] = frozenset()
    """The disabled schedules whose stored spec says ``pendingJobsOnDelete: Keep``."""


def check_namespace(namespace: str) -> None:
    if not namespace or namespace != namespace.strip():
        raise InvalidInput(
            "namespace", f"must be a non-empty name without spaces, not {namespace!r}"
        )
    if len(namespace) > MAX_NAMESPACE_LENGTH:
        raise InvalidInput("namespace", f"must be at most {MAX_NAMESPACE_LENGTH} characters")


def fixed_delay(definition: ScheduleDefinition) -> timedelta | None:
    """``every`` of a FixedDelay schedule, else None."""
    if definition.interval_mode is IntervalMode.FIXED_DELAY:
        return definition.every
    return None


def first_run(namespace: str, definition: ScheduleDefinition, now: datetime) -> datetime | None:
    """The first occurrence after ``now`` (FixedDelay: ``every`` from now, moved past what
    the calendar excludes); None when the calendar has ended."""
    delay = fixed_delay(definition)
    if delay is not None:
        zone = occurrences.load_zone(definition.time_zone)
        due = now + delay
        return calendars.Calendared(
            occurrences.FixedRate(delay, anchor=due), definition.calendar(namespace)
        ).next_after(due - _TICK, zone)
    zone = occurrences.load_zone(definition.time_zone)
    return definition.timetable(namespace).next_after(now, zone)


def _next_run(
    namespace: str, definition: ScheduleDefinition, stored: db.StoredSchedule, now: datetime
) -> datetime | None:
    """The next run of a changed schedule: a due occurrence not fired yet stays due."""
    if not stored.enabled:
        return first_run(namespace, definition, now)
    delay = fixed_delay(definition)
    if delay is not None:
        if stored.next_run_at is None:
            # Its job is open: the next run is set when it finishes.
            return None if stored.last_job_open else now + delay
        return min(stored.next_run_at, now + delay)
    if stored.next_run_at is None or stored.next_run_at > now:
        return first_run(namespace, definition, now)
    zone = occurrences.load_zone(definition.time_zone)
    return definition.timetable(namespace).next_after(stored.next_run_at - _TICK, zone)


def _stored_definition(stored: db.StoredSchedule) -> ScheduleDefinition | None:
    try:
        return ScheduleDefinition.from_spec(stored.name, stored.spec)
    except DefinitionError:
        return None


def _job_changed(old: ScheduleDefinition | None, new: ScheduleDefinition) -> bool:
    """A new job kind or payload drops the carried state: the template speaks again."""
    return old is None or (old.job.kind, old.job.payload) != (new.job.kind, new.job.payload)


def plan(
    namespace: str,
    definitions: Sequence[ScheduleDefinition],
    stored: Sequence[db.StoredSchedule],
    *,
    prune: bool,
    now: datetime,
    protect: Collection[str] = frozenset(),
) -> Plan:
    """What a sync writes, given the stored rows (pure). Pruning spares the names in
    ``protect`` (the operator's Schedules whose current spec is invalid keep their last
    valid definition)."""
    report = SyncReport()
    creates: list[db.ScheduleWrite] = []
    updates: list[db.ScheduleWrite] = []
    by_name = {row.name: row for row in stored}
    for definition in definitions:
        row = by_name.get(definition.name)
        if row is None:
            report.created.append(definition.name)
            creates.append(
                db.ScheduleWrite(
                    name=definition.name,
                    revision=1,
                    suspended=definition.suspend,
                    spec=definition.to_spec(),
                    fixed_delay=fixed_delay(definition),
                    next_run_at=first_run(namespace, definition, now),
                    missed_before=None,
                )
            )
            continue
        old = _stored_definition(row)
        if row.enabled and old == definition:
            report.unchanged.append(definition.name)
            continue
        report.updated.append(definition.name)
        missed_before = row.missed_before if row.enabled else None
        if row.enabled and row.suspended and not definition.suspend:
            missed_before = now  # resumed: the suspended stretch is missed
        updates.append(
            db.ScheduleWrite(
                name=definition.name,
                revision=row.revision + 1,
                suspended=definition.suspend,
                spec=definition.to_spec(),
                fixed_delay=fixed_delay(definition),
                next_run_at=_next_run(namespace, definition, row, now),
                missed_before=missed_before,
                reset_state=_job_changed(old, definition),
            )
        )
    keeps: set[str] = set()
    if prune:
        listed = {d.name for d in definitions}
        for row in stored:
            if row.enabled and row.name not in listed and row.name not in protect:
                report.disabled.append(row.name)
                if stored_pending_jobs_on_delete(row.spec) is PendingJobsOnDelete.KEEP:
                    keeps.add(row.name)
    return Plan(report, creates, updates, frozenset(keeps))


def _disable(
    conn: connections.Connection,
    namespace: str,
    result: Plan,
    owner: str,
    now: datetime | None,
) -> list[jobs_db.CancelledJob]:
    """Disable the pruned schedules, cancel the pending jobs of those that do not keep them,
    and audit each one; returns the jobs cancelled."""
    disabled = result.report.disabled
    store.run(conn, db.disable_schedules(namespace, disabled, now))
    cancelling = [name for name in disabled if name not in result.keeps]
    cancelled = (
        store.run(conn, jobs_db.cancel_pending_jobs(namespace, cancelling, now))
        if cancelling
        else []
    )
    ids: dict[str, list[int]] = {}
    for job in cancelled:
        ids.setdefault(job.name, []).append(job.id)
    details = {
        name: {
            "reason": "pruned",
            "pending_jobs_on_delete": str(
                PendingJobsOnDelete.KEEP if name in result.keeps else PendingJobsOnDelete.CANCEL
            ),
            "cancelled_jobs": len(ids.get(name, ())),
            "cancelled_job_ids": ids.get(name, [])[:AUDITED_JOB_IDS],
        }
        for name in disabled
    }
    store.run(conn, audit_db.audit_schedules_disabled(namespace, Actor(owner), details, now))
    result.report.cancelled.update((name, len(found)) for name, found in ids.items())
    return cancelled


def _count_cancelled(namespace: str, cancelled: Sequence[jobs_db.CancelledJob]) -> None:
    counts: dict[tuple[str, str], int] = {}
    for job in cancelled:
        counts[job.queue, job.kind] = counts.get((job.queue, job.kind), 0) + 1
    for (queue, kind), count in counts.items():
        metrics.JOBS_COMPLETED.labels(namespace, queue, kind, "cancelled").inc(count)


def sync(
    conn: connections.Connection,
    namespace: str,
    definitions: Sequence[ScheduleDefinition],
    *,
    prune: bool,
    owner: str,
    take_over: bool,
    dry_run: bool,
    now: datetime | None,
    protect: Collection[str] = frozenset(),
) -> SyncReport:
    """Validate, then apply :func:`plan` in one transaction on ``conn`` (rolled back when
    ``dry_run``). Raises DefinitionError or NamespaceOwned before anything is written.
    Pruning spares the names in ``protect``. The jobs it cancelled are counted once its
    transaction (a savepoint, when the caller's is open) has succeeded."""
    check_namespace(namespace)
    if not owner.strip():
        raise InvalidInput("owner", "must not be empty")
    validate_all(namespace, definitions)
    cancelled: list[jobs_db.CancelledJob] = []
    with conn.transaction(force_rollback=dry_run):
        lock = store.run(conn, namespaces_db.lock_namespace(namespace, owner, now))
        if lock.owner != owner:
            if not take_over:
                raise NamespaceOwned(
                    f"namespace {namespace!r} is owned by {lock.owner!r}, not {owner!r}; "
                    f"sync with take_over (--take-over) to make {owner!r} its owner"
                )
            store.run(conn, namespaces_db.take_over_namespace(namespace, owner, now))
        stored = store.run(conn, db.lock_schedules(namespace))
        result = plan(namespace, definitions, stored, prune=prune, now=lock.now, protect=protect)
        if result.creates:
            store.run(conn, db.insert_schedules(namespace, result.creates, now))
            if len(result.creates) >= ANALYZE_AFTER:
                store.run(conn, db.analyze())
        if result.updates:
            updated = store.run(conn, db.update_schedules(namespace, result.updates, now))
            if len(updated) != len(result.updates):
                raise AssertionError("schedule rows changed while locked")
        if result.report.disabled:
            cancelled = _disable(conn, namespace, result, owner, now)
        report = result.report
        if report.created or report.updated or report.disabled:
            store.run(conn, db.notify_namespace(namespace))
    if not dry_run:
        _count_cancelled(namespace, cancelled)
    return report
