"""The statements of small workflows (``sql/workflows.sql``): the parents a new job waits for,
read and locked; jobs inserted with their edges; spawns recorded; a run's graph for the
console. The decisions (which status a new job starts in) are :mod:`tickwork.workflows.after`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tickwork.db.jobs import carrier, fields_of
from tickwork.db.store import Op, nothing, to_json
from tickwork.model import JobId, JobStatus, NewJob, TraceContext


@dataclass(frozen=True)
class Linked:
    """A job at the other end of an edge: a parent or a dependent."""

    id: JobId
    kind: str
    status: JobStatus


@dataclass(frozen=True)
class Start:
    """How new jobs waiting for parents start: their status, how many parents they wait for,
    and why they were cancelled (a parent that had ended dead or cancelled)."""

    status: JobStatus
    parents_left: int | None
    last_error: str | None = None


def lock_parents(ids: Sequence[int], namespace: str | None) -> Op[dict[int, JobStatus]]:
    """The status of each of ``ids`` in the tenant ``namespace`` (None: jobs enqueued from
    code), locked until the transaction ends; ids of other tenants are left out, as unknown."""
    return Op(
        "workflow_lock_parents",
        {"ids": list(ids), "namespace": namespace},
        lambda rows: {int(r["id"]): JobStatus(r["status"]) for r in rows},
    )


def insert_jobs(
    template: NewJob,
    payloads: Sequence[Any],
    after: Sequence[int],
    start: Start,
    now: datetime | None,
    trace_context: TraceContext | None = None,
) -> Op[list[JobId]]:
    """Jobs like ``template`` (its schedule reference their tenant), one per payload, waiting
    for ``after`` and starting as ``start`` says; ids in payload order."""
    params = fields_of(template)
    params.update(
        kind=template.kind,
        payloads=[to_json(f"payloads[{i}]", p) for i, p in enumerate(payloads)],
        schedule_namespace=template.schedule_namespace,
        schedule_name=template.schedule_name,
        trace_context=carrier(trace_context),
        status=start.status.value,
        parents_left=start.parents_left,
        last_error=start.last_error,
        after=list(after),
        now=now,
    )
    return Op("workflow_insert_jobs", params, lambda rows: [JobId(r["id"]) for r in rows])


def graph_jobs(job_id: int, namespace: str | None, limit: int) -> Op[list[Linked]]:
    """The jobs linked to ``job_id`` by edges at any distance, nearest first (the job
    itself first), at most ``limit``, of the tenant ``namespace`` only."""
    return Op(
        "workflow_graph_jobs",
        {"id": job_id, "namespace": namespace, "limit": limit},
        lambda rows: [Linked(JobId(r["id"]), r["kind"], JobStatus(r["status"])) for r in rows],
    )


def graph_edges(ids: Sequence[int]) -> Op[list[tuple[JobId, JobId]]]:
    """The edges between ``ids``, as (dependent, parent)."""
    return Op(
        "workflow_graph_edges",
        {"ids": list(ids)},
        lambda rows: [(JobId(r["job_id"]), JobId(r["parent_id"])) for r in rows],
    )


def claim_spawn(job_id: int, key: str) -> Op[bool]:
    """True: this is the first spawn of ``job_id`` under ``key`` (recorded in this
    transaction); False: it spawned before."""
    return Op("workflow_spawn_claim", {"job_id": job_id, "key": key}, bool)


def spawned(job_id: int, key: str) -> Op[list[JobId]]:
    """The jobs ``job_id`` spawned under ``key``."""
    return Op(
        "workflow_spawned",
        {"job_id": job_id, "key": key},
        lambda rows: [JobId(i) for i in rows[0]["ids"]] if rows else [],
    )


def record_spawn(job_id: int, key: str, ids: Sequence[int]) -> Op[None]:
    return Op("workflow_spawn_record", {"job_id": job_id, "key": key, "ids": list(ids)}, nothing)
