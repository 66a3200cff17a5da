"""The admin console's read models: page-shaped rows that join several tables (a worker with
its running jobs, a schedule with its last job and failure, a namespace with its counts) or
aggregate one for a page (queues). They stay together here, on the read side,
because each serves one page of the console and is shaped by it, not by a table; their SQL is
in ``jobs.sql`` when it reads the jobs table (as every query on it is), else in ``admin.sql``.
Mapped from the columns by name. Reads are bounded (a LIMIT, keyset pages). The console's
writes are the table modules' (``jobs``, ``schedules``, ``audit``); what it counts of ended
jobs (charts, totals) comes from ``job_counts``.

Reads take a ``scope``: the schedule namespaces the caller may see (None: all). Scoped, they
count and list only jobs of those namespaces' schedules (never jobs enqueued outside any
schedule), those namespaces and their schedules, the workers that fire them (with only those
namespaces named), and the audit records of those jobs and schedules."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tickwork.db import job_counts
from tickwork.db.store import Op, Row
from tickwork.model import JobId, JobStatus


def _status(value: str | None) -> JobStatus | None:
    return None if value is None else JobStatus(value)


Scope = Collection[str] | None
"""Schedule namespaces a reader may see; None: every one."""


def _scope(scope: Scope) -> list[str] | None:
    return None if scope is None else sorted(scope)


def read_limit(milliseconds: int) -> Op[None]:
    """Bound every later statement of the transaction to ``milliseconds``."""
    return Op("admin_read_limit", {"milliseconds": milliseconds}, lambda rows: None)


# --- overview -------------------------------------------------------------------------------


@dataclass(frozen=True)
class WorkerRow:
    name: str
    queues: list[str]
    kinds: list[str]
    namespaces: list[str]
    concurrency: int
    host: str
    started_at: datetime
    last_seen_at: datetime
    alive: bool
    """Seen within the worker time-to-live."""
    stale: bool
    """Not seen for two of its heartbeat intervals (stopped, or cut off)."""
    running: int


def workers(
    ttl_seconds: float, limit: int, now: datetime | None, scope: Scope
) -> Op[list[WorkerRow]]:
    return Op(
        "admin_workers",
        {"ttl_seconds": ttl_seconds, "limit": limit, "now": now, "scope": _scope(scope)},
        lambda rows: [WorkerRow(**row) for row in rows],
    )


@dataclass(frozen=True)
class QueueRow:
    queue: str
    due: int
    """Available and due: the backlog."""
    later: int
    """Available, due later."""
    running: int
    succeeded: int
    """Finished in the window."""
    failed: int
    """Died in the window."""
    dead: int


_QUEUE_COUNTS = ("due", "later", "running", "succeeded", "failed", "dead")


def queues(
    window_seconds: float, limit: int, now: datetime | None, scope: Scope
) -> Op[list[QueueRow]]:
    return Op(
        "job_queues",
        {"window_seconds": window_seconds, "limit": limit, "now": now, "scope": _scope(scope)},
        lambda rows: [
            QueueRow(row["queue"], *(int(row[c]) for c in _QUEUE_COUNTS)) for row in rows
        ],
    )


@dataclass(frozen=True)
class QueueWait:
    """The waiting jobs (available and due) of a queue, of one schedule namespace or of all."""

    queue: str
    namespace: str | None
    """None: of jobs enqueued outside any schedule, or (``by_queue``) of the whole queue."""
    by_queue: bool
    """The queue's total over the namespaces the reader may see."""
    waiting: int
    oldest_wait_seconds: float
    """Now less the ``run_at`` of the oldest waiting job."""


def queue_waits(limit: int, now: datetime | None, scope: Scope) -> Op[list[QueueWait]]:
    """Per queue, its total first, then per schedule namespace (no namespace last)."""
    return Op(
        "job_queue_waits",
        {"limit": limit, "now": now, "scope": _scope(scope)},
        lambda rows: [
            QueueWait(
                queue=row["queue"],
                namespace=row["namespace"],
                by_queue=row["by_queue"],
                waiting=int(row["waiting"]),
                oldest_wait_seconds=float(row["oldest_wait_seconds"]),
            )
            for row in rows
        ],
    )


@dataclass(frozen=True)
class Totals:
    dead_jobs: int
    failing_jobs: int
    skipped_occurrences: int
    enabled_schedules: int
    namespaces: int
    now: datetime


def totals(now: datetime | None, scope: Scope) -> Op[Totals]:
    return Op(
        "admin_totals",
        {"now": now, "scope": _scope(scope)},
        lambda rows: Totals(
            dead_jobs=int(rows[0]["dead_jobs"]),
            failing_jobs=int(rows[0]["failing_jobs"]),
            skipped_occurrences=int(rows[0]["skipped_occurrences"]),
            enabled_schedules=int(rows[0]["enabled_schedules"]),
            namespaces=int(rows[0]["namespaces"]),
            now=rows[0]["now"],
        ),
    )


# --- schedules ------------------------------------------------------------------------------


@dataclass(frozen=True)
class NamespaceRow:
    namespace: str
    owner: str
    schedules: int
    enabled: int
    suspended: int
    skipped_occurrences: int
    failing: int
    """Enabled schedules set aside by a firing error."""
    served: bool
    """A live worker offers (fires) this namespace."""


def _namespace(row: Row) -> NamespaceRow:
    return NamespaceRow(
        row["namespace"],
        row["owner"],
        int(row["schedules"]),
        int(row["enabled"]),
        int(row["suspended"]),
        int(row["skipped_occurrences"]),
        int(row["failing"]),
        row["served"],
    )


