"""Soak: steady enqueue and drain for minutes, with retention on and history kept, and halfway
a long ``REPEATABLE READ`` transaction held open (what an analytics query or a forgotten
session does to a queue table: vacuum cannot remove any row that died after its snapshot).

    python bench/soak.py --seconds 360 --hold 120

One producer process enqueues ``--rate`` no-op jobs a second (in bulk, every 0.1 s); P worker
processes run with the worker's defaults (only their retention age is ``--retention``, so that
a history is kept and pruned) and serve their metrics. Every ``--sample`` seconds it prints:
the drain rate (jobs completed, from the workers' ``tickwork_jobs_completed_total``), the queue
latency p99 (run_at to claim, from ``tickwork_job_queue_latency_seconds``: the bound of the
bucket the 99th percentile falls in), the claim latency p99 (the workers' claim statement,
same kind, queue and batch, timed every ``--probe`` seconds by a probe connection of the
benchmark and rolled back, so it takes no job), the backlog, and the jobs table's size, index
size, live and dead tuples. With ``--explain``, the claim's ``EXPLAIN (ANALYZE, BUFFERS)`` just
before the transaction opens and just before it ends is printed after the table. At the end:
the median drain rate before, during and after the transaction, the drop while it was open
and how long the rate took to come back after it ended (goal: at most a 20 % drop, back
within 60 s). With ``--statements`` (the private server then preloads pg_stat_statements),
where the database's time went in each phase: the statements taking the most execution time,
per second of the phase, with their calls and shared buffers per call. Runs on a database
of its own (see servers.py).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import multiprocessing
import os
import signal
import socket
import statistics
import threading
import time
import urllib.request
from dataclasses import dataclass

import measure
import psycopg
import servers
from prometheus_client.parser import text_string_to_metric_families

import tickwork
from tickwork.cli.worker import serve
from tickwork.db import migrate
from tickwork.settings import WorkerSettings
from tickwork.worker.runner import Worker

KIND = "bench.noop"
PROBE_BATCH = 10
"""Jobs the probe's claim asks for: what a default worker (concurrency 10, prefetch as many)
asks for once half its slots are free."""
STOP_SECONDS = 60.0
"""How long a process may take to stop after SIGTERM (the workers' grace is 30 s)."""
GOAL_DROP = 0.20
GOAL_RECOVERY_SECONDS = 60.0
TABLE = """
SELECT pg_table_size('tickwork.jobs'), pg_indexes_size('tickwork.jobs'),
       n_live_tup, n_dead_tup,
       (SELECT count(*) FROM tickwork.jobs WHERE status = 'available')
FROM pg_stat_user_tables WHERE relid = 'tickwork.jobs'::regclass
"""


def _app(url: str) -> tickwork.App:
    app = tickwork.App(url)

    @app.task(KIND)
    async def noop(job: tickwork.Job) -> None:
        return None

    return app


def _serve(url: str, name: str, port: int, retention: float) -> None:
    settings = WorkerSettings(
        database_url=url,
        app="bench",
        name=name,
        http_port=port,
        http_host="127.0.0.1",
        retention_seconds=retention,
    )
    asyncio.run(serve(Worker(_app(url), settings)))  # as `tickwork worker`: signals, probes


def _produce(url: str, rate: int) -> None:
    """Enqueue ``rate`` jobs a second, the due ones every 0.1 s, until SIGTERM."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    app = _app(url)
    enqueued, start = 0, time.monotonic()
    while not stop.is_set():
        due = int((time.monotonic() - start) * rate)
        if due > enqueued:
            app.enqueue_many(KIND, [{} for _ in range(due - enqueued)])
            enqueued = due
        stop.wait(0.1)
    app.close()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Scrape:
    completed: float
    buckets: dict[float, float]
    """Cumulative queue-latency counts by upper bound (``inf`` included)."""


def _metrics(port: int) -> str | None:
    """A worker's metrics text; None while it does not serve them yet."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
            return str(answer.read().decode())
    except OSError:
        return None


def _scrape(ports: list[int]) -> Scrape:
    completed, buckets = 0.0, dict[float, float]()
    for port in ports:
        text = _metrics(port) or ""
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == "tickwork_jobs_completed_total":
                    completed += sample.value
                elif sample.name == "tickwork_job_queue_latency_seconds_bucket":
                    bound = float(sample.labels["le"])
                    buckets[bound] = buckets.get(bound, 0.0) + sample.value
    return Scrape(completed, buckets)


def _p99(before: Scrape, after: Scrape) -> float | None:
    """The bound of the bucket holding the 99th percentile of the claims in between."""
    deltas = sorted((b, after.buckets[b] - before.buckets.get(b, 0.0)) for b in after.buckets)
    total = deltas[-1][1] if deltas else 0.0
    if total <= 0:
        return None
    return next(bound for bound, count in deltas if count >= 0.99 * total)


@dataclass
class Sample:
    at: float
    phase: str
    rate: float


class ClaimProbe:
    """Times the workers' claim statement every ``interval`` seconds on a connection of its
    own, each rolled back (the jobs stay for the workers); ``take`` hands over the times
    since the last call."""

    def __init__(self, url: str, interval: float) -> None:
        self.url, self.interval = url, interval
        self.op = measure.claim_op("soak-probe", KIND, PROBE_BATCH)
        self._times: list[float] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> ClaimProbe:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self._stop.wait(self.interval):
                took, _ = measure.timed_claim(conn, self.op, keep=False)
                with self._lock:
                    self._times.append(took)

    def take(self) -> list[float]:
        with self._lock:
            times, self._times = self._times, []
        return times

    def explain(self, title: str) -> str:
        with psycopg.connect(self.url, autocommit=True) as conn:
            return f"{title}:\n{measure.explain_claim(conn, self.op)}"


def _hold(url: str, seconds: float, started: threading.Event) -> None:
    """A REPEATABLE READ transaction whose snapshot stays open ``seconds``."""
    with psycopg.connect(url) as conn:
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        conn.execute("SELECT count(*) FROM tickwork.jobs").fetchone()
        started.set()
        time.sleep(seconds)
        conn.rollback()


def soak(url: str, args: argparse.Namespace) -> list[Sample]:
    migrate.apply(url)
    ctx = multiprocessing.get_context("spawn")
    ports = [_free_port() for _ in range(args.processes)]
    workers = [
        ctx.Process(target=_serve, args=(url, f"soak-{i}", port, args.retention))
        for i, port in enumerate(ports)
    ]
    producer = ctx.Process(target=_produce, args=(url, args.rate))
    for process in workers:
        process.start()
    while not all(_metrics(port) for port in ports):  # started: the clock starts
        time.sleep(0.1)
    producer.start()
    hold_at = (args.seconds - args.hold) / 2
    holding = threading.Event()
    holder = threading.Thread(target=_hold, args=(url, args.hold, holding), daemon=True)
    samples: list[Sample] = []
    plans: list[str] = []
    readings: list[tuple[str, float, measure.Statements]] = []
    print(
        f"soak: {args.seconds:g}s, {args.rate} jobs/s offered, {args.processes} workers "
        f"(defaults, retention {args.retention:g}s); REPEATABLE READ held {args.hold:g}s "
        f"from t={hold_at:g}s"
    )
    print(
        "    t  phase     drain/s  lag p99  claim p99  backlog   table  indexes      live      dead"
    )
    try:
        with psycopg.connect(url, autocommit=True) as conn, ClaimProbe(url, args.probe) as probe:
            statements = args.statements and measure.statements_enable(conn)
            if args.statements and not statements:
                print("--statements: the server does not preload pg_stat_statements")

            def reading(phase: str) -> None:
                if statements:
                    readings.append((phase, time.monotonic(), measure.statements(conn)))

            start = time.monotonic()
            reading("before")
            last, last_at = _scrape(ports), start
            while time.monotonic() - start < args.seconds:
                if not holding.is_set() and time.monotonic() - start >= hold_at:
                    if args.explain:
                        plans.append(probe.explain("claim before the transaction opened"))
                    reading("holding")
                    holder.start()
                    holding.wait()
                elif (
                    args.explain
                    and holder.is_alive()
                    and len(plans) == 1
                    and time.monotonic() - start >= hold_at + args.hold - 2 * args.sample
                ):
                    plans.append(probe.explain("claim near the end of the transaction"))
                time.sleep(max(0.0, args.sample - (time.monotonic() - last_at)))
                scrape, at = _scrape(ports), time.monotonic()
                rate = (scrape.completed - last.completed) / (at - last_at)
                p99 = _p99(last, scrape)
                claims = probe.take()
                last, last_at = scrape, at
                phase = "before"
                if holding.is_set():
                    phase = "holding" if holder.is_alive() else "after"
                if phase == "after" and readings and readings[-1][0] == "holding":
                    reading("after")
                row = conn.execute(TABLE).fetchone()
                assert row is not None
                table, indexes, live, dead, backlog = row
                samples.append(Sample(at - start, phase, rate))
                lag = f"{p99:g}s" if p99 is not None else "-"
                claim = f"{1000 * measure.percentile(claims, 0.99):.1f}ms" if claims else "-"
                print(
                    f"{at - start:5.0f}  {phase:8} {rate:8,.0f}  {lag:>7}  {claim:>9}  "
                    f"{backlog:7,}  {table / 2**20:5.1f}M  {indexes / 2**20:6.1f}M  "
                    f"{live:8,}  {dead:8,}",
                    flush=True,
                )
            reading("end")
    finally:
        for process in (producer, *workers):
            if process.pid is not None:
                os.kill(process.pid, signal.SIGTERM)
        for process in (producer, *workers):
            process.join(STOP_SECONDS)
            if process.is_alive() and process.pid is not None:  # its second SIGTERM: at once
                print(f"{process.name} still running {STOP_SECONDS:g}s after SIGTERM: sent again")
                os.kill(process.pid, signal.SIGTERM)
                process.join()
        if holder.is_alive():
            holder.join()
    for plan in plans:
        print(plan)
    _print_statements(readings)
    return samples


def _print_statements(readings: list[tuple[str, float, measure.Statements]]) -> None:
    for (phase, began, before), (_, ended, after) in itertools.pairwise(readings):
        seconds = ended - began
        print(f"statements {phase} ({seconds:.0f} s), by execution time:")
        measure.print_statements(measure.statements_between(before, after, 6), seconds)


def _figure(value: float | None) -> str:
    return f"{value:,.0f}" if value is not None else "-"


def summary(samples: list[Sample]) -> None:
    def median(phase: str) -> float | None:
        rates = [s.rate for s in samples if s.phase == phase]
        return statistics.median(rates) if rates else None

    before, during, after = median("before"), median("holding"), median("after")
    print(
        f"median drain/s: before {_figure(before)}, holding {_figure(during)}, "
        f"after {_figure(after)}"
    )
    ended = next((s.at for s in samples if s.phase == "after"), None)
    if before is None or during is None or ended is None or before <= 0:
        print("too short to compare the phases: use a longer --seconds")
        return
    drop = 1 - during / before
    back = next(
        (s.at - ended for s in samples if s.phase == "after" and s.rate >= 0.9 * before), None
    )
    met = drop <= GOAL_DROP and back is not None and back <= GOAL_RECOVERY_SECONDS
    print(
        f"drop while held: {100 * drop:.1f}% (goal ≤ {100 * GOAL_DROP:.0f}%); back to 90% of "
        f"before: {f'{back:.0f}s' if back is not None else 'not seen'} after the end "
        f"(goal ≤ {GOAL_RECOVERY_SECONDS:.0f}s): {'goal met' if met else 'goal NOT met'}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=360.0, help="length of the run")
    parser.add_argument("--hold", type=float, default=120.0, help="seconds the transaction is open")
    parser.add_argument("--rate", type=int, default=2000, help="jobs enqueued per second")
    parser.add_argument("--processes", type=int, default=2, help="worker processes")
    parser.add_argument("--retention", type=float, default=60.0, help="worker retention age")
    parser.add_argument("--sample", type=float, default=10.0, help="seconds between samples")
    parser.add_argument(
        "--probe", type=float, default=0.1, help="seconds between two timed claims of the probe"
    )
    parser.add_argument(
        "--explain",
        action="store_true",
        help="print the claim's EXPLAIN (ANALYZE, BUFFERS) before and near the end of the hold",
    )
    parser.add_argument(
        "--statements",
        action="store_true",
        help="print where the database's time went in each phase (pg_stat_statements)",
    )
    servers.add_arguments(parser)
    args = parser.parse_args()
    if args.hold >= args.seconds:
        parser.error("--hold: must be shorter than --seconds")
    with servers.database_server(args.database_url, **measure.preload(args.statements)) as url:
        summary(soak(url, args))


if __name__ == "__main__":
    main()
