"""Operations on ``tickwork.schedules`` (``db/sql/schedules.sql``; those that also read the jobs
table are in ``jobs.sql``): builders of :class:`store.Op` and the typed rows they return,
mapped from the columns by name. Executed with :func:`store.run` or :func:`store.arun` inside
the caller's transaction; many rows go in as parallel arrays, one statement each. The jobs of
schedules are created, counted and cancelled by :mod:`tickwork.db.jobs`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from tickwork.db.jobs import Key, carrier, template_columns
from tickwork.db.store import Op, Row, column, nothing
from tickwork.model import JobId, JobStatus, NewJob, TraceContext

_names = column("name")


# --- sync ---------------------------------------------------------------------------------


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
        lambda rows: [StoredSchedule(**row) for row in rows],
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
    return Op("schedule_insert_many", _write_params(namespace, writes, now), nothing)


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
    return Op("schedule_analyze", {}, nothing)


def notify_namespace(namespace: str) -> Op[None]:
    return Op("schedule_notify", {"namespace": namespace}, nothing)


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
    spec_key: str
    """The stored spec's content, hashed: equal specs, equal keys."""
    now: datetime
    due_floor: datetime
    """Its namespace's earliest due schedule at the claim (one waiting to retry included): no
    other due schedule of the namespace was earlier, so the next claim may start there."""


CLAIM_CANDIDATES = 4
"""A claim reads this many batches' worth of due schedules unlocked (shared by the namespaces
with any due) and locks one batch of them, skipping those other workers hold."""


def claim_due(
    namespaces: Sequence[str],
    limit: int,
    now: datetime | None,
    waits: Sequence[float] | None = None,
    floors: Sequence[datetime | None] | None = None,
) -> Op[list[DueSchedule]]:
    """Lock up to ``limit`` due schedules of ``namespaces``; ``waits`` (one per namespace,
    default none): seconds overdue before a namespace's schedules are claimed; ``floors``
    (one per namespace, default none): where its search for due schedules starts, a recent
    claim's ``due_floor`` (None: from the earliest)."""
    if floors is not None and len(floors) != len(namespaces):
        raise ValueError(f"floors: one per namespace ({len(namespaces)}), not {len(floors)}")
    return Op(
        "schedule_claim_due",
        {
            "namespaces": list(namespaces),
            "waits": _waits(namespaces, waits),
            "floors": list(floors) if floors is not None else [None] * len(namespaces),
            "limit": limit,
            "candidates": limit * CLAIM_CANDIDATES,
            "now": now,
        },
        lambda rows: [DueSchedule(**row) for row in rows],
        binary=True,
    )


@dataclass(frozen=True)
class StoredSpec:
    revision: int
    spec: dict[str, Any]


def get_specs(keys: Sequence[Key]) -> Op[dict[Key, StoredSpec]]:
    return Op(
        "schedule_specs",
        {"namespaces": [k[0] for k in keys], "names": [k[1] for k in keys]},
        lambda rows: {
            (r["namespace"], r["name"]): StoredSpec(r["revision"], r["spec"]) for r in rows
        },
    )


@dataclass(frozen=True)
class Outcome:
    """How schedules that fire alike fire: the jobs they get (``job``'s fields, bar the
    schedule's name, for each of ``occurrences``: (occurrence, run_at)) and where they go next,
    with and without a job created (FixedDelay waits for the job it created)."""

    job: NewJob | None
    """None when no occurrence gets a job."""
    occurrences: Sequence[tuple[datetime, datetime]]
    next_run_at: datetime | None
    missed_before: datetime | None
    next_run_at_created: datetime | None
    missed_before_created: datetime | None
    skipped: int


@dataclass(frozen=True)
class Fired:
    """What :func:`fire` did: jobs created by (outcome index, occurrence), and the schedules not
    at their revision (nothing of the batch should then be kept)."""

    created: dict[tuple[int, datetime], int]
    stale: list[Key]


def fire(
    schedules: Sequence[tuple[str, str, int, int]],
    outcomes: Sequence[Outcome],
    trace_context: TraceContext | None,
) -> Op[Fired]:
    """Create the jobs of claimed ``schedules`` ((namespace, name, revision, index into
    ``outcomes``)) and move them to their next run; the jobs are created in ``trace_context``."""
    jobs = [outcome.job or _NO_JOB for outcome in outcomes]
    numbered = [(i, o) for i, outcome in enumerate(outcomes) for o in outcome.occurrences]
    return Op(
        "schedule_fire",
        {
            "namespaces": [s[0] for s in schedules],
            "names": [s[1] for s in schedules],
            "revisions": [s[2] for s in schedules],
            "outcomes": [s[3] + 1 for s in schedules],  # WITH ORDINALITY counts from 1
            **template_columns(jobs),
            "skipped": [o.skipped for o in outcomes],
            "next_run_ats": [o.next_run_at for o in outcomes],
            "missed_befores": [o.missed_before for o in outcomes],
            "next_run_ats_created": [o.next_run_at_created for o in outcomes],
            "missed_befores_created": [o.missed_before_created for o in outcomes],
            "occurrence_outcomes": [i + 1 for i, _ in numbered],
            "occurrences": [o[0] for _, o in numbered],
            "run_ats": [o[1] for _, o in numbered],
            "trace_context": carrier(trace_context),
        },
        _fired,
        binary=True,
    )


