"""The connection budget: how many connections each kind of tickwork process holds on the
PostgreSQL server at most, and the fleet's total against what the server allows. The one place
these numbers are stated: the worker's, the operator's and the App's pools are sized from here,
and the number each worker and operator records in its registry row (``connections``,
migration 0023) is computed here, so the two cannot drift apart. Pure arithmetic: the queries
that read the server and the registry are in :mod:`tickwork.db.server`.

A worker holds at most :func:`worker` connections: its pool (claims, outcomes, maintenance, and
two firing passes at once on a backlog), the heartbeat's (a thread of its own), the listener's
(LISTEN, unless it sits behind a transaction pooler without ``--listen-url``), the readiness
probe's (``/readyz`` reads the migrations on a connection of its own), and the App's pool,
opened only when its tasks enqueue through the App (a task set that enqueues both through the
sync and the async API opens both of the App's pools: :data:`APP_POOL` more). An operator holds
its pool and its probe's; the console holds the App's pool and its probe's. A forced exit (a
second signal) opens one more for a few seconds, to hand its jobs back.

Behind a transaction-mode pooler (``--pooler transaction``) a worker's pool, heartbeat, probe
and App connections are the pooler's clients: what they cost the server is the pooler's own pool
(PgBouncer's ``default_pool_size`` per database and user), which tickwork cannot see. Such a
worker counts (and records) only its direct connection, the listener's on ``--listen-url``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import StrEnum

from tickwork.logs import fields

WORKER_POOL_MIN = 2
"""Connections the worker's pool keeps open while idle."""
WORKER_POOL = 6
"""The worker's own pool (its ``max_size``)."""
HEARTBEAT = 1
LISTENER = 1
PROBE = 1
"""``/readyz``: one short connection per probe."""
APP_POOL = 4
"""Each of the App's pools (sync and async; ``max_size``), opened on the App's first use."""
OPERATOR_POOL = 2
"""The operator's pool (its ``max_size``); kopf itself opens none to PostgreSQL."""

WARN_SHARE = 0.8
"""A fleet that may open more than this share of the available connections is warned about."""

ADVICE = (
    "run fewer workers (the chart's autoscaling.maxReplicas or keda.maxReplicaCount), raise "
    "max_connections, or put PgBouncer in transaction mode between the workers and PostgreSQL "
    "(docs/deployment.md#connection-budget)"
)
"""What to change, in every message about a budget that is tight or exceeded."""


class Kind(StrEnum):
    WORKER = "worker"
    OPERATOR = "operator"
    CONSOLE = "console"


@dataclass(frozen=True)
class Footprint:
    """The most connections one process holds on the server at once, by what holds them."""

    kind: Kind
    parts: tuple[tuple[str, int], ...]

    @property
    def total(self) -> int:
        return sum(count for _, count in self.parts)

    def __str__(self) -> str:
        listed = ", ".join(f"{count} {what}" for what, count in self.parts if count)
        return f"{self.total} ({listed})" if listed else "0"


def worker(*, listening: bool = True, probing: bool = True, pooled: bool = False) -> Footprint:
    """A worker's: ``listening`` when it LISTENs (directly, on ``--listen-url`` or on the
    database URL); ``probing`` when it serves ``/readyz`` (``--http-port`` not 0); ``pooled``
    when ``--database-url`` goes through a transaction-mode pooler, whose server connections
    are not the worker's to count (only its direct listener is)."""
    if pooled:
        return Footprint(Kind.WORKER, (("listener", LISTENER if listening else 0),))
    return Footprint(
        Kind.WORKER,
        (
            ("pool", WORKER_POOL),
            ("heartbeat", HEARTBEAT),
            ("listener", LISTENER if listening else 0),
            ("readiness probe", PROBE if probing else 0),
            ("App pool", APP_POOL),
        ),
    )


def operator() -> Footprint:
    return Footprint(Kind.OPERATOR, (("pool", OPERATOR_POOL), ("readiness probe", PROBE)))


def console() -> Footprint:
    """The console's (``tickwork admin``), which registers nowhere: count its replicas."""
    return Footprint(Kind.CONSOLE, (("App pool", APP_POOL), ("readiness probe", PROBE)))


UNRECORDED: dict[Kind, int] = {Kind.WORKER: worker().total, Kind.OPERATOR: operator().total}
"""What a registered process without a recorded number (an earlier version, before migration
0023) is counted as: that version opened as many as this one does with its defaults."""


