"""``tickwork doctor``: the connection budget and the PostgreSQL settings that matter to tickwork,
each judged ``ok`` or ``warn`` with what to change.

The budget: the live fleet's registered connections (workers and operators record the most they
hold, :mod:`tickwork.db.budget`) against ``max_connections`` less the reserved slots, what the
server has in use now, what one more worker would add, and the ``CONNECTION LIMIT`` of the
command's role and database. The settings: ``max_connections``,
``superuser_reserved_connections`` (and ``reserved_connections`` from PostgreSQL 16),
``idle_in_transaction_session_timeout``, ``statement_timeout``, ``lock_timeout``, autovacuum
(globally and ``tickwork.jobs``' own storage options), ``tickwork.jobs``' dead rows and last
vacuum, the oldest open transaction, and pending migrations. Read as this command's session
sees them: settings made per database or per role (``ALTER ROLE tickwork SET …``) count when
the command connects as that role.

Exit status: 0 when every check is ok, 3 when one says what to change (:data:`EXIT_CHANGE`), 1
when the database cannot be read (unreachable, not migrated), 2 for a wrong command line.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tickwork.cli import common, output
from tickwork.db import budget, connections, migrate, server, store
from tickwork.errors import MIGRATE_HINT, SchemaMissing

EXIT_CHANGE = 3
"""Some check says what to change (distinct from 1: the checks could not run)."""

BUDGET_MIGRATION = 23
"""The migration that records each process's connections: without it the fleet's is unknown."""

SETTINGS = (
    "max_connections",
    "superuser_reserved_connections",
    "reserved_connections",
    "idle_in_transaction_session_timeout",
    "statement_timeout",
    "lock_timeout",
    "autovacuum",
    "track_counts",
    "autovacuum_vacuum_threshold",
    "autovacuum_vacuum_scale_factor",
)

SHORT_STATEMENT_TIMEOUT_MS = 60_000
"""A ``statement_timeout`` below this may cancel a claim or a firing pass on a large backlog."""
SHORT_LOCK_TIMEOUT_MS = 1_000
"""A ``lock_timeout`` below this fails claims that wait for the flow rules' row locks."""
LONG_TRANSACTION_SECONDS = 3600.0
"""An open transaction older than this holds back the vacuum of every table."""
DEAD_ROWS_FLOOR = 10_000
"""Fewer dead rows than this are never a concern."""

OK = "ok"
WARN = "warn"


@dataclass(frozen=True)
class Check:
    name: str
    value: str
    """For people."""
    verdict: str
    change: str | None = None
    """What to change (a ``warn``), or a hint."""
    data: Mapping[str, Any] = field(default_factory=dict)
    """For programs (``-o json``)."""


@dataclass(frozen=True)
class Findings:
    """What the command read from the server."""

    limits: budget.Server
    fleet: tuple[budget.Fleet, ...] | None
    """None: the registry does not record connections yet (migration 0023 pending)."""
    activity: server.Activity
    own_limits: server.OwnLimits
    settings: dict[str, server.Setting]
    jobs: server.JobsTable
    pending: tuple[str, ...]


def register(subcommands: common.Subcommands) -> None:
    parser = subcommands.add_parser(
        "doctor",
        help="check the connection budget and the PostgreSQL settings tickwork relies on",
        description="Print the connection budget (max_connections less the reserved slots, "
        "the connections in use, the live fleet's registered connections, what one more "
        "worker adds) and the PostgreSQL settings that matter to tickwork, each ok or warn "
        "with what to change. Exit status 0: all ok; 3: something to change; 1: the database "
        "cannot be read.",
    )
    common.add_database_url(parser)
    common.add_output(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace, env: common.Env) -> int:
    findings = read(common.database_url(args, env))
    checks = judge(findings)
    if args.output == "json":
        print(output.dumps([check_object(c) for c in checks]))
    else:
        print(render(findings, checks))
    return EXIT_CHANGE if any(c.verdict == WARN for c in checks) else 0


def read(url: str) -> Findings:
    states = migrate.status(url)
    applied = {s.migration.version for s in states if s.applied}
    if not applied:
        raise SchemaMissing(f"the database is not migrated (no tickwork schema): {MIGRATE_HINT}")
    pending = tuple(s.migration.name for s in states if not s.applied)
    with (
        connections.connect(
            url, autocommit=True, timeout=connections.CONNECT_TIMEOUT_SECONDS
        ) as conn,
        connections.schema_required(),
    ):
        fleet = None
        if BUDGET_MIGRATION in applied:
            fleet = store.run(conn, server.fleet_connections(None))
        return Findings(
            limits=store.run(conn, server.connection_limits()),
            fleet=fleet,
            activity=store.run(conn, server.activity()),
            own_limits=store.run(conn, server.own_limits()),
            settings=store.run(conn, server.settings(SETTINGS)),
            jobs=store.run(conn, server.jobs_table()),
            pending=pending,
        )


