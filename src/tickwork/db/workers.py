"""Operations on ``tickwork.workers`` (``db/sql/workers.sql``): the registry of live workers."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from tickwork.db.store import Op, column, nothing


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
        nothing,
    )


def touch_worker(name: str, now: datetime | None) -> Op[None]:
    return Op("worker_touch", {"name": name, "now": now}, nothing)


def deregister_worker(name: str) -> Op[None]:
    return Op("worker_deregister", {"name": name}, nothing)


def expire_workers(ttl_seconds: float, now: datetime | None) -> Op[list[str]]:
    return Op("worker_expire", {"ttl_seconds": ttl_seconds, "now": now}, column("name"))


def list_workers() -> Op[list[WorkerInfo]]:
    return Op("worker_list", {}, lambda rows: [WorkerInfo(**row) for row in rows])


def worker_seen(name: str) -> Op[datetime | None]:
    """The worker's last heartbeat; None when it is not registered."""
    return Op("worker_seen", {"name": name}, lambda rows: rows[0]["last_seen_at"] if rows else None)


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
