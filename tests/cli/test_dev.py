"""``tickwork dev`` as a user starts it: embedded PostgreSQL, worker, example jobs and
schedules firing live, Ctrl-C."""

from __future__ import annotations

import os
import queue
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tickwork.db.embedded import EmbeddedPostgres

TICKWORK = str(Path(sys.executable).parent / "tickwork")
STARTUP_DEADLINE = 90.0  # initdb of a durable cluster, then the first jobs
STOP_DEADLINE = 30.0


@pytest.fixture
def data_dir() -> Iterator[Path]:
    """A directory the server account can reach (pytest's tmp_path is private to root); a
    server left behind by a failed test is stopped."""
    with tempfile.TemporaryDirectory(prefix="tickwork-dev-test-") as tmp:
        os.chmod(tmp, 0o711)
        path = Path(tmp) / "data"
        yield path
        if (path / "pgdata" / "postmaster.pid").exists():
            with EmbeddedPostgres(path):  # adopts the orphan; stops it on exit
                pass


def _lines(stream: Iterator[str], into: queue.Queue[str | None]) -> None:
    for line in stream:
        into.put(line.rstrip("\n"))
    into.put(None)


def test_dev_runs_the_examples_and_stops_cleanly_on_ctrl_c(data_dir: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TICKWORK_")}
    dev = subprocess.Popen(
        [TICKWORK, "dev", "--data-dir", str(data_dir)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert dev.stdout is not None and dev.stderr is not None
    lines: queue.Queue[str | None] = queue.Queue()
    threading.Thread(target=_lines, args=(dev.stdout, lines), daemon=True).start()
    output: list[str] = []
    wanted = {
        kind: re.compile(rf"job \d+\s+{re.escape(kind)}\s+succeeded")
        for kind in ("examples.hello", "examples.report", "examples.slow")
    }
    # hello fires every 10 s: its first occurrence shows as fired, then its job succeeds.
    fired = re.compile(r"schedule examples/hello fired (\d\d:\d\d:\d\d) as job (\d+) \(")
    wanted["fired"] = fired
    try:
        deadline = time.monotonic() + STARTUP_DEADLINE
        while wanted:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"still waiting for {sorted(wanted)}:\n{output}") from None
            assert line is not None, f"tickwork dev exited:\n{output}\n{dev.stderr.read()}"
            output.append(line)
            wanted = {kind: p for kind, p in wanted.items() if not p.search(line)}
            if match := fired.search(line):
                job_id = match[2]
                wanted["fired job"] = re.compile(rf"job {job_id}\s+examples\.hello\s+succeeded")
                # The occurrence is a whole 10 s of the clock (fixed rate from the epoch).
                assert match[1].endswith("0"), line
        assert any(re.search(r"unique key .* \(the same job\)", line) for line in output)
        assert any("Hello, tickwork!" in line for line in output)
        assert any("schedules synced into namespace 'examples'" in line for line in output)

        dev.send_signal(signal.SIGINT)
        status = dev.wait(timeout=STOP_DEADLINE)
    finally:
        if dev.poll() is None:
            dev.kill()
            dev.wait()
    while (line := lines.get(timeout=STOP_DEADLINE)) is not None:
        output.append(line)
    stderr = dev.stderr.read()

    assert status == 0, stderr
    assert "Traceback" not in stderr
    assert re.search(
        r"SIGINT: stopping gracefully: (waiting up to 10s for \d+ running jobs?|no job is running)",
        stderr,
    )
    assert output[-1] == "PostgreSQL stopped"
    port = int((data_dir / "port").read_text())
    with socket.socket() as sock, pytest.raises(ConnectionRefusedError):
        sock.connect(("127.0.0.1", port))
    assert not (data_dir / "pgdata" / "postmaster.pid").exists()
