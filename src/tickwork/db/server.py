"""Operations reading the PostgreSQL server (``db/sql/server.sql``): its connection limits and
activity, the settings ``tickwork doctor`` judges, ``tickwork.jobs``' vacuum state, and the
connections the live fleet registered (the arithmetic is :mod:`tickwork.db.budget`'s)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tickwork.db import connections
from tickwork.db.budget import Budget, Fleet, Footprint, Kind, Server, report
from tickwork.db.store import Op, Row, arun, run
from tickwork.logs import fields

START_TIMEOUT_SECONDS = 3
"""How long :func:`check_at_start` waits for a connection: the budget is worth a line in the
log, not a slow start (an unreachable database is the caller's to retry and report)."""


def connection_limits() -> Op[Server]:
    return Op(
        "server_connection_limits",
        {},
        lambda rows: Server(
            max_connections=rows[0]["max_connections"],
            superuser_reserved=rows[0]["superuser_reserved"],
            reserved=rows[0]["reserved"],
        ),
    )


def fleet_connections(now: datetime | None) -> Op[tuple[Fleet, ...]]:
    """The live workers and operators, each kind's recorded connections summed."""
    return Op(
        "server_fleet_connections",
        {"now": now},
        lambda rows: tuple(
            Fleet(Kind(r["kind"]), r["processes"], r["recorded"], r["unrecorded"]) for r in rows
        ),
    )


@dataclass(frozen=True)
class Activity:
    in_use: int
    """Client connections open on the whole server now."""
    in_database: int
    idle_in_transaction: int
    oldest_transaction_seconds: float | None


def activity() -> Op[Activity]:
    return Op("server_activity", {}, lambda rows: Activity(**rows[0]))


@dataclass(frozen=True)
class OwnLimits:
    """The ``CONNECTION LIMIT`` of this session's role and of its database (-1: none)."""

    role: str
    role_limit: int
    database: str
    database_limit: int


def own_limits() -> Op[OwnLimits]:
    return Op("server_own_limits", {}, lambda rows: OwnLimits(**rows[0]))


@dataclass(frozen=True)
class Setting:
    name: str
    setting: str
    unit: str | None


def settings(names: Sequence[str]) -> Op[dict[str, Setting]]:
    """The named settings as this session sees them; a name the server lacks is left out."""
    return Op(
        "server_settings",
        {"names": list(names)},
        lambda rows: {r["name"]: Setting(**r) for r in rows},
    )


@dataclass(frozen=True)
class JobsTable:
    options: dict[str, str]
    """Its storage options (``reloptions``): ``autovacuum_enabled``, ``fillfactor``, ..."""
    live_rows: int
    dead_rows: int
    last_vacuum_at: datetime | None
    """The last vacuum, by autovacuum or by hand."""
    last_autovacuum_at: datetime | None
    now: datetime


def _jobs_table(rows: list[Row]) -> JobsTable:
    row: dict[str, Any] = dict(rows[0])
    row["options"] = dict(option.partition("=")[::2] for option in row["options"])
    return JobsTable(**row)


def jobs_table() -> Op[JobsTable]:
    return Op("server_jobs_table", {}, _jobs_table)


def budget(conn: connections.Connection, own: Footprint | None, now: datetime | None) -> Budget:
    """The live fleet's connections (and ``own``, a process not registered yet) against the
    server's limits."""
    return Budget(run(conn, connection_limits()), run(conn, fleet_connections(now)), own)


async def abudget(
    conn: connections.AsyncConnection, own: Footprint | None, now: datetime | None
) -> Budget:
    """:func:`budget` on an async connection."""
    limits = await arun(conn, connection_limits())
    return Budget(limits, await arun(conn, fleet_connections(now)), own)


def check_at_start(url: str, own: Footprint, logger: logging.Logger, **extra: object) -> None:
    """Read the budget on a connection of its own and log it once
    (:func:`tickwork.db.budget.report`), for a process starting without a pool yet; a budget
    that cannot be read is a warning, never a failure to start."""
    try:
        with connections.connect(url, timeout=START_TIMEOUT_SECONDS) as conn:
            found = budget(conn, own, None)
    except connections.DatabaseError as exc:
        logger.warning(
            "connection budget not checked: %s: %s",
            type(exc).__name__,
            " ".join(str(exc).split()) or "?",
            extra=fields(action="connection_budget", **extra),
        )
        return
    report(found, logger, **extra)