def namespaces(
    namespace: str | None, ttl_seconds: float, limit: int, now: datetime | None, scope: Scope
) -> Op[list[NamespaceRow]]:
    return Op(
        "admin_namespaces",
        {
            "namespace": namespace,
            "ttl_seconds": ttl_seconds,
            "limit": limit,
            "now": now,
            "scope": _scope(scope),
        },
        lambda rows: [_namespace(row) for row in rows],
    )


@dataclass(frozen=True)
class ScheduleSummary:
    namespace: str
    name: str
    owner: str
    revision: int
    enabled: bool
    suspended: bool
    schedule: str | None
    every: str | None
    time_zone: str | None
    kind: str | None
    concurrency_policy: str | None
    next_run_at: datetime | None
    last_occurrence_at: datetime | None
    last_job_id: JobId | None
    last_job_status: JobStatus | None
    last_success_at: datetime | None
    last_failure_at: datetime | None
    skipped_occurrences: int
    firing_error: str | None
    """Why its last firing failed (None: it worked); it waits until ``firing_retry_at``."""
    firing_failures: int
    firing_retry_at: datetime | None
    runs: job_counts.RunCounts = job_counts.NONE
    """Its counted runs (``tickwork.job_counts``), which the console adds to what
    :func:`schedules` reads."""
    dead_streak: int = 0
    """Consecutive occurrences that ended dead (docs/deadlines.md)."""
    dead_streak_job_id: JobId | None = None
    failures_suspended_at: datetime | None = None
    """When spec.suspendAfterFailures suspended it (None: it did not, or it was resumed)."""
    failures_suspended_job_id: JobId | None = None
    late: bool = False
    """An occurrence missed its spec.deadline and no job succeeded after that deadline."""
    late_occurrence_at: datetime | None = None
    late_job_id: JobId | None = None


def _schedule(row: Row) -> ScheduleSummary:
    return ScheduleSummary(**{**row, "last_job_status": _status(row["last_job_status"])})


def schedules(
    *,
    namespace: str | None,
    name: str | None = None,
    after: tuple[str, str] | None,
    limit: int,
    scope: Scope,
) -> Op[list[ScheduleSummary]]:
    return Op(
        "admin_schedules",
        {
            "scope": _scope(scope),
            "namespace": namespace,
            "name": name,
            "after_namespace": after[0] if after else None,
            "after_name": after[1] if after else None,
            "limit": limit,
        },
        lambda rows: [_schedule(row) for row in rows],
    )


# --- jobs -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class JobFilter:
    """The jobs page's filters; ``None`` means any."""

    status: JobStatus | None = None
    failing: bool = False
    """Available again after a failed attempt."""
    kind: str | None = None
    queue: str | None = None
    namespace: str | None = None
    schedule: str | None = None


@dataclass(frozen=True)
class JobSummary:
    id: JobId
    kind: str
    queue: str
    status: JobStatus
    attempt: int
    max_attempts: int | None
    priority: int
    run_at: datetime
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    schedule_namespace: str | None
    schedule_name: str | None
    occurrence_at: datetime | None
    picked_by: str | None
    lease_expires_at: datetime | None
    picker_seen_at: datetime | None
    """The last heartbeat of the worker running the job (running jobs only)."""
    last_error: str | None
    """Cut to its last characters (a traceback's end: the exception)."""


def _job(row: Row) -> JobSummary:
    return JobSummary(**{**row, "status": JobStatus(row["status"])})


def _namespaces(where: JobFilter, scope: Scope) -> list[str] | None:
    """The schedule namespaces a jobs page can be walked by (the scope, or the one filtered
    on, within it), or None when it lists jobs of any namespace or none."""
    if where.namespace is not None:
        return [where.namespace] if scope is None or where.namespace in scope else []
    return _scope(scope)


def jobs(
    where: JobFilter, *, before: int | None, limit: int, error_chars: int, scope: Scope
) -> Op[list[JobSummary]]:
    """A page of jobs, newest first. Filtered by kind (and no status) within known
    namespaces, each namespace is walked through its index (``job_page_by_kind``): a scoped
    reader's kind filter costs a few index descents, not a walk past every other namespace's
    jobs. With a status too, ``job_page``'s planner combines that index with the status's."""
    namespaces = _namespaces(where, scope)
    by_kind = (
        where.kind is not None
        and where.status is None
        and not where.failing
        and namespaces is not None
    )
    return Op(
        "job_page_by_kind" if by_kind else "job_page",
        {
            "namespaces": namespaces,
            "scope": _scope(scope),
            "status": None if where.status is None else where.status.value,
            "failing": where.failing,
            "kind": where.kind,
            "queue": where.queue,
            "namespace": where.namespace,
            "schedule": where.schedule,
            "before": before,
            "limit": limit,
            "error_chars": error_chars,
        },
        lambda rows: [_job(row) for row in rows],
    )


@dataclass(frozen=True)
class OrphanRow:
    kind: str
    queue: str
    jobs: int
    oldest_run_at: datetime
    kind_served: bool
    """Some live worker runs the kind, but none of those claims from the queue."""


def orphans(
    ttl_seconds: float, limit: int, now: datetime | None, scope: Scope
) -> Op[list[OrphanRow]]:
    return Op(
        "job_orphans",
        {"ttl_seconds": ttl_seconds, "limit": limit, "now": now, "scope": _scope(scope)},
        lambda rows: [OrphanRow(**row) for row in rows],
    )


# --- audit ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class AuditRow:
    id: int
    at: datetime
    actor: str
    action: str
    target: str
    reason: str | None
    request_id: str | None
    details: dict[str, Any]


def audit(
    target: str | None, *, before: int | None, limit: int, scope: Scope
) -> Op[list[AuditRow]]:
    return Op(
        "admin_audit",
        {"target": target, "before": before, "limit": limit, "scope": _scope(scope)},
        lambda rows: [AuditRow(**row) for row in rows],
    )
