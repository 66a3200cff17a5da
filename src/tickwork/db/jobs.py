"""Operations on ``tickwork.jobs`` (``db/sql/jobs.sql``): builders of :class:`store.Op` and the
typed rows they return, mapped from the columns by name (whole jobs and outcomes' ids: from
tuples whose column names are checked once per result, :class:`store.TableOp`). Executed with
:func:`store.run` or :func:`store.arun` inside the caller's transaction."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg.types.json import Jsonb

from tickwork.db.store import Op, Row, TableOp, Values, nothing, optional_json, to_json
from tickwork.model import (
    Backoff,
    Job,
    JobId,
    JobStatus,
    NewJob,
    OpenJobs,
    ScheduleRef,
    TraceContext,
)

Key = tuple[str, str]
"""(namespace, name) of a schedule."""


_STATUSES = {status.value: status for status in JobStatus}

_json_value: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]  # typeshed omits it
"""The C scanner under :func:`json.loads`, called directly: PostgreSQL's text of a jsonb value
is one JSON value with nothing around it, so the whitespace handling ``json.loads`` wraps
around the scan in Python has nothing to do (it was two thirds of the decoding's 1 µs per
no-op job's payload ``{}``: bench/peers.py). Returns (value, end)."""


JOB_COLUMNS = (
    "id",
    "kind",
    "queue",
    "payload_json",
    "priority",
    "run_at",
    "attempt",
    "max_attempts",
    "version",
    "retry_base_seconds",
    "retry_rate",
    "retry_max_seconds",
    "timeout_seconds",
    "concurrency_key",
    "unique_key",
    "schedule_namespace",
    "schedule_name",
    "occurrence_at",
    "lease_expires_at",
    "started_at",
    "status",
    "picked_by",
    "trace_context",
    "last_error",
    "created_at",
    "finished_at",
)
"""The columns a :class:`Job` is read from, in the order every query reading jobs lists them
(jobs.sql), the payload as JSON text; the last three only where the query needs them (a claim
leaves them out: None)."""
_CLAIMED = len(JOB_COLUMNS) - 3
_NOT_READ = (None, None, None)


def _job(row: Values) -> Job:
    """A job from one row of :data:`JOB_COLUMNS` (the whole list, or all but its last three).

    Built field by field into the new object's ``__dict__``, as :func:`copy.copy` builds a
    copy: a frozen dataclass's ``__init__`` sets each of its 23 fields through
    ``object.__setattr__``, 3 µs a job, a tenth of a worker's CPU per no-op job (profiled with
    bench/peers.py). tests/db/test_job_rows.py checks that every field of :class:`Job` is set."""
    (
        id_,
        kind,
        queue,
        payload_json,
        priority,
        run_at,
        attempt,
        max_attempts,
        version,
        retry_base,
        retry_rate,
        retry_max,
        timeout,
        concurrency_key,
        unique_key,
        namespace,
        name,
        occurrence_at,
        lease_expires_at,
        started_at,
        status,
        picked_by,
        trace_context,
    ) = row[:_CLAIMED]
    last_error, created_at, finished_at = row[_CLAIMED:] or _NOT_READ
    job = object.__new__(Job)
    job.__dict__.update(
        id=JobId(id_),
        kind=kind,
        queue=queue,
        payload=_json_value(payload_json, 0)[0],
        priority=priority,
        run_at=run_at,
        status=_STATUSES[status],
        attempt=attempt,
        max_attempts=max_attempts,
        version=version,
        retry=None if retry_base is None else Backoff(retry_base, retry_rate, retry_max),
        timeout=timeout,
        concurrency_key=concurrency_key,
        unique_key=unique_key,
        schedule=None if name is None else ScheduleRef(namespace, name, occurrence_at),
        picked_by=picked_by,
        lease_expires_at=lease_expires_at,
        last_error=last_error,
        created_at=created_at,
        started_at=started_at,
        finished_at=finished_at,
        trace_context=trace_context,
    )
    return job


def _jobs(names: list[str], rows: list[Values]) -> list[Job]:
    """The jobs of a result whose columns are :data:`JOB_COLUMNS`, all of them or all but the
    last three (checked here, once, rather than looked up by name in every row)."""
    if names and tuple(names) not in (JOB_COLUMNS, JOB_COLUMNS[:_CLAIMED]):
        raise RuntimeError(f"a query reading jobs lists columns other than JOB_COLUMNS: {names}")
    return [_job(row) for row in rows]


def _ids(names: list[str], rows: list[Values]) -> set[JobId]:
    """The ids of a result whose one column is ``id`` (a batch of outcomes' fenced ids)."""
    if names and names != ["id"]:
        raise RuntimeError(f"a query returning job ids returns other columns: {names}")
    return {JobId(row[0]) for row in rows}


# --- enqueue ------------------------------------------------------------------------------


def fields_of(job: NewJob) -> dict[str, Any]:
    """The columns of a new job besides its kind, payload and unique key."""
    return {
        "queue": job.queue,
        "priority": job.priority,
        "run_at": job.run_at,
        "max_attempts": job.max_attempts,
        "retry_base": job.retry.base if job.retry else None,
        "retry_rate": job.retry.rate if job.retry else None,
        "retry_max": job.retry.max if job.retry else None,
        "timeout": job.timeout,
        "concurrency_key": job.concurrency_key,
        "concurrency_limit": job.concurrency_limit,
    }


@dataclass(frozen=True)
class Enqueued:
    id: JobId
    created: bool


def _enqueued(rows: list[Row]) -> Enqueued | None:
    return Enqueued(JobId(rows[0]["id"]), rows[0]["created"]) if rows else None


def carrier(trace_context: TraceContext | None) -> Jsonb | None:
    """A trace context for ``jobs.trace_context``: the propagator's strings, JSON already."""
    return None if trace_context is None else Jsonb(trace_context)


def insert_job(
    job: NewJob, now: datetime | None, trace_context: TraceContext | None = None
) -> Op[Enqueued | None]:
    """Insert one job, created in ``trace_context``; ``None`` means a unique-key race to retry."""
    params = fields_of(job)
    params.update(
        kind=job.kind,
        payload=to_json("payload", job.payload),
        unique_key=job.unique_key,
        trace_context=carrier(trace_context),
        now=now,
    )
    return Op("job_insert", params, _enqueued)


def insert_jobs(
    template: NewJob,
    payloads: Sequence[Any],
    now: datetime | None,
    trace_context: TraceContext | None = None,
) -> Op[list[JobId]]:
    """Jobs like ``template``, one per payload (its own payload and unique key unused), all
    created in ``trace_context``."""
    params = fields_of(template)
    params.update(
        kind=template.kind,
        payloads=[to_json(f"payloads[{i}]", p) for i, p in enumerate(payloads)],
        trace_context=carrier(trace_context),
        now=now,
    )
    return Op("job_insert_many", params, lambda rows: [JobId(r["id"]) for r in rows])


def inserts_quiet() -> Op[None]:
    """The rest of this transaction's inserts notify nobody (the caller notifies after the
    commit, with :func:`notify_queue`)."""
    return Op("job_inserts_quiet", {}, nothing)


def notify_queue(queue: str, run_at: datetime | None, now: datetime | None) -> Op[None]:
    """Wake the workers of ``queue`` if a job inserted with ``run_at`` is due: alone in a
    transaction run after the insert's commit, which then commits without waiting for the
    flush."""
    return Op("job_notify_queue", {"queue": queue, "run_at": run_at, "now": now}, nothing)


@dataclass(frozen=True)
class CreatedJob:
    id: JobId
    namespace: str
    name: str
    occurrence_at: datetime | None


def template_columns(jobs: Sequence[NewJob]) -> dict[str, list[Any]]:
    """The parallel arrays of what schedule jobs take from their template (kind, queue,
    payload, priority, attempts, retry, timeout, concurrency key and limit), as the queries
    inserting them name their parameters. Payloads come from validated definitions or stored state:
    plain JSON already."""
    retries = [j.retry for j in jobs]
    return {
        "kinds": [j.kind for j in jobs],
        "queues": [j.queue for j in jobs],
        "payloads": [Jsonb(j.payload) for j in jobs],
        "priorities": [j.priority for j in jobs],
        "max_attempts": [j.max_attempts for j in jobs],
        "retry_bases": [r.base if r else None for r in retries],
        "retry_rates": [r.rate if r else None for r in retries],
        "retry_maxes": [r.max if r else None for r in retries],
        "timeouts": [j.timeout for j in jobs],
        "concurrency_keys": [j.concurrency_key for j in jobs],
        "concurrency_limits": [j.concurrency_limit for j in jobs],
    }


def insert_schedule_jobs(
    jobs: Sequence[NewJob], now: datetime | None, trace_context: TraceContext | None = None
) -> Op[list[CreatedJob]]:
    """One statement for all ``jobs``, all created in ``trace_context``; an occurrence that has
    a job already is skipped (the triggers and backfills of :mod:`tickwork.schedules.operations`;
    the firing pass inserts its jobs with :func:`tickwork.db.schedules.fire`)."""
    return Op(
        "job_insert_for_schedules",
        {
            **template_columns(jobs),
            "run_ats": [j.run_at for j in jobs],
            "namespaces": [j.schedule_namespace for j in jobs],
            "names": [j.schedule_name for j in jobs],
            "occurrences": [j.occurrence_at for j in jobs],
            "trace_context": carrier(trace_context),
            "now": now,
        },
        lambda rows: [
            CreatedJob(
                JobId(r["id"]), r["schedule_namespace"], r["schedule_name"], r["occurrence_at"]
            )
            for r in rows
        ],
        binary=True,
    )


# --- the worker ---------------------------------------------------------------------------


def claim_jobs(
    worker: str,
    queues: Sequence[str],
    kinds: Mapping[str, int],
    limit: int,
    lease_seconds: float,
    now: datetime | None,
    *,
    incarnation: UUID | None = None,
) -> TableOp[list[Job]]:
    """``kinds``: the kinds this worker runs, each with its task's max attempts (given to
    jobs enqueued without their own). ``worker`` is the name recorded for people,
    ``incarnation`` the claiming process (None: a claim made outside a worker process, by a
    test or a benchmark, that no worker adopts)."""
    return TableOp(
        "job_claim",
        {
            "worker": worker,
            "incarnation": incarnation,
            "queues": list(queues),
            "kinds": list(kinds),
            "max_attempts": list(kinds.values()),
            "limit": limit,
            "lease_seconds": lease_seconds,
            "now": now,
        },
        _jobs,
        binary=True,
    )


@dataclass(frozen=True)
class ClaimRules:
    applying: int
    """How many flow rules apply to what the claim serves, held or not."""
    room_in_seconds: float | None
    """When the first spent rate (not keyed) has room again; None: none is spent."""
    contended: int = 0
    """How many of the rules another claimer held (this claim had no room in them)."""


def lock_claim_rules(
    queues: Sequence[str], kinds: Sequence[str], now: datetime | None
) -> Op[ClaimRules]:
    """Lock, until the commit, the flow rules that limit what a claim of ``queues`` and
    ``kinds`` serves, for the :func:`claim_jobs` that follows in the same transaction (which
    gives a rule it does not hold no room)."""
    params = {"queues": list(queues), "kinds": list(kinds), "now": now}
    return Op(
        "job_claim_rules",
        params,
        lambda rows: ClaimRules(
            int(rows[0]["applying"]), rows[0]["room_in_seconds"], int(rows[0]["contended"])
        ),
    )


def adopt_jobs(incarnation: UUID, held: Sequence[JobId]) -> TableOp[list[Job]]:
    """The jobs running under the process ``incarnation`` that it does not hold (a claim
    whose answer was lost)."""
    return TableOp(
        "job_adopt", {"incarnation": incarnation, "held": list(held)}, _jobs, binary=True
    )


def _fenced(
    query: str, jobs: Sequence[Job], now: datetime | None, **extra: Any
) -> TableOp[set[JobId]]:
    params = {"ids": [j.id for j in jobs], "versions": [j.version for j in jobs], "now": now}
    params.update(extra)
    return TableOp(query, params, _ids)


def extend_leases(
    jobs: Sequence[Job],
    lease_seconds: float,
    now: datetime | None,
    *,
    incarnation: UUID | None = None,
) -> Op[dict[JobId, bool]]:
    """The jobs still ours (claimed by the process ``incarnation``, as :func:`claim_jobs`
    took it), each with whether it was asked to stop."""
    params = {"ids": [j.id for j in jobs], "versions": [j.version for j in jobs], "now": now}
    return Op(
        "job_extend_leases",
        {**params, "lease_seconds": lease_seconds, "incarnation": incarnation},
        lambda rows: {JobId(r["id"]): bool(r["stop_requested"]) for r in rows},
    )


def complete_jobs(
    jobs: Sequence[Job],
    now: datetime | None,
    results: Mapping[JobId, Any] | None = None,
    *,
    result_errors: Mapping[JobId, str] | None = None,
    progress: Mapping[JobId, Mapping[str, Any]] | None = None,
) -> TableOp[set[JobId]]:
    """Record ``jobs`` succeeded, each with its return value in ``results`` (absent or None:
    none kept; checked by :func:`tickwork.results.keep` first, values that are not JSON raise
    InvalidInput), why the value was not kept in ``result_errors``, and its last progress
    report not written yet in ``progress`` (absent: the stored one stays). A schedule job's
    result is its schedule's carried state."""
    # An empty mapping is sent as a NULL array, which unnest pads with NULLs: most batches
    # have no result errors and no pending progress, and their arrays cost nothing then.
    states = [optional_json("return value", results.get(j.id)) for j in jobs] if results else None
    notes = [result_errors.get(j.id) for j in jobs] if result_errors else None
    last = [optional_json("progress", progress.get(j.id)) for j in jobs] if progress else None
    return _fenced(
        "job_complete_many", jobs, now, results=states, result_errors=notes, progress=last
    )


def hand_back_jobs(jobs: Sequence[Job], now: datetime | None) -> TableOp[set[JobId]]:
    return _fenced("job_hand_back", jobs, now)


def interrupted(
    job: Job, worker: str, max_interruptions: int, now: datetime | None
) -> Op[JobStatus | None]:
    """Hand back ``job``, interrupted by ``worker``'s shutdown: available at once with its
    attempt unspent (cancelled when asked to stop; dead, its hook pending, when interrupted
    more than ``max_interruptions`` times). Its new status; None when the version moved."""
    return Op(
        "job_interrupted",
        {
            "id": job.id,
            "version": job.version,
            "worker": worker,
            "max_interruptions": max_interruptions,
            "now": now,
        },
        lambda rows: JobStatus(rows[0]["status"]) if rows else None,
    )


def retry_job_later(
    job: Job, delay: float, error: str, now: datetime | None
) -> Op[JobStatus | None]:
    """The job's new status (available, or cancelled when it was asked to stop); None when
    the version moved."""
    return Op(
        "job_retry_later",
        {"id": job.id, "version": job.version, "delay_seconds": delay, "error": error, "now": now},
        lambda rows: JobStatus(rows[0]["status"]) if rows else None,
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
            Recovered(
                JobId(r["id"]),
                r["queue"],
                r["kind"],
                r["picked_by"],
                JobStatus(r["status"]),
                r["schedule_namespace"],
            )
            for r in rows
        ],
    )


