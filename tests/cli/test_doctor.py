"""``tickwork doctor`` and the workers' start-up budget against a PostgreSQL with a small
``max_connections`` (20, of which 3 are reserved for superusers: 17 for tickwork): the real
command as a subprocess, with fake live workers and operators registered, and real worker
processes whose fleet outgrows the server, each warning with the numbers."""

from __future__ import annotations

import itertools
import json
import os
import queue
import signal
import subprocess
import tempfile
import textwrap
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from tests.cli.test_cli import TICKWORK, _env, _with_path, one_line_error, tickwork_cmd
from tests.db.test_pgbouncer import bouncer  # noqa: F401 (a fixture)
from tickwork.cli import doctor
from tickwork.db import budget, embedded, migrate, server, store
from tickwork.db import workers as workers_db
from tickwork.db.embedded import EmbeddedPostgres

MAX_CONNECTIONS = 20
AVAILABLE = 17  # less superuser_reserved_connections' default 3
DEADLINE = 30.0

_numbers = itertools.count(1)


@pytest.fixture(scope="module")
def small_server() -> Iterator[str]:
    """A server of its own with max_connections 20; conninfo of its ``postgres`` database."""
    with tempfile.TemporaryDirectory(prefix="tickwork-test-small-pg-") as tmp:
        os.chmod(tmp, 0o711)  # the server's user must reach it
        settings = (f"max_connections={MAX_CONNECTIONS}",)
        with EmbeddedPostgres(Path(tmp), durable=False, settings=settings) as server:
            yield server.conninfo


@pytest.fixture(scope="module")
def small_template(small_server: str) -> str:
    name = "small_template"
    with psycopg.connect(small_server, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    migrate.apply(make_conninfo(small_server, dbname=name))
    return name


@pytest.fixture
def small_url(small_server: str, small_template: str) -> Iterator[str]:
    """A fresh migrated database on the small server."""
    database = f"small_{next(_numbers)}"
    name = sql.Identifier(database)
    with psycopg.connect(small_server, autocommit=True) as admin:
        admin.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(name, sql.Identifier(small_template))
        )
    yield make_conninfo(small_server, dbname=database)
    with psycopg.connect(small_server, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(name))


