"""Peers: tickwork's defaults against pgqueuer's batch settings, in one run, on one database.

    python bench/peers.py --jobs 30000 --pgqueuer-batch 100,1000 --pgqueuer-processes 1,2 --runs 3
    python bench/peers.py --jobs 30000 --pgqueuer-batch 10,100,1000   # each system once

pgqueuer (the version pinned in bench/peers/requirements.txt) is installed into a virtual
environment of its own, bench/peers/.venv (made on first use, reused after; git-ignored), so
tickwork's environment never holds it. Both run on the same database of a private PostgreSQL
with its default durability (or one made on --database-url's server; see servers.py):

* pgqueuer: its QueueManager on one asyncpg connection per process, ``batch_size`` each of
  --pgqueuer-batch, all else its defaults (bench/peers/pgqueuer_noop.py), with each number of
  consumer processes of --pgqueuer-processes (default: --processes): every combination;
* tickwork: --processes (default 2) of the real command, ``tickwork worker --app
  tickwork_noop:app --database-url URL``, nothing else: its defaults (concurrency 10, adaptive
  prefetch, job metrics on). Each process gets its own HTTP port through TICKWORK_HTTP_PORT
  only because two processes on one host cannot both listen on the default 9090 (in
  Kubernetes each pod has its own).

Each round: both systems' tables emptied (then vacuumed and analysed, as autovacuum keeps a
running system's tables; the other system's too, so that autovacuum does not clean up the
previous run's rows on the server's CPU while this one drains), the consumers started and
ready (listening), then --jobs no-op jobs enqueued in one transaction, so they all appear at
once. The drain rate is jobs / (last success - first claim), read from each system's own
records in the database (tickwork's started_at and finished_at; pgqueuer's log of picked and
successful jobs). Prints each one's rate, the CPU time per job of its consumers and of the
PostgreSQL server while it drained (read from /proc: start-up left out), and tickwork's rate
over pgqueuer's best combination (with --runs, medians of each).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import venv
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlencode

import measure
import psycopg
import servers
from psycopg.conninfo import conninfo_to_dict

import tickwork
from tickwork.db import migrate

HERE = Path(__file__).resolve().parent / "peers"
VENV = HERE / ".venv"
REQUIREMENTS = HERE / "requirements.txt"
PGQUEUER = HERE / "pgqueuer_noop.py"
TICKWORK = Path(sys.executable).parent / "tickwork"
KIND = "bench.noop"
DRAIN_TIMEOUT = 600.0
SETTLE_SECONDS = 1.0
"""Once every consumer is up, the pause before the jobs are enqueued (listeners settle)."""


def _venv_python() -> Path:
    """The interpreter of bench/peers/.venv, made and filled from requirements.txt when it
    is missing or the requirements changed since."""
    python = VENV / "bin" / "python"
    stamp = VENV / "requirements.installed"
    wanted = REQUIREMENTS.read_text()
    if python.exists() and stamp.exists() and stamp.read_text() == wanted:
        return python
    print(f"installing {REQUIREMENTS.name} into {VENV} ...", flush=True)
    venv.EnvBuilder(with_pip=True, clear=True).create(VENV)
    subprocess.run(
        [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         "-r", REQUIREMENTS],
        check=True,
    )  # fmt: skip
    stamp.write_text(wanted)
    return python


def _url(conninfo: str) -> str:
    """``conninfo`` as a postgresql:// URL (asyncpg takes no key=value strings)."""
    params = {k: v for k, v in conninfo_to_dict(conninfo).items() if v is not None}
    dbname = quote(str(params.pop("dbname", "")))
    return f"postgresql:///{dbname}?{urlencode(params)}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


TABLES = ("pgqueuer", "pgqueuer_log", "tickwork.jobs", "tickwork.workers")
"""The tables either system fills while it drains."""