def lock_dead_hooks_pending(kinds: Sequence[str], limit: int) -> TableOp[list[Job]]:
    """Dead jobs of ``kinds`` whose on_dead hook has not run, locked for this transaction."""
    return TableOp("job_lock_dead_hooks_pending", {"kinds": list(kinds), "limit": limit}, _jobs)


def dead_hook_ran(job: Job, error: str | None) -> Op[bool]:
    return Op("job_dead_hook_ran", {"id": job.id, "error": error}, bool)


# --- operators' actions -------------------------------------------------------------------


def cancel_job(job_id: int, now: datetime | None) -> Op[bool]:
    return Op("job_cancel", {"id": job_id, "now": now}, bool)


def retry_dead_job(job_id: int, now: datetime | None) -> Op[bool]:
    return Op("job_retry_dead", {"id": job_id, "now": now}, bool)


def run_job_now(job_id: int, now: datetime | None) -> Op[bool]:
    return Op("job_run_now", {"id": job_id, "now": now}, bool)


@dataclass(frozen=True)
class LockedJob:
    status: JobStatus
    due: bool
    namespace: str | None
    """The schedule namespace of the job (None: enqueued outside any schedule)."""
    snapshot: dict[str, Any]


def lock_job(job_id: int, now: datetime | None) -> Op[LockedJob | None]:
    """The job's status and snapshot, locked; None if there is no such job."""
    return Op(
        "job_lock_snapshot",
        {"id": job_id, "now": now},
        lambda rows: (
            LockedJob(
                JobStatus(rows[0]["status"]),
                rows[0]["due"],
                rows[0]["schedule_namespace"],
                rows[0]["snapshot"],
            )
            if rows
            else None
        ),
    )