@dataclass(frozen=True)
class Fleet:
    """The live registered processes of one kind."""

    kind: Kind
    processes: int
    recorded: int
    """The sum of the numbers they recorded."""
    unrecorded: int = 0
    """How many of them recorded none (an earlier version): each counts as :data:`UNRECORDED`."""

    @property
    def connections(self) -> int:
        return self.recorded + self.unrecorded * UNRECORDED.get(self.kind, 0)

    def __str__(self) -> str:
        noun = self.kind.value + ("" if self.processes == 1 else "s")
        unknown = (
            f", {self.unrecorded} of an earlier version counted as "
            f"{UNRECORDED.get(self.kind, 0)} each"
            if self.unrecorded
            else ""
        )
        return f"{self.processes} {noun}: {self.connections}{unknown}"


@dataclass(frozen=True)
class Server:
    """What the server allows tickwork's roles (which are not superusers)."""

    max_connections: int
    superuser_reserved: int
    """``superuser_reserved_connections``."""
    reserved: int = 0
    """``reserved_connections`` (PostgreSQL 16 and later; 0 before): for roles with
    pg_use_reserved_connections, not for tickwork's."""

    @property
    def available(self) -> int:
        return max(0, self.max_connections - self.superuser_reserved - self.reserved)

    def __str__(self) -> str:
        text = (
            f"{self.available} available (max_connections {self.max_connections} - "
            f"superuser_reserved_connections {self.superuser_reserved}"
        )
        if self.reserved:
            text += f" - reserved_connections {self.reserved}"
        return text + ")"


class Verdict(StrEnum):
    OK = "ok"
    TIGHT = "tight"
    """More than :data:`WARN_SHARE` of the available connections."""
    OVER = "over"
    """More than the available connections."""


@dataclass(frozen=True)
class Budget:
    """The live fleet's connections, and the starting process's own (not registered yet),
    against what the server allows."""

    server: Server
    fleet: tuple[Fleet, ...]
    own: Footprint | None = None

    @property
    def fleet_connections(self) -> int:
        return sum(f.connections for f in self.fleet)

    @property
    def total(self) -> int:
        return self.fleet_connections + (self.own.total if self.own else 0)

    @property
    def verdict(self) -> Verdict:
        available = self.server.available
        if self.total > available:
            return Verdict.OVER
        if self.total > WARN_SHARE * available:
            return Verdict.TIGHT
        return Verdict.OK

    def __str__(self) -> str:
        """``may open 106 connections: 7 workers: 91, 1 operator: 3, this worker 13 (6 pool,
        ...); the server has 97 available (max_connections 100 - ...)``"""
        parts = [str(f) for f in self.fleet if f.processes]
        if self.own is not None:
            parts.append(f"this {self.own.kind.value} {self.own}")
        listed = "; ".join(parts) or "none registered"
        return (
            f"the tickwork fleet may open {self.total} connections ({listed}); the server has "
            f"{self.server}"
        )


def report(budget: Budget, logger: logging.Logger, **extra: object) -> Verdict:
    """Log the budget once at a process's start: INFO when it fits, WARNING above
    :data:`WARN_SHARE` of the available connections, ERROR above all of them (the process
    starts all the same), each with the numbers and what to change."""
    verdict = budget.verdict
    share = budget.total / budget.server.available if budget.server.available else float("inf")
    where = fields(action="connection_budget", count=budget.total, **extra)
    if verdict is Verdict.OVER:
        logger.error(
            "connection budget exceeded: %s; once they all run, connections will be refused "
            "(FATAL: sorry, too many clients already): %s",
            budget,
            ADVICE,
            extra=where,
        )
    elif verdict is Verdict.TIGHT:
        logger.warning(
            "connection budget tight (%.0f%%): %s; %s",
            100 * share,
            budget,
            ADVICE,
            extra=where,
        )
    else:
        logger.info("connection budget: %s", budget, extra=where)
    return verdict


def report_pooled(own: Footprint, logger: logging.Logger, **extra: object) -> None:
    """Behind a transaction pooler, the server's connections are the pooler's: say so instead
    of comparing (``tickwork doctor`` shows what the server has in use)."""
    logger.info(
        "connection budget not checked: behind a transaction pooler the server's connections "
        "are the pooler's (size its default_pool_size for the fleet); this worker holds %s "
        "directly",
        own,
        extra=fields(action="connection_budget", count=own.total, **extra),
    )
