"""The one place that runs SQL: operations as data, executed on a sync or async connection.

Each public function here builds an :class:`Op` — a named query, its parameters and how to
turn the rows into typed objects. :func:`run` and :func:`arun` execute an op on a caller's
connection inside the caller's transaction, so the same operation serves the sync API, the
async worker and transactional enqueue. Times are passed as ``now`` (``None``: the database
clock).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

import psycopg
from psycopg.types.json import Jsonb

from tickwork.db.queries import QUERIES
from tickwork.errors import InvalidInput
from tickwork.model import Backoff, Job, JobId, JobStatus, ScheduleRef

T = TypeVar("T")
Row = tuple[Any, ...]


@dataclass(frozen=True)
class Op(Generic[T]):
    """A named query, its parameters, and the reduction of its rows to a result."""

    query: str
    params: Mapping[str, Any]
    result: Callable[[list[Row]], T]
    binary: bool = False
    """Fetch results in binary format (cheaper to decode; used on the hot path)."""


def run(conn: psycopg.Connection[Any], op: Op[T]) -> T:
    cur = conn.execute(QUERIES[op.query], op.params, binary=op.binary)
    return op.result(cur.fetchall() if cur.description else [])


async def arun(conn: psycopg.AsyncConnection[Any], op: Op[T]) -> T:
    cur = await conn.execute(QUERIES[op.query], op.params, binary=op.binary)
    return op.result(await cur.fetchall() if cur.description else [])


def _nothing(rows: list[Row]) -> None:
    return None


def _ids(rows: list[Row]) -> set[JobId]:
    return {JobId(row[0]) for row in rows}


def to_json(field: str, value: Any) -> Jsonb:
    """Wrap a payload for a jsonb column, refusing what JSON cannot carry."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(field, f"not JSON-serialisable: {exc}") from None
    return Jsonb(value)


# --- jobs -------------------------------------------------------------------------------


def job_from_row(row: Row) -> Job:
    (
        id_,
        kind,
        queue,
        payload,
        priority,
        run_at,
        status,
        attempt,
        max_attempts,
        version,
        retry_base,
        retry_rate,
        retry_max,
        timeout,
        concurrency_key,
        unique_key,
        schedule_namespace,
        schedule_name,
        occurrence_at,
        picked_by,
        lease_expires_at,
    ) = row[:21]
    extra = row[21:]
    return Job(
        id=JobId(id_),
        kind=kind,
        queue=queue,
        payload=payload,
        priority=priority,
        run_at=run_at,
        status=JobStatus(status),
        attempt=attempt,
        max_attempts=max_attempts,
        version=version,
        retry=None if retry_base is None else Backoff(retry_base, retry_rate, retry_max),
        timeout=timeout,
        concurrency_key=concurrency_key,
        unique_key=unique_key,
        schedule=(
            None
            if schedule_name is None
            else ScheduleRef(schedule_namespace, schedule_name, occurrence_at)
        ),
        picked_by=picked_by,
        lease_expires_at=lease_expires_at,
        last_error=extra[0] if extra else None,
        created_at=extra[1] if extra else None,
        started_at=extra[2] if extra else None,
        finished_at=extra[3] if extra else None,
    )


def _jobs(rows: list[Row]) -> list[Job]:
    return [job_from_row(row) for row in rows]


def _claimed(worker: str) -> Callable[[list[Row]], list[Job]]:
    """Rows of ``job_claim`` leave out what the claim decided (status and owner): put them
    back in the places ``job_from_row`` reads; ``started_at`` is the claim's instant."""

    def build(rows: list[Row]) -> list[Job]:
        return [
            job_from_row(
                (*r[:6], JobStatus.RUNNING, *r[6:18], worker, r[18], None, None, r[19], None)
            )
            for r in rows
        ]

    return build


@dataclass(frozen=True)
class JobOptions:
    """Everything about a new job except its kind and payload."""

    queue: str
    priority: int = 0
    run_at: datetime | None = None
    max_attempts: int | None = None
    """None: the task's own, resolved when a worker claims the job."""
    retry: Backoff | None = None
    timeout: float | None = None
    concurrency_key: str | None = None
    unique_key: str | None = None

    def params(self) -> dict[str, Any]:
        return {
            "queue": self.queue,
            "priority": self.priority,
            "run_at": self.run_at,
            "max_attempts": self.max_attempts,
            "retry_base": self.retry.base if self.retry else None,
            "retry_rate": self.retry.rate if self.retry else None,
            "retry_max": self.retry.max if self.retry else None,
            "timeout": self.timeout,
            "concurrency_key": self.concurrency_key,
        }


@dataclass(frozen=True)
class Enqueued:
    id: JobId
    created: bool


def _enqueued(rows: list[Row]) -> Enqueued | None:
    return Enqueued(JobId(rows[0][0]), rows[0][1]) if rows else None