def _empty(url: str, tables: tuple[str, ...] = TABLES) -> None:
    """Empty ``tables`` and have them vacuumed and analysed (empty), as autovacuum leaves the
    tables of a running system: the planner then knows their size instead of guessing it for
    a table never analysed (which gives both systems other plans). The other system's tables
    are emptied too: left with the 30,000 rows of its run, autovacuum could clean them up
    during the next run, on the PostgreSQL CPU counted against that one."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"TRUNCATE {', '.join(tables)} CASCADE")
        for table in tables:
            conn.execute(f"VACUUM ANALYZE {table}")


def _wait(url: str, done: str, processes: list[subprocess.Popen[bytes]]) -> None:
    """Until the query ``done`` answers true; a consumer that exits meanwhile fails the run."""
    deadline = time.monotonic() + DRAIN_TIMEOUT
    with psycopg.connect(url, autocommit=True) as conn:
        while not (row := conn.execute(done).fetchone()) or not row[0]:
            if time.monotonic() > deadline:
                raise SystemExit(f"not done after {DRAIN_TIMEOUT:g}s: {done}")
            if any(p.poll() is not None for p in processes):
                raise SystemExit("a consumer process exited; see its output")
            time.sleep(0.05)


def _rate(url: str, query: str) -> tuple[int, float]:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(query).fetchone()
    assert row is not None and row[1] is not None, "nothing ran"
    return int(row[0]), float(row[1])


class Meter:
    """CPU seconds of the consumer processes and of the database server from now on."""

    def __init__(self, url: str, consumers: list[subprocess.Popen[bytes]]) -> None:
        self.url = url
        self.pids = [p.pid for p in consumers]
        self.consumers = sum(measure.process_cpu(pid) for pid in self.pids)
        self.server = measure.server_cpu(url)

    def result(self, label: str, jobs: int, seconds: float) -> Result:
        consumers_us = (
            (sum(measure.process_cpu(pid) for pid in self.pids) - self.consumers) / jobs * 1e6
        )
        server, server_us = measure.server_cpu(self.url), None
        if server is not None and self.server is not None:
            server_us = (server - self.server) / jobs * 1e6
        return Result(label, jobs / seconds, consumers_us, server_us)


@dataclass(frozen=True)
class Result:
    label: str
    rate: float
    """Jobs per second."""
    cpu_us: float
    """The consumers' CPU time per job while they drained."""
    server_us: float | None
    """The database server's CPU time per job meanwhile (None: not on this host)."""


def _stop(processes: list[subprocess.Popen[bytes]]) -> None:
    for p in processes:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in processes:
        p.wait(timeout=60)


def pgqueuer(python: Path, url: str, jobs: int, processes: int, batch: int) -> Result:
    dsn = _url(url)
    _empty(url)
    argv = [python, PGQUEUER, "consume", dsn, str(batch)]
    consumers = [subprocess.Popen(argv, stdout=subprocess.PIPE) for _ in range(processes)]
    try:
        for p in consumers:
            assert p.stdout is not None and p.stdout.readline() == b"ready\n", "not ready"
        time.sleep(SETTLE_SECONDS)
        subprocess.run([python, PGQUEUER, "enqueue", dsn, str(jobs)], check=True)
        meter = Meter(url, consumers)
        _wait(url, "SELECT NOT EXISTS (SELECT 1 FROM pgqueuer)", consumers)
        done, seconds = _rate(
            url,
            "SELECT count(*) FILTER (WHERE status = 'successful'), extract(epoch FROM"
            " max(created) FILTER (WHERE status = 'successful')"
            " - min(created) FILTER (WHERE status = 'picked')) FROM pgqueuer_log",
        )
        plural = "es" if processes > 1 else ""
        result = meter.result(
            f"pgqueuer {processes} process{plural} batch_size={batch}", done, seconds
        )
    finally:
        _stop(consumers)
    assert done == jobs, f"pgqueuer: {done} of {jobs} jobs succeeded"
    return result