# --- judging (pure) ----------------------------------------------------------------------


def milliseconds(setting: server.Setting | None) -> int:
    """A time setting in milliseconds (0: off; missing: 0)."""
    if setting is None:
        return 0
    scale = {"ms": 1, "s": 1000, "min": 60_000}.get(setting.unit or "ms", 1)
    return int(float(setting.setting) * scale)


def duration(ms: int) -> str:
    """``0 (off)``, ``250ms``, ``30s``, ``10min``, ``1.5h``."""
    if ms <= 0:
        return "0 (off)"
    if ms < 1000:
        return f"{ms}ms"
    if ms < 60_000:
        return f"{ms / 1000:g}s"
    if ms < 3_600_000:
        return f"{ms / 60_000:g}min"
    return f"{ms / 3_600_000:g}h"


def needed_max_connections(total: int, limits: budget.Server) -> int:
    """The ``max_connections`` at which ``total`` is within :data:`budget.WARN_SHARE` of the
    available connections."""
    reserved = limits.max_connections - limits.available
    return math.ceil(total / budget.WARN_SHARE) + reserved


def room(fleet_total: int, available: int, each: int, share: float = 1.0) -> int:
    """How many more processes of ``each`` connections fit within ``share`` of ``available``."""
    if each <= 0:
        return 0
    return max(0, math.floor((share * available - fleet_total) / each))


def judge(f: Findings) -> list[Check]:
    """Every check, in the order printed."""
    checks = [*_budget_checks(f), *_settings_checks(f), *_jobs_checks(f)]
    if f.pending:
        checks.append(
            Check(
                "migrations",
                f"{len(f.pending)} pending",
                WARN,
                f"run `tickwork migrate` (pending: {', '.join(f.pending)})",
                {"pending": list(f.pending)},
            )
        )
    else:
        checks.append(Check("migrations", "up to date", OK, data={"pending": []}))
    return checks


def _budget_checks(f: Findings) -> list[Check]:
    limits = f.limits
    available = limits.available
    worker = budget.worker()
    checks = []
    if f.fleet is None:
        checks.append(
            Check(
                "connection budget",
                "unknown",
                WARN,
                "run `tickwork migrate`: migration 0023 records each process's connections",
                {"available": available},
            )
        )
        total = 0
    else:
        found = budget.Budget(limits, f.fleet)
        total = found.total
        verdict = found.verdict
        data = {
            "max_connections": limits.max_connections,
            "superuser_reserved_connections": limits.superuser_reserved,
            "reserved_connections": limits.reserved,
            "available": available,
            "connections": total,
            "fleet": [
                {
                    "kind": fleet.kind.value,
                    "processes": fleet.processes,
                    "connections": fleet.connections,
                    "unrecorded": fleet.unrecorded,
                }
                for fleet in f.fleet
            ],
            "worker_connections": worker.total,
            "room_for_workers": room(total, available, worker.total),
        }
        checks.append(
            Check(
                "connection budget",
                f"{total} of {available} available ({_percent(total, available)})",
                OK if verdict is budget.Verdict.OK else WARN,
                None
                if verdict is budget.Verdict.OK
                else f"the fleet may open {verdict_words(verdict)}: {budget.ADVICE}",
                data,
            )
        )
    in_use = f.activity.in_use
    busy = in_use > budget.WARN_SHARE * available
    checks.append(
        Check(
            "connections in use",
            f"{in_use} of {available} ({_percent(in_use, available)})",
            WARN if busy else OK,
            "most of the server's connections are taken now: see who holds them with "
            "SELECT usename, application_name, count(*) FROM pg_stat_activity GROUP BY 1, 2"
            if busy
            else None,
            {"in_use": in_use, "in_database": f.activity.in_database, "available": available},
        )
    )
    tight = total > budget.WARN_SHARE * available
    needed = needed_max_connections(total, limits)
    checks.append(
        Check(
            "max_connections",
            str(limits.max_connections),
            WARN if tight else OK,
            f"raise it to at least {needed} (the fleet's {total} within "
            f"{budget.WARN_SHARE:.0%} of what is left after the reserved slots), or shrink the "
            "fleet"
            if tight
            else None,
            {"setting": limits.max_connections, "needed": needed},
        )
    )
    checks.append(_own_limits_check(f.own_limits, total if f.fleet is not None else None))
    reserved = f"{limits.superuser_reserved}"
    if "reserved_connections" in f.settings:
        reserved += f" + reserved_connections {limits.reserved}"
    checks.append(
        Check(
            "superuser_reserved_connections",
            reserved,
            OK,
            None,
            {"setting": limits.superuser_reserved, "reserved_connections": limits.reserved},
        )
    )
    return checks