def insert_job(
    kind: str, payload: Any, options: JobOptions, now: datetime | None
) -> Op[Enqueued | None]:
    """Insert one job; ``None`` means a unique-key race to retry."""
    params = options.params()
    params.update(
        kind=kind, payload=to_json("payload", payload), unique_key=options.unique_key, now=now
    )
    return Op("job_insert", params, _enqueued)


def insert_jobs(
    kind: str, payloads: Sequence[Any], options: JobOptions, now: datetime | None
) -> Op[list[JobId]]:
    params = options.params()
    params.update(
        kind=kind,
        payloads=[to_json(f"payloads[{i}]", p) for i, p in enumerate(payloads)],
        now=now,
    )
    return Op("job_insert_many", params, lambda rows: [JobId(r[0]) for r in rows])


def claim_jobs(
    worker: str,
    queues: Sequence[str],
    kinds: Mapping[str, int],
    limit: int,
    lease_seconds: float,
    now: datetime | None,
) -> Op[list[Job]]:
    """``kinds``: the kinds this worker runs, each with its task's max attempts (given to
    jobs enqueued without their own)."""
    return Op(
        "job_claim",
        {
            "worker": worker,
            "queues": list(queues),
            "kinds": list(kinds),
            "max_attempts": list(kinds.values()),
            "limit": limit,
            "lease_seconds": lease_seconds,
            "now": now,
        },
        _claimed(worker),
        binary=True,
    )


def adopt_jobs(worker: str, held: Sequence[JobId]) -> Op[list[Job]]:
    """The jobs running under ``worker`` that it does not hold (a claim whose answer was lost)."""
    return Op("job_adopt", {"worker": worker, "held": list(held)}, _claimed(worker), binary=True)


def _fenced(query: str, jobs: Sequence[Job], now: datetime | None, **extra: Any) -> Op[set[JobId]]:
    params = {"ids": [j.id for j in jobs], "versions": [j.version for j in jobs], "now": now}
    params.update(extra)
    return Op(query, params, _ids)


def extend_leases(
    jobs: Sequence[Job], lease_seconds: float, now: datetime | None
) -> Op[dict[JobId, bool]]:
    """The jobs still ours, each with whether it was asked to stop."""
    params = {"ids": [j.id for j in jobs], "versions": [j.version for j in jobs], "now": now}
    return Op(
        "job_extend_leases",
        {**params, "lease_seconds": lease_seconds},
        lambda rows: {JobId(r[0]): bool(r[1]) for r in rows},
    )


def complete_jobs(jobs: Sequence[Job], now: datetime | None) -> Op[set[JobId]]:
    return _fenced("job_complete_many", jobs, now)


def hand_back_jobs(jobs: Sequence[Job], now: datetime | None) -> Op[set[JobId]]:
    return _fenced("job_hand_back", jobs, now)


def retry_job_later(
    job: Job, delay: float, error: str, now: datetime | None
) -> Op[JobStatus | None]:
    """The job's new status (available, or cancelled when it was asked to stop); None when
    the version moved."""
    return Op(
        "job_retry_later",
        {"id": job.id, "version": job.version, "delay_seconds": delay, "error": error, "now": now},
        lambda rows: JobStatus(rows[0][0]) if rows else None,
    )


def record_cancelled(job: Job, now: datetime | None) -> Op[bool]:
    """The worker stopped ``job`` (asked to stop); False when the version moved."""
    return Op("job_record_cancelled", {"id": job.id, "version": job.version, "now": now}, bool)


def mark_job_dead(job: Job, error: str, now: datetime | None) -> Op[bool]:
    return Op(
        "job_mark_dead",
        {"id": job.id, "version": job.version, "error": error, "now": now},
        bool,
    )


@dataclass(frozen=True)
class Recovered:
    """A job whose expired lease was recovered, and what it became: available, dead (its
    on_dead hook pending) or cancelled (it had been asked to stop)."""

    id: JobId
    queue: str
    kind: str
    picked_by: str | None
    status: JobStatus
    schedule_namespace: str | None


def recover_expired_leases(limit: int, now: datetime | None) -> Op[list[Recovered]]:
    return Op(
        "job_recover_expired",
        {"limit": limit, "now": now},
        lambda rows: [
            Recovered(JobId(r[0]), r[1], r[2], r[3], JobStatus(r[4]), r[5]) for r in rows
        ],
    )


def lock_dead_hooks_pending(kinds: Sequence[str], limit: int) -> Op[list[Job]]:
    """Dead jobs of ``kinds`` whose on_dead hook has not run, locked for this transaction."""
    return Op("job_lock_dead_hooks_pending", {"kinds": list(kinds), "limit": limit}, _jobs)


def dead_hook_ran(job: Job, error: str | None) -> Op[bool]:
    return Op("job_dead_hook_ran", {"id": job.id, "error": error}, bool)


def cancel_job(job_id: int, now: datetime | None) -> Op[bool]:
    return Op("job_cancel", {"id": job_id, "now": now}, bool)


def retry_dead_job(job_id: int, now: datetime | None) -> Op[bool]:
    return Op("job_retry_dead", {"id": job_id, "now": now}, bool)