def tickwork_defaults(url: str, jobs: int, processes: int, logs: Path) -> Result:
    """``processes`` default ``tickwork worker`` processes draining ``jobs`` no-op jobs."""
    _empty(url)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TICKWORK_")}
    workers = []
    for i in range(processes):
        env["TICKWORK_HTTP_PORT"] = str(_free_port())
        argv = [TICKWORK, "worker", "--app", "tickwork_noop:app", "--database-url", url]
        with (logs / f"worker-{i}.log").open("ab") as log:
            worker = subprocess.Popen(
                argv, cwd=HERE, env=dict(env), stdout=log, stderr=subprocess.STDOUT
            )
        workers.append(worker)
    try:
        _wait(url, f"SELECT count(*) = {processes} FROM tickwork.workers", workers)
        time.sleep(SETTLE_SECONDS)
        app = tickwork.App(url)
        with app.connection() as conn, conn.transaction():
            for offset in range(0, jobs, 10_000):
                app.enqueue_many(KIND, [{}] * min(10_000, jobs - offset), conn=conn)
        app.close()
        meter = Meter(url, workers)
        _wait(
            url,
            "SELECT NOT EXISTS (SELECT 1 FROM tickwork.jobs WHERE status = 'available')"
            " AND NOT EXISTS (SELECT 1 FROM tickwork.jobs WHERE status = 'running')",
            workers,
        )
        done, seconds = _rate(
            url,
            "SELECT count(*) FILTER (WHERE status = 'succeeded'),"
            " extract(epoch FROM max(finished_at) - min(started_at)) FROM tickwork.jobs",
        )
        result = meter.result("tickwork worker (defaults)", done, seconds)
    finally:
        _stop(workers)
    assert done == jobs, f"tickwork: {done} of {jobs} jobs succeeded"
    return result


def _report(result: Result) -> Result:
    server = "" if result.server_us is None else f", PostgreSQL's {result.server_us:.0f} µs/job"
    print(
        f"{result.label}: {result.rate:,.0f} jobs/s; CPU: consumers' {result.cpu_us:.0f} µs/job"
        f"{server}",
        flush=True,
    )
    return result


def _numbers(parser: argparse.ArgumentParser, option: str, text: str) -> list[int]:
    """The positive whole numbers of a comma-separated option, or a usage error naming it."""
    try:
        numbers = [int(n) for n in text.split(",") if n.strip()]
    except ValueError:
        parser.error(f"{option}: not a comma-separated list of whole numbers: {text!r}")
    if not numbers or min(numbers) < 1:
        parser.error(f"{option}: give one or more numbers of at least 1: {text!r}")
    return numbers


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=30_000)
    parser.add_argument(
        "--processes", type=int, default=2, help="tickwork worker processes (default 2)"
    )
    parser.add_argument(
        "--pgqueuer-batch",
        default="10,100,1000",
        metavar="B1,B2",
        help="pgqueuer batch_size settings to run (default 10,100,1000)",
    )
    parser.add_argument(
        "--pgqueuer-processes",
        metavar="P1,P2",
        help="numbers of pgqueuer consumer processes to run, each with every batch_size"
        " (default: --processes)",
    )
    parser.add_argument(
        "--runs", type=int, default=1, help="rounds of every system, interleaved; medians"
    )
    servers.add_arguments(parser)
    args = parser.parse_args()
    batches = _numbers(parser, "--pgqueuer-batch", args.pgqueuer_batch)
    counts = _numbers(
        parser, "--pgqueuer-processes", args.pgqueuer_processes or str(args.processes)
    )
    python = _venv_python()
    with (
        servers.database_server(args.database_url) as url,
        tempfile.TemporaryDirectory(prefix="tickwork-peers-") as tmp,
    ):
        migrate.apply(url)
        subprocess.run([python, PGQUEUER, "install", _url(url)], check=True)
        runs: dict[str, list[Result]] = {}
        systems: list[Callable[[], Result]] = [
            *(
                (lambda p=p, b=b: pgqueuer(python, url, args.jobs, p, b))
                for p in counts
                for b in batches
            ),
            lambda: tickwork_defaults(url, args.jobs, args.processes, Path(tmp)),
        ]
        for _ in range(args.runs):
            for system in systems:
                result = _report(system())
                runs.setdefault(result.label, []).append(result)
        rates = {label: statistics.median(r.rate for r in rs) for label, rs in runs.items()}
        best = max((label for label in rates if label.startswith("pgqueuer")), key=rates.get)
        ours = rates["tickwork worker (defaults)"]
        print(
            f"{args.jobs} no-op jobs, median of {args.runs}: tickwork defaults "
            f"({args.processes} processes) {ours:,.0f} jobs/s, pgqueuer best ({best}) "
            f"{rates[best]:,.0f} jobs/s: tickwork/pgqueuer = {ours / rates[best]:.2f}x"
        )


if __name__ == "__main__":
    main()
