"""Operations on schedules (``db/sql/schedules.sql``): builders of :class:`store.Op` and the
typed rows they return. Executed with :func:`store.run` or :func:`store.arun` inside the
caller's transaction; many rows go in as parallel arrays, one statement each."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from tickwork.db.store import Op, Row, to_json
from tickwork.model import JobId, JobStatus, NewScheduleJob, OpenJobs


def _names(rows: list[Row]) -> list[str]:
    return [row[0] for row in rows]


def _nothing(rows: list[Row]) -> None:
    return None


def _optional_json(field: str, value: Any) -> Jsonb | None:
    return None if value is None else to_json(field, value)


# --- sync ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class NamespaceLock:
    owner: str
    now: datetime


def lock_namespace(namespace: str, owner: str, now: datetime | None) -> Op[NamespaceLock]:
    """Create the namespace (owned by ``owner``) if new, and lock it for the transaction."""
    return Op(
        "schedule_namespace_lock",
        {"namespace": namespace, "owner": owner, "now": now},
        lambda rows: NamespaceLock(rows[0][0], rows[0][1]),
    )


def take_over_namespace(namespace: str, owner: str, now: datetime | None) -> Op[None]:
    return Op(
        "schedule_namespace_take_over",
        {"namespace": namespace, "owner": owner, "now": now},
        _nothing,
    )


@dataclass(frozen=True)
class StoredSchedule:
    """A schedule as sync finds it."""

    name: str
    revision: int
    enabled: bool
    suspended: bool
    spec: dict[str, Any]
    next_run_at: datetime | None
    missed_before: datetime | None
    last_job_open: bool


def lock_schedules(namespace: str) -> Op[list[StoredSchedule]]:
    """Every schedule of ``namespace``, locked in name order."""
    return Op(
        "schedule_lock_namespace",
        {"namespace": namespace},
        lambda rows: [StoredSchedule(*row) for row in rows],
    )


@dataclass(frozen=True)
class ScheduleWrite:
    """A created or updated schedule row, as sync computed it."""

    name: str
    revision: int
    suspended: bool
    spec: dict[str, Any]
    fixed_delay: timedelta | None
    next_run_at: datetime | None
    missed_before: datetime | None
    reset_state: bool = False


def _write_params(
    namespace: str, writes: Sequence[ScheduleWrite], now: datetime | None
) -> dict[str, Any]:
    return {
        "namespace": namespace,
        "names": [w.name for w in writes],
        "revisions": [w.revision for w in writes],
        "suspended": [w.suspended for w in writes],
        "specs": [Jsonb(w.spec) for w in writes],
        "fixed_delays": [w.fixed_delay for w in writes],
        "next_run_ats": [w.next_run_at for w in writes],
        "missed_befores": [w.missed_before for w in writes],
        "now": now,
    }


def insert_schedules(
    namespace: str, writes: Sequence[ScheduleWrite], now: datetime | None
) -> Op[None]:
    return Op("schedule_insert_many", _write_params(namespace, writes, now), _nothing)


def update_schedules(
    namespace: str, writes: Sequence[ScheduleWrite], now: datetime | None
) -> Op[list[str]]:
    """Apply ``writes`` to rows still at ``revision - 1``; returns the names updated."""
    params = _write_params(namespace, writes, now)
    params["reset_states"] = [w.reset_state for w in writes]
    return Op("schedule_update_many", params, _names)


def disable_schedules(namespace: str, names: Sequence[str], now: datetime | None) -> Op[list[str]]:
    return Op(
        "schedule_disable_many",
        {"namespace": namespace, "names": list(names), "now": now},
        _names,
    )


def analyze() -> Op[None]:
    return Op("schedule_analyze", {}, _nothing)


def notify_namespace(namespace: str) -> Op[None]:
    return Op("schedule_notify", {"namespace": namespace}, _nothing)


# --- firing -------------------------------------------------------------------------------


@dataclass(frozen=True)
class DueSchedule:
    """A claimed due schedule; ``now`` is the instant the pass works at."""

    namespace: str
    name: str
    revision: int
    next_run_at: datetime
    missed_before: datetime | None
    state: Any
    failures: int
    """Consecutive failed firings before this one."""
    now: datetime


def claim_due(namespaces: Sequence[str], limit: int, now: datetime | None) -> Op[list[DueSchedule]]:
    return Op(
        "schedule_claim_due",
        {"namespaces": list(namespaces), "limit": limit, "now": now},
        lambda rows: [DueSchedule(*row) for row in rows],
        binary=True,
    )


Key = tuple[str, str]
"""(namespace, name) of a schedule."""


@dataclass(frozen=True)
class StoredSpec:
    revision: int
    spec: dict[str, Any]


def _keys(keys: Sequence[Key]) -> dict[str, Any]:
    return {"namespaces": [k[0] for k in keys], "names": [k[1] for k in keys]}


def get_specs(keys: Sequence[Key]) -> Op[dict[Key, StoredSpec]]:
    return Op(
        "schedule_specs",
        _keys(keys),
        lambda rows: {(r[0], r[1]): StoredSpec(r[2], r[3]) for r in rows},
    )


def open_jobs(keys: Sequence[Key]) -> Op[dict[Key, OpenJobs]]:
    """Schedules without open jobs are absent from the result."""
    return Op(
        "schedule_open_jobs",
        _keys(keys),
        lambda rows: {(r[0], r[1]): OpenJobs(r[2], r[3]) for r in rows},
    )


def _count_by_key(rows: list[Row]) -> dict[Key, int]:
    counts: dict[Key, int] = {}
    for namespace, name in rows:
        counts[namespace, name] = counts.get((namespace, name), 0) + 1
    return counts


def cancel_open_jobs(keys: Sequence[Key], now: datetime | None) -> Op[dict[Key, int]]:
    """Cancel the open jobs of these schedules that nobody else holds; counts per schedule."""
    params = _keys(keys)
    params["now"] = now
    return Op("schedule_cancel_open_jobs", params, _count_by_key)


@dataclass(frozen=True)
class CreatedJob:
    id: JobId
    namespace: str
    name: str
    occurrence_at: datetime | None


def insert_jobs(jobs: Sequence[NewScheduleJob], now: datetime | None) -> Op[list[CreatedJob]]:
    """One statement for all ``jobs``; an occurrence that has a job already is skipped.
    Payloads come from validated definitions or stored state: plain JSON already."""
    return Op(
        "schedule_insert_jobs",
        {
            "kinds": [j.kind for j in jobs],
            "queues": [j.queue for j in jobs],
            "payloads": [Jsonb(j.payload) for j in jobs],
            "priorities": [j.priority for j in jobs],
            "run_ats": [j.run_at for j in jobs],
            "max_attempts": [j.max_attempts for j in jobs],
            "retry_bases": [j.retry.base if j.retry else None for j in jobs],
            "retry_rates": [j.retry.rate if j.retry else None for j in jobs],
            "retry_maxes": [j.retry.max if j.retry else None for j in jobs],
            "timeouts": [j.timeout for j in jobs],
            "concurrency_keys": [j.concurrency_key for j in jobs],
            "namespaces": [j.namespace for j in jobs],
            "names": [j.name for j in jobs],
            "occurrences": [j.occurrence_at for j in jobs],
            "now": now,
        },
        lambda rows: [CreatedJob(JobId(r[0]), r[1], r[2], r[3]) for r in rows],
        binary=True,
    )


@dataclass(frozen=True)
class Advance:
    """Where a firing pass leaves one schedule."""

    namespace: str
    name: str
    revision: int
    next_run_at: datetime | None
    missed_before: datetime | None
    last_occurrence_at: datetime | None
    skipped: int
    last_job_id: JobId | None


def advance(advances: Sequence[Advance]) -> Op[set[Key]]:
    """Apply ``advances`` to rows still at their revision; returns the schedules updated."""
    return Op(
        "schedule_advance",
        {
            "namespaces": [a.namespace for a in advances],
            "names": [a.name for a in advances],
            "revisions": [a.revision for a in advances],
            "next_run_ats": [a.next_run_at for a in advances],
            "missed_befores": [a.missed_before for a in advances],
            "last_occurrences": [a.last_occurrence_at for a in advances],
            "skipped": [a.skipped for a in advances],
            "last_job_ids": [a.last_job_id for a in advances],
        },
        lambda rows: {(r[0], r[1]) for r in rows},
        binary=True,
    )


@dataclass(frozen=True)
class Failure:
    """A schedule whose firing failed, and why (one line, naming the field where known)."""

    namespace: str
    name: str
    revision: int
    error: str


@dataclass(frozen=True)
class Retry:
    """Where recording a failure left the schedule."""

    failures: int
    """Consecutive failed firings, this one included."""
    retry_at: datetime


def record_failures(
    failures: Sequence[Failure], first: timedelta, most: timedelta, now: datetime | None
) -> Op[dict[Key, Retry]]:
    """Set these schedules aside (rows still at their revision): each keeps its next run and
    is claimed again ``first`` later, doubling per consecutive failure up to ``most``."""
    return Op(
        "schedule_record_failures",
        {
            "namespaces": [f.namespace for f in failures],
            "names": [f.name for f in failures],
            "revisions": [f.revision for f in failures],
            "errors": [f.error for f in failures],
            "first_seconds": first.total_seconds(),
            "max_seconds": most.total_seconds(),
            "now": now,
        },
        lambda rows: {(r[0], r[1]): Retry(r[2], r[3]) for r in rows},
        binary=True,
    )


ROW_ERRORS: tuple[type[Exception], ...] = (
    psycopg.DataError,
    psycopg.IntegrityError,
    psycopg.ProgrammingError,
    psycopg.InternalError,
    psycopg.NotSupportedError,
)
"""What PostgreSQL raises when it refuses the values of a statement (out of range, a check or
a trigger): an error of the rows written, not of the connection or the server, whose errors
(``connections.ConnectionLost``: lost connection, cancelled query, deadlock) stay fatal."""


def refusal(exc: Exception) -> str:
    """One line naming what PostgreSQL refused: its message, the SQLSTATE, and the column,
    constraint or function involved when it says."""
    if not isinstance(exc, psycopg.Error):
        return f"{type(exc).__name__}: {exc}"
    diag = exc.diag
    message = diag.message_primary or str(exc).splitlines()[0]
    details = [f"sqlstate {exc.sqlstate}"] if exc.sqlstate else []
    for label, value in (
        ("table", diag.table_name),
        ("column", diag.column_name),
        ("constraint", diag.constraint_name),
        ("in", (diag.context or "").splitlines()[0] if diag.context else None),
    ):
        if value:
            details.append(f"{label} {value}")
    return f"{message} ({', '.join(details)})" if details else message


@dataclass(frozen=True)
class NextDue:
    now: datetime
    next_run_at: datetime | None


def upcoming(
    namespaces: Sequence[str], before: datetime, limit: int
) -> Op[list[tuple[str, str, int]]]:
    """(namespace, name, revision) of the schedules due before ``before``, earliest first."""
    return Op(
        "schedule_upcoming",
        {"namespaces": list(namespaces), "before": before, "limit": limit},
        lambda rows: [(r[0], r[1], r[2]) for r in rows],
    )


def next_due(namespaces: Sequence[str], now: datetime | None) -> Op[NextDue]:
    return Op(
        "schedule_next_due",
        {"namespaces": list(namespaces), "now": now},
        lambda rows: NextDue(rows[0][0], rows[0][1]),
    )


# --- one schedule -------------------------------------------------------------------------


@dataclass(frozen=True)
class LockedSchedule:
    revision: int
    enabled: bool
    spec: dict[str, Any]
    state: Any


def lock_schedule(namespace: str, name: str) -> Op[LockedSchedule | None]:
    return Op(
        "schedule_lock_one",
        {"namespace": namespace, "name": name},
        lambda rows: LockedSchedule(*rows[0]) if rows else None,
    )


def record_job(
    namespace: str, name: str, job_id: JobId, occurrence_at: datetime | None
) -> Op[None]:
    return Op(
        "schedule_record_job",
        {"namespace": namespace, "name": name, "job_id": job_id, "occurrence_at": occurrence_at},
        _nothing,
    )


# --- job outcomes ---------------------------------------------------------------------------


def jobs_succeeded(results: dict[JobId, Any]) -> Op[None]:
    """Record successes of schedule jobs: ``results`` maps each job id to its return value
    (``None``: nothing to carry). Values that are not JSON raise InvalidInput."""
    return Op(
        "schedule_jobs_succeeded",
        {
            "ids": list(results),
            "states": [_optional_json("state", v) for v in results.values()],
        },
        _nothing,
    )


# --- listing --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScheduleRow:
    """One schedule as operators see it (``tickwork schedules``, the operator's status)."""

    namespace: str
    name: str
    revision: int
    enabled: bool
    suspend: bool
    schedule: str | None
    every: str | None
    time_zone: str
    next_run_at: datetime | None
    last_occurrence_at: datetime | None
    last_job_id: JobId | None
    last_job_status: JobStatus | None
    last_success_at: datetime | None
    skipped_occurrences: int
    owner: str
    spec: dict[str, Any]
    state: Any
    created_at: datetime
    updated_at: datetime
    firing_error: str | None
    """Why the last firing failed (None: it worked); the schedule waits for a retry."""
    firing_failures: int
    """Consecutive failed firings."""
    firing_retry_at: datetime | None
    """A set-aside schedule is not fired before this instant."""


def _schedule_row(row: Row) -> ScheduleRow:
    values = list(row)
    values[11] = None if row[11] is None else JobStatus(row[11])
    return ScheduleRow(*values)


def list_schedules(namespace: str | None, name: str | None = None) -> Op[list[ScheduleRow]]:
    return Op(
        "schedule_list",
        {"namespace": namespace, "name": name},
        lambda rows: [_schedule_row(row) for row in rows],
    )


# --- the operator ---------------------------------------------------------------------------


@dataclass(frozen=True)
class OpenJob:
    """A pending or running job of a schedule (the operator's ``status.active``)."""

    namespace: str
    name: str
    id: JobId
    status: JobStatus
    occurrence_at: datetime | None


def open_job_list(namespaces: Sequence[str], limit: int) -> Op[list[OpenJob]]:
    """Pending and running schedule jobs of ``namespaces`` (at most ``limit``), by schedule."""
    return Op(
        "schedule_open_job_list",
        {"namespaces": list(namespaces), "limit": limit},
        lambda rows: [OpenJob(r[0], r[1], r[2], JobStatus(r[3]), r[4]) for r in rows],
    )