# --- reads ----------------------------------------------------------------------------------


def get_job(job_id: int) -> TableOp[Job | None]:
    return TableOp(
        "job_get", {"id": job_id}, lambda names, rows: _jobs(names, rows)[0] if rows else None
    )


def job_statuses(ids: Sequence[int]) -> Op[dict[JobId, JobStatus]]:
    """The status of each job of ``ids`` that exists."""
    return Op(
        "job_statuses",
        {"ids": list(ids)},
        lambda rows: {JobId(row["id"]): _STATUSES[row["status"]] for row in rows},
    )


def list_jobs(
    *, status: str | None, kind: str | None, queue: str | None, limit: int
) -> TableOp[list[Job]]:
    params = {"status": status, "kind": kind, "queue": queue, "limit": limit}
    return TableOp("job_list", params, _jobs)


def delete_finished_jobs(age_seconds: float, limit: int, now: datetime | None) -> Op[int]:
    return Op("job_delete_finished", {"age_seconds": age_seconds, "limit": limit, "now": now}, len)


@dataclass(frozen=True)
class HistoryTrim:
    """What one statement of retention's history limits did."""

    seen: int
    """Queued schedules it looked at (at most the batch: fewer means the queue was empty)."""
    picked: int
    """Those it trimmed (the others: taken by another pass, or queued anew meanwhile)."""
    capped: int
    """Trimmed schedules that had more to delete than the cap, left queued."""
    deleted: int
    """Jobs deleted."""


