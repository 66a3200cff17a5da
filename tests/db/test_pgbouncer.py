"""Every role through PgBouncer in transaction mode (Debian's pgbouncer 1.18, which keeps no
server-side prepared statements, no LISTEN and no session advisory lock across transactions):
``tickwork migrate`` and ``tickwork sync``, enqueues from an App, and several ``tickwork worker``
processes claiming, firing every-second schedules and recording outcomes with
``TICKWORK_POOLER=transaction`` (two of them poll, one listens on a direct URL). Every job
runs once, no worker exits, and no prepared-statement error shows anywhere."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

import tickwork
from tests.db.fault_app import TICK, WORK
from tests.db.fault_helpers import Fleet, runs
from tests.support.binaries import Unavailable, pgbouncer
from tests.support.cli_fork import run_tickwork
from tests.support.helpers import free_port, wait_until_sync

JOBS = 200
SCHEDULES = """\
apiVersion: tickwork.io/v1
kind: Schedule
metadata: {name: tick-a}
spec: {every: 1s, job: {kind: f.tick}}
---
apiVersion: tickwork.io/v1
kind: Schedule
metadata: {name: tick-b}
spec: {every: 1s, job: {kind: f.tick}}
"""


@pytest.fixture
def bouncer(database_url: str) -> Iterator[str]:
    """A pgbouncer in transaction mode in front of the test's database: its URL."""
    try:
        binary = pgbouncer()
    except Unavailable as exc:
        pytest.skip(f"pgbouncer is not installed and could not be installed: {exc}")
    params = conninfo_to_dict(database_url)
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="tickwork-pgbouncer-") as tmp:
        home = Path(tmp)
        home.chmod(0o777)
        (home / "users.txt").write_text('"postgres" ""\n')
        (home / "pgbouncer.ini").write_text(
            f"""[databases]
* = host={params.get("host") or "127.0.0.1"} port={params.get("port") or 5432}
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {home / "users.txt"}
pool_mode = transaction
default_pool_size = 8
max_client_conn = 500
logfile = {home / "pgbouncer.log"}
"""
        )
        process = subprocess.Popen(
            ["runuser", "-u", "postgres", "--", str(binary), str(home / "pgbouncer.ini")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )
        url = make_conninfo(database_url, host="127.0.0.1", port=str(port))
        try:
            wait_until_sync(lambda: _answers(url), timeout=15, what="pgbouncer to listen")
            yield url
        finally:
            process.terminate()
            process.wait(10)
            log = home / "pgbouncer.log"
            if log.exists():
                shutil.copy(log, Path(tempfile.gettempdir()) / f"pgbouncer-{port}.log")


def _answers(url: str) -> bool:
    try:
        psycopg.connect(url, connect_timeout=2, prepare_threshold=None).close()
    except psycopg.OperationalError:
        return False
    return True


def _cli(*args: str, url: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TICKWORK_")}
    env["TICKWORK_DATABASE_URL"] = url
    return run_tickwork(args, env)


def test_every_role_works_through_pgbouncer_in_transaction_mode(
    bouncer: str, database_url: str, conn: psycopg.Connection, tmp_path: Path
) -> None:
    for args in (("migrate",), ("migrate",)):  # the second finds nothing to do
        done = _cli(*args, url=bouncer)
        assert done.returncode == 0, done.stderr
    manifests = tmp_path / "schedules.yaml"
    manifests.write_text(SCHEDULES)
    synced = _cli("sync", "faults", "-f", str(manifests), url=bouncer)
    assert synced.returncode == 0, synced.stderr

    (tmp_path / "runs").mkdir()
    fleet = Fleet(tmp_path / "runs", tmp_path)
    app = tickwork.App(bouncer)
    try:
        pooled = dict(pooler="transaction", namespaces="faults", concurrency=4)
        fleet.start("w1", bouncer, **pooled, poll_seconds=0.5)
        fleet.start("w2", bouncer, **pooled, poll_seconds=0.5)
        fleet.start("w3", bouncer, **pooled, listen_url=database_url)
        ids = [app.enqueue(WORK, {"seconds": 0.05}) for _ in range(JOBS // 2)]
        ids += app.enqueue_many(WORK, [{"seconds": 0.05}] * (JOBS // 2))

        def all_ran_and_ticked() -> bool:
            row = conn.execute(
                "SELECT count(*) FILTER (WHERE kind = %s AND status = 'succeeded'),"
                " count(*) FILTER (WHERE kind = %s) FROM tickwork.jobs",
                (WORK, TICK),
            ).fetchone()
            return row is not None and row[0] == JOBS and row[1] >= 4

        wait_until_sync(
            all_ran_and_ticked, timeout=60, what="every job to succeed, the schedules to fire"
        )
        assert fleet.exits() == "", "no worker exits"
        ran = runs(fleet.runs)
        assert all(ran[job] == 1 for job in ids), "every job ran exactly once"
        ticks = conn.execute(
            "SELECT count(*) FROM tickwork.jobs WHERE kind = %s", (TICK,)
        ).fetchone()
        assert ticks is not None and ticks[0] >= 4, "the schedules fired through pgbouncer"
        duplicates = conn.execute(
            "SELECT 1 FROM tickwork.jobs WHERE schedule_name IS NOT NULL"
            " GROUP BY schedule_name, occurrence_at HAVING count(*) > 1"
        ).fetchall()
        assert duplicates == []
        assert "action=listener_off" in fleet.log("w1"), "it says it polls"
        assert "action=listener_off" not in fleet.log("w3"), "it listens on the direct URL"
        errors = [
            line
            for line in fleet.lines("")
            if "prepared statement" in line or "failed" in line or "crashed" in line
        ]
        assert errors == []
    finally:
        app.close()
        fleet.stop()