def _own_limits_check(own: server.OwnLimits, total: int | None) -> Check:
    """The role's and the database's CONNECTION LIMIT, against the fleet when it connects as
    this role to this database (as the command is meant to)."""
    limits = [
        (f"role {own.role}", own.role_limit, f"ALTER ROLE {own.role} CONNECTION LIMIT"),
        (
            f"database {own.database}",
            own.database_limit,
            f"ALTER DATABASE {own.database} CONNECTION LIMIT",
        ),
    ]
    set_ = [(what, limit, fix) for what, limit, fix in limits if limit >= 0]
    data = {
        "role": own.role,
        "role_limit": own.role_limit,
        "database": own.database,
        "database_limit": own.database_limit,
    }
    if not set_:
        return Check("role and database connection limits", "none", OK, None, data)
    value = ", ".join(f"{what}: {limit}" for what, limit, _ in set_)
    tight = [
        (what, limit, fix)
        for what, limit, fix in set_
        if total is not None and total > budget.WARN_SHARE * limit
    ]
    if not tight:
        return Check("role and database connection limits", value, OK, None, data)
    what, limit, fix = min(tight, key=lambda t: t[1])
    needed = math.ceil((total or 0) / budget.WARN_SHARE)
    return Check(
        "role and database connection limits",
        value,
        WARN,
        f"the fleet may open {total} connections but {what} allows {limit}: raise it "
        f"({fix} {needed}), if the fleet connects as this role to this database",
        data,
    )


def verdict_words(verdict: budget.Verdict) -> str:
    if verdict is budget.Verdict.OVER:
        return "more connections than the server allows"
    return f"more than {budget.WARN_SHARE:.0%} of the connections the server allows"


def _settings_checks(f: Findings) -> list[Check]:
    checks = []
    idle = milliseconds(f.settings.get("idle_in_transaction_session_timeout"))
    checks.append(
        Check(
            "idle_in_transaction_session_timeout",
            duration(idle),
            OK if idle else WARN,
            None
            if idle
            else "set it for tickwork's role (ALTER ROLE tickwork SET "
            "idle_in_transaction_session_timeout = '10min'): a session left idle in a "
            "transaction keeps vacuum from removing tickwork.jobs' dead rows and holds its "
            "locks; tickwork's own transactions never wait on a client",
            {"milliseconds": idle},
        )
    )
    statement = milliseconds(f.settings.get("statement_timeout"))
    short = 0 < statement < SHORT_STATEMENT_TIMEOUT_MS
    checks.append(
        Check(
            "statement_timeout",
            duration(statement),
            WARN if short else OK,
            f"raise it to {duration(SHORT_STATEMENT_TIMEOUT_MS)} or more for tickwork's role: "
            "a claim or a firing pass on a large backlog may take longer, and is then "
            "cancelled and retried over and over"
            if short
            else None,
            {"milliseconds": statement},
        )
    )
    lock = milliseconds(f.settings.get("lock_timeout"))
    short = 0 < lock < SHORT_LOCK_TIMEOUT_MS
    checks.append(
        Check(
            "lock_timeout",
            duration(lock),
            WARN if short else OK,
            f"raise it to {duration(SHORT_LOCK_TIMEOUT_MS)} or more (or 0) for tickwork's "
            "role: a claim waits briefly for the flow rules' row locks"
            if short
            else None,
            {"milliseconds": lock},
        )
    )
    autovacuum = _on(f.settings.get("autovacuum"))
    counting = _on(f.settings.get("track_counts"))
    checks.append(
        Check(
            "autovacuum",
            ("on" if autovacuum else "off") + ("" if counting else ", track_counts off"),
            OK if autovacuum and counting else WARN,
            None
            if autovacuum and counting
            else "turn on autovacuum and track_counts (postgresql.conf): every job is updated "
            "as it runs and deleted by retention, and tickwork.jobs bloats without vacuum",
            {"autovacuum": autovacuum, "track_counts": counting},
        )
    )
    return checks


def _on(setting: server.Setting | None) -> bool:
    return setting is None or setting.setting == "on"