def trim_histories(
    schedules: int, limit: int, default_succeeded: int, default_failed: int, maximum: int
) -> Op[HistoryTrim]:
    """Trim the histories of up to ``schedules`` queued schedules to their limits (a stored
    spec without them: the defaults given; with a value outside 0..``maximum``: ``maximum``),
    at most ``limit`` jobs per schedule and outcome."""
    return Op(
        "job_trim_histories",
        {
            "schedules": schedules,
            "limit": limit,
            "succeeded": default_succeeded,
            "failed": default_failed,
            "max": maximum,
        },
        lambda rows: HistoryTrim(**rows[0]),
    )


# --- the jobs of schedules ------------------------------------------------------------------


def _keys(keys: Sequence[Key]) -> dict[str, Any]:
    return {"namespaces": [k[0] for k in keys], "names": [k[1] for k in keys]}


def open_jobs(keys: Sequence[Key]) -> Op[dict[Key, OpenJobs]]:
    """Schedules without open jobs are absent from the result."""
    return Op(
        "job_open_per_schedule",
        _keys(keys),
        lambda rows: {
            (r["schedule_namespace"], r["schedule_name"]): OpenJobs(r["available"], r["running"])
            for r in rows
        },
    )


def _count_by_key(rows: list[Row]) -> dict[Key, int]:
    counts: dict[Key, int] = {}
    for row in rows:
        key = (row["schedule_namespace"], row["schedule_name"])
        counts[key] = counts.get(key, 0) + 1
    return counts


