"""The embedded PostgreSQL server: start, stop, restart, crashes, a second owner, root."""

from __future__ import annotations

import contextlib
import logging
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tickwork.db import embedded
from tickwork.db.embedded import EmbeddedPostgres
from tickwork.errors import DatabaseUnavailable

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="runs only as root")

# A second process that starts a server, prints its URL and stops it when stdin closes.
_OWNER = """
import sys
from pathlib import Path
from tickwork.db.embedded import EmbeddedPostgres
server = EmbeddedPostgres(Path(sys.argv[1]))
print(server.start(), flush=True)
sys.stdin.read()
server.stop()
"""


@pytest.fixture
def data_dir() -> Iterator[Path]:
    """A new directory the postgres user can reach (pytest's tmp_path base is private)."""
    with tempfile.TemporaryDirectory(prefix="tickwork-test-embedded-") as tmp:
        os.chmod(tmp, 0o711)
        yield Path(tmp) / "dev"


def _one(url: str, query: str) -> Any:
    with psycopg.connect(url) as conn:
        row = conn.execute(query).fetchone()
    assert row is not None
    return row[0]


def _postmaster_pid(server: EmbeddedPostgres) -> int:
    return int((server.cluster_dir / "postmaster.pid").read_text().split()[0])


def _start_owner(data_dir: Path) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _OWNER, str(data_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def test_serves_connections_and_stops_idempotently(data_dir: Path) -> None:
    server = EmbeddedPostgres(data_dir, durable=False)
    url = server.start()
    assert server.start() == url
    assert _one(url, "SELECT 1") == 1
    assert _one(url, "SHOW fsync") == "off"
    assert _one(url, "SHOW synchronous_commit") == "off"
    assert int(_one(url, "SHOW max_connections")) >= 200
    server.stop()
    server.stop()
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(url, connect_timeout=2)


def test_restart_keeps_data_and_port(data_dir: Path) -> None:
    with EmbeddedPostgres(data_dir) as server:
        url = server.conninfo
        assert _one(url, "SHOW fsync") == "on"
        with psycopg.connect(url) as conn:
            conn.execute("CREATE TABLE kept (x int); INSERT INTO kept VALUES (42)")
    with EmbeddedPostgres(data_dir) as server:
        assert server.conninfo == url
        assert _one(url, "SELECT x FROM kept") == 42


def test_starts_after_the_postmaster_was_killed(data_dir: Path) -> None:
    server = EmbeddedPostgres(data_dir, durable=False)
    url = server.start()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE kept (x int); INSERT INTO kept VALUES (42)")
        conn.execute("CHECKPOINT")  # asynchronous commit: put the row on disk before the crash
    os.kill(_postmaster_pid(server), signal.SIGKILL)
    server.stop()  # reaps our dead child; its postmaster.pid stays behind
    assert (server.cluster_dir / "postmaster.pid").exists()
    with EmbeddedPostgres(data_dir, durable=False) as again:
        assert _one(again.conninfo, "SELECT x FROM kept") == 42


def test_refuses_a_server_another_live_process_owns(data_dir: Path) -> None:
    owner, url = _start_owner(data_dir)
    try:
        with pytest.raises(DatabaseUnavailable, match=f"in use by process {owner.pid}"):
            EmbeddedPostgres(data_dir).start()
        assert _one(url, "SELECT 1") == 1
    finally:
        owner.communicate()
    assert owner.returncode == 0


def test_adopts_a_server_whose_owner_died(data_dir: Path) -> None:
    owner, url = _start_owner(data_dir)
    owner.kill()
    owner.wait()
    server = EmbeddedPostgres(data_dir)
    try:
        assert server.start() == url
        assert _one(url, "SELECT 1") == 1
    finally:
        server.stop()
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(url, connect_timeout=2)


@as_root
def test_as_root_the_cluster_belongs_to_postgres(data_dir: Path) -> None:
    with EmbeddedPostgres(data_dir, durable=False) as server:
        info = server.cluster_dir.stat()
        assert server.cluster_dir.parent == data_dir
        assert info.st_uid == pwd.getpwnam("postgres").pw_uid
        assert info.st_mode & 0o777 == 0o700
        assert _one(server.conninfo, "SELECT current_user") == "postgres"


@as_root
def test_as_root_a_directory_postgres_cannot_reach_is_relocated(
    data_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    private = data_dir.parent / "private"
    private.mkdir(mode=0o700)
    caplog.set_level(logging.INFO, logger=embedded.__name__)
    server = EmbeddedPostgres(private / "dev", durable=False)
    try:
        with server:
            cluster = server.cluster_dir
            assert cluster.parent == Path("/var/tmp")
            assert str(cluster) in caplog.text
            with psycopg.connect(server.conninfo) as conn:
                conn.execute("CREATE TABLE kept (x int); INSERT INTO kept VALUES (42)")
        with EmbeddedPostgres(private / "dev", durable=False) as again:
            assert again.cluster_dir == cluster
            assert _one(again.conninfo, "SELECT x FROM kept") == 42
    finally:
        with contextlib.suppress(RuntimeError):  # not started: nothing to remove
            shutil.rmtree(server.cluster_dir, ignore_errors=True)


def test_without_any_postgresql_names_both_remedies(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(embedded, "find_bindir", lambda: None)
    monkeypatch.setitem(sys.modules, "pgserver", None)  # import pgserver raises ImportError
    with pytest.raises(DatabaseUnavailable) as error:
        EmbeddedPostgres(data_dir).start()
    assert str(error.value) == (
        "no PostgreSQL found: install postgresql (apt-get install postgresql) "
        "or pip install pgserver"
    )