def run_job_now(job_id: int, now: datetime | None) -> Op[bool]:
    return Op("job_run_now", {"id": job_id, "now": now}, bool)


def get_job(job_id: int) -> Op[Job | None]:
    return Op("job_get", {"id": job_id}, lambda rows: job_from_row(rows[0]) if rows else None)


def list_jobs(
    *, status: str | None, kind: str | None, queue: str | None, limit: int
) -> Op[list[Job]]:
    return Op("job_list", {"status": status, "kind": kind, "queue": queue, "limit": limit}, _jobs)


def delete_finished_jobs(age_seconds: float, limit: int, now: datetime | None) -> Op[int]:
    return Op("job_delete_finished", {"age_seconds": age_seconds, "limit": limit, "now": now}, len)


def database_now(now: datetime | None = None) -> Op[datetime]:
    """The database clock (or ``now`` when a test pins time)."""
    return Op("clock_now", {"now": now}, lambda rows: rows[0][0])


# --- workers, duties, audit --------------------------------------------------------------


@dataclass(frozen=True)
class WorkerInfo:
    name: str
    queues: list[str]
    kinds: list[str]
    namespaces: list[str]
    concurrency: int
    host: str
    pid: int
    started_at: datetime
    last_seen_at: datetime


def register_worker(
    *,
    name: str,
    queues: Sequence[str],
    kinds: Sequence[str],
    namespaces: Sequence[str],
    concurrency: int,
    host: str,
    pid: int,
    now: datetime | None,
) -> Op[None]:
    return Op(
        "worker_register",
        {
            "name": name,
            "queues": list(queues),
            "kinds": list(kinds),
            "namespaces": list(namespaces),
            "concurrency": concurrency,
            "host": host,
            "pid": pid,
            "now": now,
        },
        _nothing,
    )


def touch_worker(name: str, now: datetime | None) -> Op[None]:
    return Op("worker_touch", {"name": name, "now": now}, _nothing)


def deregister_worker(name: str) -> Op[None]:
    return Op("worker_deregister", {"name": name}, _nothing)


def expire_workers(ttl_seconds: float, now: datetime | None) -> Op[list[str]]:
    return Op(
        "worker_expire", {"ttl_seconds": ttl_seconds, "now": now}, lambda rows: [r[0] for r in rows]
    )


def list_workers() -> Op[list[WorkerInfo]]:
    return Op("worker_list", {}, lambda rows: [WorkerInfo(*r) for r in rows])


def claim_duty(duty: str, worker: str, interval_seconds: float, now: datetime | None) -> Op[bool]:
    return Op(
        "duty_claim",
        {"duty": duty, "worker": worker, "interval_seconds": interval_seconds, "now": now},
        bool,
    )


# --- fleet gauges ----------------------------------------------------------------------


@dataclass(frozen=True)
class QueueJobs:
    queue: str
    status: JobStatus
    count: int
    oldest_due_age: float
    """Seconds since the run_at of the oldest due available job (0: none due, or not available)."""


def gauge_jobs(now: datetime | None) -> Op[list[QueueJobs]]:
    return Op(
        "gauge_jobs",
        {"now": now},
        lambda rows: [QueueJobs(r[0], JobStatus(r[1]), int(r[2]), float(r[3])) for r in rows],
    )


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
        "gauge_schedules",
        {"overdue_seconds": overdue_seconds, "ttl_seconds": ttl_seconds, "now": now},
        lambda rows: [NamespaceSchedules(r[0], *(int(v) for v in r[1:])) for r in rows],
    )


def gauge_workers(ttl_seconds: float, now: datetime | None) -> Op[tuple[int, datetime]]:
    """Live workers, and the instant of the sample."""
    return Op(
        "gauge_workers",
        {"ttl_seconds": ttl_seconds, "now": now},
        lambda rows: (int(rows[0][0]), rows[0][1]),
    )


@dataclass(frozen=True)
class OrphanedJobs:
    kind: str
    status: JobStatus
    count: int


def gauge_orphaned_jobs(ttl_seconds: float, now: datetime | None) -> Op[list[OrphanedJobs]]:
    """Jobs of kinds no live worker (seen within ``ttl_seconds``) registers."""
    return Op(
        "gauge_orphaned_jobs",
        {"ttl_seconds": ttl_seconds, "now": now},
        lambda rows: [OrphanedJobs(r[0], JobStatus(r[1]), int(r[2])) for r in rows],
    )


def record_audit(
    *,
    actor: str,
    action: str,
    target: str,
    reason: str | None,
    request_id: str | None,
    details: Mapping[str, Any],
    now: datetime | None,
) -> Op[int]:
    return Op(
        "audit_insert",
        {
            "actor": actor,
            "action": action,
            "target": target,
            "reason": reason,
            "request_id": request_id,
            "details": Jsonb(dict(details)),
            "now": now,
        },
        lambda rows: int(rows[0][0]),
    )
