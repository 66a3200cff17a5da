"""Every benchmark command of the README runs as written (with tiny sizes), prints its
figures, and never touches ``$TICKWORK_DATABASE_URL``: it points at a host that does not
exist, so a benchmark that used it would fail. Each runs on a database of its own on this
test process's server (``--database-url``, which every benchmark takes), not on a private
server it would start and stop; one benchmark runs without it, so the private server is
tried too."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.binaries import Unavailable, pgbouncer

ROOT = Path(__file__).resolve().parents[2]
TINY = {
    "--jobs": "300",
    "--schedules": "20",
    "--every-second": "5",
    "--seconds": "2",
    "--compare": "1",
    "--runs": "1",
    "--processes": "1",
    "--namespaces": "2",
    "--spread": "2",
    "--pgqueuer-processes": "1",
}
"""Sizes a benchmark of the README is run with here."""
EXTRA = {
    "bench/admin.py": ["--jobs", "2000", "--schedules", "50"],
    "bench/retention.py": ["--jobs", "2000", "--schedules", "50"],
    "bench/operator_sync.py": ["--status-interval", "0.5"],
    "bench/claim.py": ["--busy-jobs", "1000"],
    "bench/prepared.py": ["--rounds", "2", "--batch", "50"],
    "bench/faults.py": ["--jobs", "200", "--workers", "2", "--cut-seconds", "3"],
    "bench/soak.py": ["--seconds", "8", "--hold", "3", "--sample", "2", "--rate", "500"],
    "bench/throughput.py": ["--jobs", "300"],
    "bench/held.py": ["--jobs", "2000", "--runs", "2"],
    "bench/fairness.py": ["--backlog", "2000", "--seconds", "3", "--warmup", "1"],
    "bench/notify.py": ["--rounds", "1", "--producers", "4"],
    "bench/pgbouncer.py": [
        *("--schedules", "3", "--seconds", "1", "--idle-seconds", "0.5", "--samples", "1")
    ],
    "bench/history.py": ["--finished", "3000", "--claims", "50", "--schedules", "20"],
    "bench/migration_locks.py": ["--jobs", "3000", "--schedules", "300"],
}
"""Options added so the run stays small (the defaults are the benchmark's real sizes)."""
NEEDS = {"bench/pgbouncer.py": pgbouncer}
"""Binaries a benchmark runs, installed (tests/support/binaries.py) before it starts."""


def readme_benchmarks() -> list[list[str]]:
    """The commands of the README's benchmark block, each as argv."""
    text = (ROOT / "README.md").read_text()
    block = text.split("## Benchmarks", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    commands = []
    for line in block.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            commands.append(shlex.split(line))
    return commands


PRIVATE_SERVER = "python bench/throughput.py --jobs 100000 --processes 2"
"""The benchmark run on a private server of its own, as the README's commands all do."""


def tiny(argv: list[str], server_url: str) -> list[str]:
    script = argv[1]
    small = [TINY.get(argv[i - 1], arg) if i > 1 else arg for i, arg in enumerate(argv)]
    server = [] if shlex.join(argv) == PRIVATE_SERVER else ["--database-url", server_url]
    return [sys.executable, *small[1:], *EXTRA.get(script, []), *server]


def test_the_readme_lists_every_benchmark() -> None:
    listed = {argv[1] for argv in readme_benchmarks()}
    on_disk = {
        f"bench/{path.name}"
        for path in (ROOT / "bench").glob("*.py")
        if 'if __name__ == "__main__":' in path.read_text()
    }
    assert listed == on_disk
    assert all(argv[0] == "python" for argv in readme_benchmarks())


@pytest.mark.parametrize("argv", readme_benchmarks(), ids=shlex.join)
def test_a_readme_benchmark_runs_as_written(argv: list[str], server_url: str) -> None:
    if argv[1] in NEEDS:
        try:
            NEEDS[argv[1]]()
        except Unavailable as exc:
            pytest.skip(f"{argv[1]} needs what could not be installed: {exc}")
    env = {**os.environ, "TICKWORK_DATABASE_URL": "postgresql://nowhere.invalid/users-db"}
    result = subprocess.run(
        tiny(argv, server_url), cwd=ROOT, env=env, capture_output=True, text=True, timeout=240
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    assert re.search(r"\d", result.stdout), result.stdout