def cancel_open_jobs(keys: Sequence[Key], now: datetime | None) -> Op[dict[Key, int]]:
    """Cancel the open jobs of these schedules that nobody else holds; counts per schedule."""
    params = _keys(keys)
    params["now"] = now
    return Op("job_cancel_of_schedules", params, _count_by_key)


@dataclass(frozen=True)
class CancelledJob:
    """A pending job of a pruned schedule, cancelled."""

    id: JobId
    name: str
    """Its schedule's name."""
    queue: str
    kind: str


def cancel_pending_jobs(
    namespace: str, names: Sequence[str], now: datetime | None
) -> Op[list[CancelledJob]]:
    """Cancel the pending jobs of these schedules of ``namespace`` (running ones finish),
    by id."""
    return Op(
        "job_cancel_pending_of_schedules",
        {"namespace": namespace, "names": list(names), "now": now},
        lambda rows: [
            CancelledJob(JobId(r["id"]), r["schedule_name"], r["queue"], r["kind"])
            for r in sorted(rows, key=lambda r: int(r["id"]))
        ],
    )


@dataclass(frozen=True)
class OpenJob:
    """A pending or running job of a schedule (the operator's ``status.active``)."""

    namespace: str
    name: str
    id: JobId
    status: JobStatus
    occurrence_at: datetime | None
    open_count: int
    """How many jobs of its schedule are pending or running (all of them, not only those
    listed)."""
    attempt: int = 0
    """Attempts started (the running one included)."""