@pytest.fixture
def small_conn(small_url: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(small_url, autocommit=True) as conn:
        yield conn


def register(
    conn: psycopg.Connection,
    name: str,
    connections: int | None,
    *,
    heartbeat_seconds: float = 3600.0,
    now: Any = None,
) -> None:
    """A live worker row, as a worker of this version (``connections``) or an earlier one
    (None) writes it; a long heartbeat keeps it live for the test."""
    store.run(
        conn,
        workers_db.register_worker(
            name=name,
            queues=["default"],
            kinds=["budget.noop"],
            namespaces=[],
            concurrency=10,
            host="elsewhere",
            pid=1,
            heartbeat_seconds=heartbeat_seconds,
            connections=connections,
            now=now,
        ),
    )


def register_operator(conn: psycopg.Connection, identity: str) -> None:
    conn.execute(
        "INSERT INTO tickwork.operators (owner, identity, token, scope, host, pid, connections,"
        " expires_at) VALUES ('operator:x', %s, 't', '{}', 'h', 1, 3, now() + interval '1h')",
        (identity,),
    )


# --- the verdicts, without a server ---------------------------------------------------------

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


def findings(**changes: Any) -> doctor.Findings:
    """What a healthy server shows; ``settings`` entries and other fields replaced."""
    settings = {
        "idle_in_transaction_session_timeout": ("600000", "ms"),
        "statement_timeout": ("0", "ms"),
        "lock_timeout": ("0", "ms"),
        "autovacuum": ("on", None),
        "track_counts": ("on", None),
        "autovacuum_vacuum_threshold": ("50", None),
        "autovacuum_vacuum_scale_factor": ("0.2", None),
        **changes.pop("settings", {}),
    }
    base = doctor.Findings(
        limits=budget.Server(100, 3),
        fleet=(budget.Fleet(budget.Kind.WORKER, 2, 26), budget.Fleet(budget.Kind.OPERATOR, 1, 3)),
        activity=server.Activity(20, 18, 0, 2.0),
        own_limits=server.OwnLimits("tickwork", -1, "app", -1),
        settings={
            name: server.Setting(name, value, unit) for name, (value, unit) in settings.items()
        },
        jobs=server.JobsTable({}, 100_000, 500, NOW - timedelta(minutes=3), None, NOW),
        pending=(),
    )
    return replace(base, **changes)


def verdicts(found: doctor.Findings) -> dict[str, str]:
    return {check.name: check.verdict for check in doctor.judge(found)}


def test_a_healthy_server_is_ok_throughout() -> None:
    assert set(verdicts(findings()).values()) == {"ok"}


@pytest.mark.parametrize(
    ("changes", "check", "words"),
    [
        ({"settings": {"idle_in_transaction_session_timeout": ("0", "ms")}},
         "idle_in_transaction_session_timeout", "ALTER ROLE tickwork SET"),
        ({"settings": {"statement_timeout": ("5", "s")}}, "statement_timeout", "raise it to 1min"),
        ({"settings": {"lock_timeout": ("200", "ms")}}, "lock_timeout", "raise it to 1s"),
        ({"settings": {"autovacuum": ("off", None)}}, "autovacuum", "turn on autovacuum"),
        ({"settings": {"track_counts": ("off", None)}}, "autovacuum", "track_counts"),
        ({"jobs": server.JobsTable({"autovacuum_enabled": "false"}, 10, 0, None, None, NOW)},
         "tickwork.jobs autovacuum", "RESET (autovacuum_enabled)"),
        ({"jobs": server.JobsTable({}, 100_000, 50_000, None, None, NOW)},
         "tickwork.jobs dead rows", "autovacuum is behind"),
        ({"activity": server.Activity(20, 18, 1, 7200.0)},
         "oldest open transaction", "pg_terminate_backend"),
        ({"activity": server.Activity(90, 18, 0, None)}, "connections in use", "pg_stat_activity"),
        ({"fleet": (budget.Fleet(budget.Kind.WORKER, 6, 78),)}, "connection budget", "PgBouncer"),
        ({"fleet": (budget.Fleet(budget.Kind.WORKER, 6, 78),)}, "max_connections",
         "at least 101"),  # ceil(78 / 0.8) + 3
        ({"fleet": None}, "connection budget", "migration 0023"),
        ({"pending": ("0023_connection_budget.sql",)}, "migrations", "tickwork migrate"),
        ({"own_limits": server.OwnLimits("tickwork", 30, "app", -1)},
         "role and database connection limits", "ALTER ROLE tickwork CONNECTION LIMIT 37"),
        ({"own_limits": server.OwnLimits("tickwork", 100, "app", 20)},
         "role and database connection limits", "database app allows 20"),
    ],
)  # fmt: skip
def test_each_check_warns_with_what_to_change(
    changes: dict[str, Any], check: str, words: str
) -> None:
    found = {c.name: c for c in doctor.judge(findings(**changes))}
    assert found[check].verdict == "warn"
    assert words in (found[check].change or "")
    assert [name for name, c in found.items() if c.verdict == "warn"] in (
        [check],
        ["connection budget", "max_connections"],  # the two sides of one budget
    )


def test_a_long_statement_timeout_and_the_tables_own_vacuum_settings_are_fine() -> None:
    found = findings(
        settings={"statement_timeout": ("5", "min")},
        jobs=server.JobsTable(
            {"autovacuum_vacuum_scale_factor": "0.01", "fillfactor": "80"}, 10, 0, None, None, NOW
        ),
    )
    checks = {c.name: c for c in doctor.judge(found)}
    assert checks["statement_timeout"].value == "5min"
    assert checks["tickwork.jobs autovacuum"].value == "autovacuum_vacuum_scale_factor=0.01"
    assert set(verdicts(found).values()) == {"ok"}


# --- the real command against the small server ----------------------------------------------


def test_doctor_on_a_small_server_names_the_budget_and_what_to_change(
    small_url: str, small_conn: psycopg.Connection
) -> None:
    register(small_conn, "w-1", 13)
    register(small_conn, "w-2", None)  # an earlier version: counted as 13
    register(small_conn, "w-gone", 13, heartbeat_seconds=1, now=None)
    small_conn.execute(
        "UPDATE tickwork.workers SET last_seen_at = now() - interval '1 minute'"
        " WHERE name = 'w-gone'"
    )  # missed two heartbeats: stale, not counted
    register_operator(small_conn, "op-1")
    database = small_conn.info.dbname
    small_conn.execute(
        sql.SQL("ALTER DATABASE {} CONNECTION LIMIT 20").format(sql.Identifier(database))
    )

    result = tickwork_cmd("doctor", database_url=small_url)

    assert result.returncode == 3, (result.stdout, result.stderr)
    assert result.stderr == ""
    out = result.stdout
    print(out)  # the sample in the report
    assert (
        "server           17 available (max_connections 20 - superuser_reserved_connections 3)"
        in out
    )
    assert (
        "workers          2 live: 26 connections (1 of an earlier version, counted as 13 each)"
        in out
    )
    assert "operators        1 live: 3 connections" in out
    assert (
        "one more worker  13 (6 pool, 1 heartbeat, 1 listener, 1 readiness probe, 4 App pool)"
        in out
    )
    assert (
        "fleet total      29 of 17 (171%); room for 0 more workers within 80%, 0 within all" in out
    )
    rows = {line.split("  ")[0]: line.split() for line in out.splitlines() if "  " in line}
    assert rows["connection budget"][2:] == ["warn", "29", "of", "17", "available", "(171%)"]
    assert rows["max_connections"][1:] == ["warn", "20"]
    assert rows["idle_in_transaction_session_timeout"][1:] == ["warn", "0", "(off)"]
    assert rows["autovacuum"][1:] == ["ok", "on"]
    assert rows["migrations"][1:] == ["ok", "up", "to", "date"]
    assert rows["role and database connection limits"][5:] == [
        "warn",
        "database",
        f"{database}:",
        "20",
    ]
    assert (
        f"database {database} allows 20: raise it (ALTER DATABASE {database} CONNECTION LIMIT 37)"
        in out
    )
    assert "max_connections: raise it to at least 40" in out  # ceil(29 / 0.8) + 3
    assert "raise max_connections, or put PgBouncer in transaction mode" in out


def test_doctor_prints_json_and_exits_0_when_nothing_needs_changing(
    small_url: str, small_conn: psycopg.Connection
) -> None:
    database = small_conn.info.dbname
    small_conn.execute(
        sql.SQL("ALTER DATABASE {} SET idle_in_transaction_session_timeout = '10min'").format(
            sql.Identifier(database)
        )
    )
    register(small_conn, "w-1", 12)

    result = tickwork_cmd("doctor", "-o", "json", database_url=small_url)

    assert result.returncode == 0, (result.stdout, result.stderr)
    checks = {check["check"]: check for check in json.loads(result.stdout)}
    assert {c["verdict"] for c in checks.values()} == {"ok"}
    found = checks["connection budget"]
    assert found["connections"] == 12
    assert found["available"] == AVAILABLE
    assert found["max_connections"] == MAX_CONNECTIONS
    assert found["superuser_reserved_connections"] == 3
    assert found["fleet"] == [
        {"kind": "worker", "processes": 1, "connections": 12, "unrecorded": 0},
        {"kind": "operator", "processes": 0, "connections": 0, "unrecorded": 0},
    ]
    assert found["worker_connections"] == 13
    assert found["room_for_workers"] == 0  # 12 + 13 > 17
    assert checks["idle_in_transaction_session_timeout"]["milliseconds"] == 600_000
    assert checks["connections in use"]["in_use"] >= 1
    assert checks["tickwork.jobs dead rows"]["dead_rows"] == 0


def test_doctor_before_the_budget_migration_says_to_migrate(
    small_url: str, small_conn: psycopg.Connection
) -> None:
    small_conn.execute("DELETE FROM tickwork.migrations WHERE version = 23")

    result = tickwork_cmd("doctor", database_url=small_url)

    assert result.returncode == 3, result.stderr
    assert "fleet            unknown until migration 0023 is applied" in result.stdout
    assert "migrations: run `tickwork migrate` (pending: 0023_connection_budget.sql)" in (
        result.stdout
    )


def test_doctor_on_an_unmigrated_or_unreachable_database_is_one_line(
    small_server: str,
) -> None:
    empty = "small_empty"
    with psycopg.connect(small_server, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(empty)))
    try:
        line = one_line_error(
            tickwork_cmd("doctor", database_url=make_conninfo(small_server, dbname=empty)), 1
        )
        assert "not migrated" in line and "tickwork migrate" in line
    finally:
        with psycopg.connect(small_server, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE {}").format(sql.Identifier(empty)))

    unreachable = "postgresql://nobody@127.0.0.1:1/none?connect_timeout=2"
    line = one_line_error(tickwork_cmd("doctor", database_url=unreachable), 1)
    assert "cannot connect to the database at 127.0.0.1:1" in line


# --- real workers starting on the small server ---------------------------------------------


class WorkerProcess:
    """``tickwork worker`` as a subprocess, its log read line by line as it comes."""

    def __init__(self, name: str, url: str, app_dir: Path) -> None:
        env = _env(url, PYTHONPATH=_with_path(app_dir))
        self.process = subprocess.Popen(
            [TICKWORK, "worker", "--app", "budget_tasks:app", "--http-port", "0", "--name", name],
            env=env,
            cwd=app_dir,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.log: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.put(line)
        self.lines.put(None)

    def wait_for(self, words: str) -> str:
        deadline = time.monotonic() + DEADLINE
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no log line with {words!r}:\n{''.join(self.log)}")
            try:
                line = self.lines.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                raise AssertionError(f"the worker exited:\n{''.join(self.log)}")
            self.log.append(line)
            if words in line:
                return line

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        assert self.process.wait(DEADLINE) == 0, "".join(self.log)


def test_workers_starting_past_the_budget_warn_then_err_with_the_numbers(
    small_url: str, small_conn: psycopg.Connection, tmp_path: Path
) -> None:
    (tmp_path / "budget_tasks.py").write_text(
        textwrap.dedent(
            """
            import tickwork

            app = tickwork.App()

            @app.task("budget.noop")
            def noop(job):
                pass
            """
        )
    )
    register(small_conn, "elsewhere", 3)  # a live worker of 3 connections
    own = budget.worker(probing=False).total
    assert own == 12  # --http-port 0: no probe
    workers: list[WorkerProcess] = []
    try:
        workers.append(WorkerProcess("a", small_url, tmp_path))
        line = workers[0].wait_for("connection budget")
        # 3 + 12 = 15 of 17: above 80%
        assert " WARNING connection budget tight (88%): " in line
        assert "may open 15 connections (1 worker: 3; this worker 12 (6 pool, 1 heartbeat" in line
        assert "the server has 17 available (max_connections 20 - " in line
        assert "raise max_connections" in line
        assert "action=connection_budget worker=a count=15" in line
        workers[0].wait_for("worker started")

        workers.append(WorkerProcess("b", small_url, tmp_path))
        line = workers[1].wait_for("connection budget")
        # 3 + 12 (a) + 12 = 27 of 17: over, and b starts all the same
        assert " ERROR   connection budget exceeded: " in line
        assert "may open 27 connections (2 workers: 15; this worker 12" in line
        assert "too many clients already" in line
        workers[1].wait_for("worker started")
        recorded = dict(small_conn.execute("SELECT name, connections FROM tickwork.workers"))
        assert recorded == {"elsewhere": 3, "a": own, "b": own}
    finally:
        for worker in workers:
            worker.stop()


def test_doctor_through_pgbouncer_reads_the_servers_settings(
    request: pytest.FixtureRequest,
) -> None:
    """Through a transaction-mode pooler the queries reach the server: its max_connections,
    and in pg_stat_activity its real connections (the pooler's among them)."""
    url = request.getfixturevalue("bouncer")  # tests.db.test_pgbouncer's
    result = tickwork_cmd("doctor", "-o", "json", database_url=url)

    assert result.returncode in (0, 3), result.stderr
    checks = {check["check"]: check for check in json.loads(result.stdout)}
    assert checks["max_connections"]["setting"] == embedded.MAX_CONNECTIONS
    assert checks["connections in use"]["in_use"] >= 1
