"""Peers: tickwork's defaults against pgqueuer's batch settings, in one run, on one database.

    python bench/peers.py --jobs 30000 --pgqueuer-batch 10,100,1000
    python bench/peers.py --jobs 30000 --runs 3      # each system 3 times, interleaved: medians

pgqueuer (the version pinned in bench/peers/requirements.txt) is installed into a virtual
environment of its own, bench/peers/.venv (made on first use, reused after; git-ignored), so
tickwork's environment never holds it. Both run on the same database of a private PostgreSQL
with its default durability (or one made on --database-url's server; see servers.py), with
the same number of consumer processes (--processes, default 2) draining --jobs no-op jobs
enqueued in bulk beforehand:

* pgqueuer: its QueueManager on one asyncpg connection per process, ``batch_size`` each of
  --pgqueuer-batch, all else its defaults (bench/peers/pgqueuer_noop.py);
* tickwork: the real command, ``tickwork worker --app tickwork_noop:app --database-url URL``,
  nothing else: its defaults (concurrency 10, adaptive prefetch, job metrics on). Each
  process gets its own HTTP port through TICKWORK_HTTP_PORT only because two processes on one
  host cannot both listen on the default 9090 (in Kubernetes each pod has its own).

The drain rate of each is jobs / (last success − first claim), both read from the database's
own records (tickwork's started_at and finished_at; pgqueuer's log of picked and successful
jobs), so process start-up is left out of both. Before each drain, both tables are emptied,
the jobs enqueued, the table vacuumed and analysed, and a checkpoint taken. Prints each
system's rate, its consumers' CPU time per job, and tickwork's rate over pgqueuer's best.
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import venv
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote, urlencode

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


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _prepare(url: str, table: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"VACUUM ANALYZE {table}")
        conn.execute("CHECKPOINT")


def _wait(url: str, drained: str, processes: list[subprocess.Popen[bytes]]) -> None:
    deadline = time.monotonic() + DRAIN_TIMEOUT
    with psycopg.connect(url, autocommit=True) as conn:
        while not (row := conn.execute(drained).fetchone()) or not row[0]:
            if time.monotonic() > deadline:
                raise SystemExit(f"not drained after {DRAIN_TIMEOUT:g}s")
            if any(p.poll() not in (None, 0) for p in processes):
                raise SystemExit("a consumer process failed; see its output above")
            time.sleep(0.1)


def _rate(url: str, query: str) -> tuple[int, float]:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(query).fetchone()
    assert row is not None and row[1] is not None, "nothing ran"
    return int(row[0]), float(row[1])


class Result:
    def __init__(self, label: str, jobs: int, seconds: float, cpu: float) -> None:
        self.label, self.rate, self.cpu_us = label, jobs / seconds, cpu / jobs * 1e6


def pgqueuer(python: Path, url: str, jobs: int, processes: int, batch: int) -> Result:
    dsn = _url(url)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("TRUNCATE pgqueuer, pgqueuer_log")
    subprocess.run([python, PGQUEUER, "enqueue", dsn, str(jobs)], check=True)
    _prepare(url, "pgqueuer")
    cpu = _children_cpu()
    consumers = [
        subprocess.Popen([python, PGQUEUER, "consume", dsn, str(batch)]) for _ in range(processes)
    ]
    _wait(url, "SELECT NOT EXISTS (SELECT 1 FROM pgqueuer)", consumers)
    for p in consumers:
        p.wait(timeout=60)
    done, seconds = _rate(
        url,
        "SELECT count(*) FILTER (WHERE status = 'successful'), extract(epoch FROM"
        " max(created) FILTER (WHERE status = 'successful')"
        " - min(created) FILTER (WHERE status = 'picked')) FROM pgqueuer_log",
    )
    assert done == jobs, f"pgqueuer: {done} of {jobs} jobs succeeded"
    return Result(f"pgqueuer batch_size={batch}", done, seconds, _children_cpu() - cpu)


def tickwork_defaults(url: str, jobs: int, processes: int, logs: Path) -> Result:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("TRUNCATE tickwork.jobs")
    app = tickwork.App(url)
    for offset in range(0, jobs, 10_000):
        app.enqueue_many(KIND, [{}] * min(10_000, jobs - offset))
    app.close()
    _prepare(url, "tickwork.jobs")
    cpu = _children_cpu()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TICKWORK_")}
    workers = []
    for i in range(processes):
        env["TICKWORK_HTTP_PORT"] = str(_free_port())
        with (logs / f"worker-{i}.log").open("ab") as log:
            workers.append(
                subprocess.Popen(
                    [TICKWORK, "worker", "--app", "tickwork_noop:app", "--database-url", url],
                    cwd=HERE, env=dict(env), stdout=log, stderr=subprocess.STDOUT,
                )  # fmt: skip
            )
    try:
        _wait(
            url,
            "SELECT NOT EXISTS (SELECT 1 FROM tickwork.jobs WHERE status = 'available')"
            " AND NOT EXISTS (SELECT 1 FROM tickwork.jobs WHERE status = 'running')",
            workers,
        )
    finally:
        for p in workers:
            p.send_signal(signal.SIGTERM)
        for p in workers:
            p.wait(timeout=60)
    done, seconds = _rate(
        url,
        "SELECT count(*) FILTER (WHERE status = 'succeeded'),"
        " extract(epoch FROM max(finished_at) - min(started_at)) FROM tickwork.jobs",
    )
    assert done == jobs, f"tickwork: {done} of {jobs} jobs succeeded"
    return Result("tickwork worker (defaults)", done, seconds, _children_cpu() - cpu)


def _report(result: Result) -> Result:
    print(
        f"{result.label}: {result.rate:,.0f} jobs/s; consumers' CPU {result.cpu_us:.0f} µs/job",
        flush=True,
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=30_000)
    parser.add_argument("--processes", type=int, default=2, help="consumers of each system")
    parser.add_argument(
        "--pgqueuer-batch",
        default="10,100,1000",
        metavar="B1,B2",
        help="pgqueuer batch_size settings to run (default 10,100,1000)",
    )
    parser.add_argument(
        "--runs", type=int, default=1, help="rounds of every system, interleaved; medians"
    )
    servers.add_arguments(parser)
    args = parser.parse_args()
    batches = [int(b) for b in args.pgqueuer_batch.split(",") if b.strip()]
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
                (lambda b=b: pgqueuer(python, url, args.jobs, args.processes, b))
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
            f"{args.processes} processes each, {args.jobs} no-op jobs, median of {args.runs}: "
            f"tickwork defaults {ours:,.0f} jobs/s, pgqueuer best ({best}) "
            f"{rates[best]:,.0f} jobs/s: tickwork/pgqueuer = {ours / rates[best]:.2f}x"
        )


if __name__ == "__main__":
    main()