def open_job_list(namespaces: Sequence[str], shown: int) -> Op[list[OpenJob]]:
    """Pending and running schedule jobs of ``namespaces``, at most ``shown`` per schedule,
    by schedule, each with its schedule's exact count."""
    return Op(
        "job_open_of_namespaces",
        {"namespaces": list(namespaces), "shown": shown},
        lambda rows: [
            OpenJob(
                r["schedule_namespace"],
                r["schedule_name"],
                JobId(r["id"]),
                JobStatus(r["status"]),
                r["occurrence_at"],
                r["open_count"],
                r["attempt"],
            )
            for r in rows
        ],
    )


@dataclass(frozen=True)
class LastJob:
    """The last job of a schedule (the operator's ``status.lastJob``). Once retention deleted
    the job row, only what the schedule row keeps is known: the id and the final status."""

    namespace: str
    name: str
    id: JobId
    status: JobStatus | None
    occurrence_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    attempt: int | None
    last_error: str | None
    result_head: str | None = None
    """Its result as JSON text, at most :data:`LAST_RESULT_CHARS` characters and one more
    (which tells that it was cut); None: no result."""
    result_error: str | None = None
    """Why the value its task returned was not kept."""
    progress: Any = None
    """Its latest progress as stored (:class:`tickwork.db.results.Progress` reads it)."""


LAST_RESULT_CHARS = 1024
"""How much of the last job's result (JSON text) a Schedule's status shows."""


def last_job_list(namespaces: Sequence[str]) -> Op[list[LastJob]]:
    """The last job of every schedule of ``namespaces`` that has fired one."""
    return Op(
        "job_last_of_namespaces",
        {"namespaces": list(namespaces), "result_chars": LAST_RESULT_CHARS},
        lambda rows: [
            LastJob(
                **{
                    **r,
                    "id": JobId(r["id"]),
                    "status": None if r["status"] is None else JobStatus(r["status"]),
                }
            )
            for r in rows
        ],
    )


# --- fleet gauges ---------------------------------------------------------------------------


@dataclass(frozen=True)
class QueueJobs:
    queue: str
    status: JobStatus
    count: int
    oldest_due_age: float
    """Seconds since the run_at of the oldest due available job (0: none due, or not available)."""


def gauge_jobs(now: datetime | None) -> Op[list[QueueJobs]]:
    return Op(
        "job_gauge",
        {"now": now},
        lambda rows: [
            QueueJobs(
                r["queue"], JobStatus(r["status"]), int(r["count"]), float(r["oldest_due_age"])
            )
            for r in rows
        ],
    )


@dataclass(frozen=True)
class OrphanedJobs:
    kind: str
    status: JobStatus
    count: int


def gauge_orphaned_jobs(ttl_seconds: float, now: datetime | None) -> Op[list[OrphanedJobs]]:
    """Jobs of kinds no live worker (seen within ``ttl_seconds``) registers."""
    return Op(
        "job_gauge_orphaned",
        {"ttl_seconds": ttl_seconds, "now": now},
        lambda rows: [
            OrphanedJobs(r["kind"], JobStatus(r["status"]), int(r["count"])) for r in rows
        ],
    )