_NO_JOB = NewJob(kind="", queue="")
"""The job fields of an outcome without jobs (never inserted: it has no occurrences)."""


def _fired(rows: list[Row]) -> Fired:
    created: dict[tuple[int, datetime], int] = {}
    stale: list[Key] = []
    for r in rows:
        if r["outcome"] is None:
            stale.append((r["namespace"], r["name"]))
        else:
            created[r["outcome"] - 1, r["occurrence_at"]] = r["jobs"]
    return Fired(created, stale)


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
        lambda rows: {
            (r["namespace"], r["name"]): Retry(r["firing_failures"], r["firing_retry_at"])
            for r in rows
        },
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


UPCOMING_ROWS = 100_000
"""Rows a warming read looks at per namespace (the specs it lists are among them)."""


def upcoming(
    namespaces: Sequence[str], after: datetime | None, before: datetime, limit: int
) -> Op[list[tuple[str, str, int, str]]]:
    """(namespace, name, revision, spec key) of one schedule per distinct spec of each
    namespace, of those due after ``after`` (None: any time) and no later than ``before``
    (at most ``limit``), earliest first."""
    return Op(
        "schedule_upcoming",
        {
            "namespaces": list(namespaces),
            "after": after,
            "before": before,
            "limit": limit,
            "rows": UPCOMING_ROWS,
        },
        lambda rows: [(r["namespace"], r["name"], r["revision"], r["spec_key"]) for r in rows],
    )


def next_due(namespaces: Sequence[str], now: datetime | None) -> Op[NextDue]:
    return Op(
        "schedule_next_due",
        {"namespaces": list(namespaces), "now": now},
        lambda rows: NextDue(**rows[0]),
    )


def _waits(namespaces: Sequence[str], waits: Sequence[float] | None) -> list[float]:
    if waits is None:
        return [0.0] * len(namespaces)
    if len(waits) != len(namespaces):
        raise ValueError(f"waits: one per namespace ({len(namespaces)}), not {len(waits)}")
    return [float(w) for w in waits]


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
        lambda rows: LockedSchedule(**rows[0]) if rows else None,
    )


def lock_snapshot(namespace: str, name: str) -> Op[dict[str, Any] | None]:
    """The schedule's snapshot (the fields an audit record keeps), locked; None if there is
    no such schedule."""
    return Op(
        "schedule_lock_snapshot",
        {"namespace": namespace, "name": name},
        lambda rows: rows[0]["snapshot"] if rows else None,
    )


def record_job(
    namespace: str, name: str, job_id: JobId, occurrence_at: datetime | None
) -> Op[None]:
    return Op(
        "schedule_record_job",
        {"namespace": namespace, "name": name, "job_id": job_id, "occurrence_at": occurrence_at},
        nothing,
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
    dead_streak: int = 0
    """Consecutive occurrences that ended dead (a success resets it)."""
    dead_streak_job_id: JobId | None = None
    """The first job of that streak."""
    failures_suspended_at: datetime | None = None
    """When spec.suspendAfterFailures suspended it (None: it did not, or it was resumed)."""
    failures_suspended_job_id: JobId | None = None
    """The job whose death made the count reach spec.suspendAfterFailures."""
    deadlines_missed: int = 0
    """Occurrences that missed their spec.deadline, ever."""
    late_occurrence_at: datetime | None = None
    """The latest occurrence found late, its deadline, its job, and when it was found."""
    late_deadline_at: datetime | None = None
    late_job_id: JobId | None = None
    late_at: datetime | None = None

    @property
    def late(self) -> bool:
        """An occurrence missed its deadline and no job of the schedule succeeded after that
        deadline (the next success clears it)."""
        return self.late_deadline_at is not None and (
            self.last_success_at is None or self.last_success_at <= self.late_deadline_at
        )


def _schedule_row(row: Row) -> ScheduleRow:
    status = row["last_job_status"]
    return ScheduleRow(**{**row, "last_job_status": None if status is None else JobStatus(status)})


def list_schedules(namespace: str | None, name: str | None = None) -> Op[list[ScheduleRow]]:
    return Op(
        "schedule_list",
        {"namespace": namespace, "name": name},
        lambda rows: [_schedule_row(row) for row in rows],
    )


# --- fleet gauges ---------------------------------------------------------------------------


@dataclass(frozen=True)
class NamespaceSchedules:
    namespace: str
    enabled: int
    """Enabled and not suspended."""
    suspended: int
    disabled: int
    overdue: int
    workers: int
    """Live workers offering the namespace."""


def gauge_schedules(
    overdue_seconds: float, ttl_seconds: float, now: datetime | None
) -> Op[list[NamespaceSchedules]]:
    return Op(
        "schedule_gauge",
        {"overdue_seconds": overdue_seconds, "ttl_seconds": ttl_seconds, "now": now},
        lambda rows: [
            NamespaceSchedules(r["namespace"], *(int(r[c]) for c in _GAUGE_COUNTS)) for r in rows
        ],
    )


_GAUGE_COUNTS = ("enabled", "suspended", "disabled", "overdue", "workers")


def resume_namespace_schedules(namespace: str, now: datetime | None) -> Op[int]:
    """Mark the due schedules of a resumed namespace as having missed everything before now
    (their misfire policy decides); the number changed."""
    return Op(
        "schedule_resume_namespace", {"namespace": namespace, "now": now}, lambda rows: len(rows)
    )