def _jobs_checks(f: Findings) -> list[Check]:
    options = f.jobs.options
    own = {k: v for k, v in options.items() if k.startswith(("autovacuum", "toast.autovacuum"))}
    disabled = own.get("autovacuum_enabled", "true").lower() in ("false", "off", "0", "no")
    checks = [
        Check(
            "tickwork.jobs autovacuum",
            ", ".join(f"{k}={v}" for k, v in sorted(own.items())) or "the server's settings",
            WARN if disabled else OK,
            "ALTER TABLE tickwork.jobs RESET (autovacuum_enabled): the jobs table churns "
            "more than any other"
            if disabled
            else None,
            {"options": own},
        )
    ]
    threshold = float(
        own.get("autovacuum_vacuum_threshold") or _setting(f, "autovacuum_vacuum_threshold", 50)
    )
    scale = float(
        own.get("autovacuum_vacuum_scale_factor")
        or _setting(f, "autovacuum_vacuum_scale_factor", 0.2)
    )
    trigger = threshold + scale * f.jobs.live_rows
    dead = f.jobs.dead_rows
    behind = dead > max(2 * trigger, DEAD_ROWS_FLOOR)
    last = f.jobs.last_vacuum_at
    ago = "never vacuumed" if last is None else f"last vacuum {_ago(f.jobs.now - last)} ago"
    checks.append(
        Check(
            "tickwork.jobs dead rows",
            f"{dead} dead of {dead + f.jobs.live_rows}, {ago}",
            WARN if behind else OK,
            "autovacuum is behind on tickwork.jobs: look for a long open transaction (below), "
            "or vacuum it sooner: ALTER TABLE tickwork.jobs SET "
            "(autovacuum_vacuum_scale_factor = 0.02)"
            if behind
            else None,
            {
                "dead_rows": dead,
                "live_rows": f.jobs.live_rows,
                "autovacuum_trigger": round(trigger),
                "last_vacuum_at": output.iso(last),
                "last_autovacuum_at": output.iso(f.jobs.last_autovacuum_at),
            },
        )
    )
    oldest = f.activity.oldest_transaction_seconds
    long = oldest is not None and oldest > LONG_TRANSACTION_SECONDS
    checks.append(
        Check(
            "oldest open transaction",
            ("none" if oldest is None else _ago_seconds(oldest))
            + f", {f.activity.idle_in_transaction} idle in transaction",
            WARN if long else OK,
            "end it (pg_terminate_backend) and find who left it open: it keeps vacuum from "
            "removing any row deleted since it began"
            if long
            else None,
            {
                "seconds": oldest,
                "idle_in_transaction": f.activity.idle_in_transaction,
            },
        )
    )
    return checks


def _setting(f: Findings, name: str, default: float) -> float:
    found = f.settings.get(name)
    return float(found.setting) if found is not None else default


def _ago(delta: Any) -> str:
    return _ago_seconds(delta.total_seconds())


def _ago_seconds(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}min"
    if seconds < 172800:
        return f"{seconds / 3600:.0f}h"
    return f"{seconds / 86400:.0f}d"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "no connection left"


# --- output ------------------------------------------------------------------------------


def check_object(check: Check) -> Mapping[str, Any]:
    """A check as ``-o json`` prints it."""
    return {
        "check": check.name,
        "verdict": check.verdict,
        "value": check.value,
        "change": check.change,
        **check.data,
    }


def render(f: Findings, checks: list[Check]) -> str:
    limits = f.limits
    worker = budget.worker()
    lines = ["Connection budget"]
    rows: list[tuple[str, str]] = [("server", str(limits))]
    rows.append(
        (
            "in use now",
            f"{_count(f.activity.in_use, 'client connection')}, {f.activity.in_database} to "
            "this database (this one included)",
        )
    )
    total = 0
    if f.fleet is None:
        rows.append(("fleet", "unknown until migration 0023 is applied"))
    else:
        for fleet in f.fleet:
            rows.append((f"{fleet.kind.value}s", _fleet_line(fleet)))
        total = sum(fleet.connections for fleet in f.fleet)
    console = budget.console()
    rows.append(("consoles", f"not registered: {console} each; add your admin replicas"))
    rows.append(("one more worker", str(worker)))
    if f.fleet is not None:
        tight = room(total, limits.available, worker.total, budget.WARN_SHARE)
        rows.append(
            (
                "fleet total",
                f"{total} of {limits.available} ({_percent(total, limits.available)}); room for "
                f"{_count(tight, 'more worker')} within {budget.WARN_SHARE:.0%}, "
                f"{room(total, limits.available, worker.total)} within all",
            )
        )
    width = max(len(name) for name, _ in rows)
    lines += [f"  {name.ljust(width)}  {text}" for name, text in rows]
    lines += ["", output.table(("CHECK", "VERDICT", "VALUE"), [_row(c) for c in checks])]
    changes = [c for c in checks if c.change and c.verdict == WARN]
    if changes:
        lines += ["", "What to change"]
        lines += [f"  {c.name}: {c.change}" for c in changes]
    else:
        lines += ["", "Nothing to change."]
    return "\n".join(lines)


def _row(check: Check) -> tuple[str, str, str]:
    return (check.name, check.verdict, check.value)


def _fleet_line(fleet: budget.Fleet) -> str:
    if not fleet.processes:
        return "none live"
    text = f"{fleet.processes} live: {fleet.connections} connections"
    if fleet.unrecorded:
        text += (
            f" ({fleet.unrecorded} of an earlier version, counted as "
            f"{budget.UNRECORDED[fleet.kind]} each)"
        )
    return text
