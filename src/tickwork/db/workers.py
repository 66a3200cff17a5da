"""Operations on ``tickwork.workers`` (``db/sql/workers.sql``): the registry of live workers."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID, uuid4

from tickwork.db.store import Op, column, nothing


@dataclass(frozen=True)
class WorkerInfo:
    name: str
    incarnation: UUID
    """Unique to the process (made at its start): leases and heartbeats go by it."""
    queues: list[str]
    kinds: list[str]
    namespaces: list[str]
    concurrency: int
    host: str
    pid: int
    heartbeat_seconds: float
    started_at: datetime
    last_seen_at: datetime
    stale: bool
    """Its last heartbeat is older than two of its heartbeat intervals."""


@dataclass(frozen=True)
class Holder:
    """The process under a worker name: the one registering (``incarnation`` is its own)
    or the live one holding the name already."""

    incarnation: UUID
    host: str
    pid: int
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
    incarnation: UUID | None = None,
    heartbeat_seconds: float = 10.0,
    ttl_seconds: float = 120.0,
    connections: int | None = None,
) -> Op[Holder | None]:
    """Register a process as ``name`` unless a live one (seen within ``ttl_seconds``) of
    another incarnation holds it; returns who holds the name now (None: try again).
    ``incarnation`` None: a new one (a row written by hand, as tests do). ``connections``: the
    most it holds on the server (:func:`tickwork.db.budget.worker`); None: not recorded, as a
    worker of an earlier version."""
    return Op(
        "worker_register",
        {
            "name": name,
            "incarnation": incarnation or uuid4(),
            "queues": list(queues),
            "kinds": list(kinds),
            "namespaces": list(namespaces),
            "concurrency": concurrency,
            "host": host,
            "pid": pid,
            "heartbeat_seconds": heartbeat_seconds,
            "connections": connections,
            "ttl_seconds": ttl_seconds,
            "now": now,
        },
        lambda rows: Holder(**rows[0]) if rows else None,
    )


def touch_worker(incarnation: UUID, now: datetime | None) -> Op[None]:
    return Op("worker_touch", {"incarnation": incarnation, "now": now}, nothing)


def deregister_worker(incarnation: UUID) -> Op[None]:
    return Op("worker_deregister", {"incarnation": incarnation}, nothing)


def expire_workers(ttl_seconds: float, now: datetime | None) -> Op[list[str]]:
    return Op("worker_expire", {"ttl_seconds": ttl_seconds, "now": now}, column("name"))


def list_workers(now: datetime | None = None) -> Op[list[WorkerInfo]]:
    """Every registered worker, stale or not at ``now`` (None: the database's clock)."""
    return Op("worker_list", {"now": now}, lambda rows: [WorkerInfo(**row) for row in rows])


@dataclass(frozen=True)
class Seen:
    last_seen_at: datetime
    stale: bool


def seen_of_job(job_id: int, now: datetime | None) -> Op[Seen | None]:
    """The last heartbeat of the process whose claim the job runs under; None when it has
    no worker row (not running, or the row is gone)."""
    return Op(
        "worker_seen_of_job", {"id": job_id, "now": now}, lambda r: Seen(**r[0]) if r else None
    )


def gauge_workers(ttl_seconds: float, now: datetime | None) -> Op[tuple[int, datetime]]:
    """Live workers, and the instant of the sample."""
    return Op(
        "worker_gauge",
        {"ttl_seconds": ttl_seconds, "now": now},
        lambda rows: (int(rows[0]["live"]), rows[0]["now"]),
    )


@dataclass(frozen=True)
class LiveWorker:
    name: str
    namespaces: list[str]
    kinds: list[str]
    queues: list[str]


def live_workers(ttl_seconds: float, now: datetime | None) -> Op[list[LiveWorker]]:
    """Workers seen within ``ttl_seconds``: what each fires, runs and claims from."""
    return Op(
        "worker_live",
        {"ttl_seconds": ttl_seconds, "now": now},
        lambda rows: [LiveWorker(**row) for row in rows],
    )
