"""Fairness between tenants (issue 30): a loud namespace's backlog beside a quiet one's schedule.

    python bench/fairness.py
    python bench/fairness.py --seconds 30
    python bench/fairness.py --alone                      # only phase 2: A with no B
    python bench/fairness.py --rounds 3                   # both phases 3 times: the medians
    python bench/fairness.py --backlog 10000 --seconds 5  # a quick check that it runs

Two namespaces share one queue (``default``) and one kind (``bench.fair``, a task that sleeps
``--job-ms`` with ``asyncio.sleep``; the milliseconds come in the payload):

* A, ``loud``: an every-second schedule (``every: 1s``, concurrencyPolicy Allow, the default)
  and a backlog of ``--backlog`` due jobs, its occurrences over the past ``--backlog`` seconds
  (43,200: 12 hours), made through tickwork's own backfill (``App.backfill``, 1,000
  occurrences a call, the most it takes), so they are the jobs the firing makes: schedule
  namespace ``loud``, run_at their occurrence time. Then ``VACUUM ANALYZE tickwork.jobs``, as
  autovacuum would after such an insert, so that it does not start in the middle of the window.
* B, ``quiet``: one schedule like A's, with no backlog, fired by the workers.

Two ``tickwork worker`` processes, started as the real command with its defaults (concurrency
10, adaptive prefetch, HTTP on 9090 or the next free default port) but for what the scenario
needs: ``--app fairness:app --database-url URL --namespaces loud,quiet`` (run from this
directory, which the worker puts on its path to import this module). Once both registered,
``--warmup`` seconds pass, then a window of ``--seconds`` whole seconds on the database clock.
One second after it ends (outcomes committed), the benchmark reads from the database:

* B's start lag per occurrence due in the window, ``jobs.started_at - jobs.occurrence_at``
  (both the database's clock), for the jobs started by the window's end: count, p50, p99, max;
  how many of the window's occurrences have not started by then (no job, or not claimed), and
  how long the oldest of those with a job had waited (the lag it will have, at least);
* A's drain rate: A's jobs (``schedule_namespace = 'loud'``) started in the window, per
  second: its waiting jobs at the window's start less those at its end, plus the occurrences
  its schedule added meanwhile (one a second). Not from the finished rows: the history
  limits' retention deletes A's succeeded jobs beyond the newest 1,000 every few seconds (B's
  schedule keeps 1,000, more than a run makes). And A's jobs still available at the end (none
  left: the rate is understated);
* the CPU time the worker processes and the PostgreSQL server (when it runs on this host)
  used in the window, per A job started in it (read from /proc, as bench/throughput.py):
  other processes on the machine slow the drain rate more than the work done per job (which
  contention raises too: 438 to 2,040 µs of the server's per job here).

Phase 1 runs A with B, phase 2 A alone (B's schedule not created; the workers the same,
flags included), each on a fresh database; then the ratio of A's rates, the issue's "A's
drain at >= 90 % of today's jobs/s" (today's: phase 2, or ``--alone``, run on the claim
before the change). ``--alone`` runs phase 2 only; ``--rounds N`` runs both N times, taking
turns at going first, and compares the medians: on a shared host one phase's rate varies a lot
from run to run (on the 2-CPU machine it was written on, busy with other tests, 294 to 857
jobs/s). With today's claim (highest priority, then the oldest run_at first) B's jobs wait
behind the whole backlog: none of the window's starts.

Runs on a database of its own: on the server of ``--database-url``, or on a private PostgreSQL
with its default durability (see servers.py); one per phase.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import measure
import psycopg
import servers

import tickwork
from tickwork.db import migrate
from tickwork.schedules.definition import ScheduleDefinition
from tickwork.schedules.limits import MAX_HISTORY_LIMIT
from tickwork.schedules.options import JobTemplate

HERE = Path(__file__).resolve().parent
TICKWORK = Path(sys.executable).parent / "tickwork"
KIND = "bench.fair"
LOUD = "loud"
QUIET = "quiet"
SCHEDULE = "every-second"
PROCESSES = 2
BACKFILL_CHUNK = 1000
"""Occurrences per backfill call: the most one call takes (operations.MAX_BACKFILL)."""
STARTUP_SECONDS = 30.0
"""Time allowed for the worker processes to register."""
SETTLE_SECONDS = 1.0
"""After the window, before reading: outcomes of jobs finished in it are committed."""

app = tickwork.App()  # the workers': `tickwork worker --app fairness:app --database-url URL`


@app.task(KIND)
async def work(job: tickwork.Job) -> None:
    await asyncio.sleep(job.payload["ms"] / 1000)


def _definition(job_ms: int) -> ScheduleDefinition:
    return ScheduleDefinition(
        name=SCHEDULE,
        job=JobTemplate(kind=KIND, payload={"ms": job_ms}),
        every=timedelta(seconds=1),
        successful_jobs_history_limit=MAX_HISTORY_LIMIT,  # B's jobs all kept for its figures
    )


def _scalar(conn: psycopg.Connection[Any], query: str, params: Any = None) -> Any:
    row = conn.execute(query, params).fetchone()
    assert row is not None
    return row[0]


def _db_now(conn: psycopg.Connection[Any]) -> datetime:
    now: datetime = _scalar(conn, "SELECT clock_timestamp()")
    return now


def _prepare(url: str, backlog: int, job_ms: int, with_quiet: bool) -> None:
    """The schedules, and A's backlog through backfill in chunks of 1,000 occurrences."""
    migrate.apply(url)
    client = tickwork.App(url)
    try:
        client.sync_schedules(LOUD, [_definition(job_ms)])
        if with_quiet:
            client.sync_schedules(QUIET, [_definition(job_ms)])
        with psycopg.connect(url, autocommit=True) as conn:
            now = _db_now(conn).replace(microsecond=0)
        first = now - timedelta(seconds=backlog)  # the last occurrence: one second ago
        started = time.perf_counter()
        created = calls = 0
        for offset in range(0, backlog, BACKFILL_CHUNK):
            end = min(offset + BACKFILL_CHUNK, backlog) - 1
            report = client.backfill(
                LOUD,
                SCHEDULE,
                first + timedelta(seconds=offset),
                first + timedelta(seconds=end),
                actor="bench",
            )
            created += report.created
            calls += 1
        took = time.perf_counter() - started
    finally:
        client.close()
    if created != backlog:
        raise SystemExit(f"backfill created {created:,} jobs, not {backlog:,}")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE tickwork.jobs")
    print(
        f"  backlog: {created:,} jobs of {LOUD}/{SCHEDULE}, occurrences "
        f"{first:%H:%M:%S}Z to {now - timedelta(seconds=1):%H:%M:%S}Z, by {calls} backfill "
        f"calls in {took:.1f} s ({created / took:,.0f} jobs/s)",
        flush=True,
    )


@dataclass
class Fleet:
    """The ``tickwork worker`` processes, their output in ``logs``."""

    url: str
    logs: Path
    processes: list[subprocess.Popen[bytes]]

    @classmethod
    def start(cls, url: str, logs: Path, count: int) -> Fleet:
        env = {
            k: v for k, v in os.environ.items() if not k.startswith("TICKWORK_") and k != "POD_NAME"
        }
        argv = [str(TICKWORK), "worker", "--app", "fairness:app", "--database-url", url,
                "--namespaces", f"{LOUD},{QUIET}"]  # fmt: skip
        processes = []
        for i in range(count):
            with (logs / f"worker-{i}.log").open("ab") as log:
                processes.append(
                    subprocess.Popen(argv, cwd=HERE, env=env, stdout=log, stderr=subprocess.STDOUT)
                )
        return cls(url, logs, processes)

    def check(self) -> None:
        """Fail the run when a worker exited, showing the end of its output."""
        for i, p in enumerate(self.processes):
            if p.poll() is not None:
                tail = (self.logs / f"worker-{i}.log").read_text(errors="replace")[-2000:]
                raise SystemExit(f"worker {i} exited with {p.returncode}:\n{tail}")

    def stop(self) -> list[int | None]:
        """SIGTERM (a graceful stop), then wait; their exit codes."""
        for p in self.processes:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.processes:
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        return [p.returncode for p in self.processes]


_QUIET_FIGURES = """
SELECT count(*),
       count(*) FILTER (WHERE started_at < %(end)s),
       1000 * percentile_cont(0.5) WITHIN GROUP (ORDER BY lag),
       1000 * percentile_cont(0.99) WITHIN GROUP (ORDER BY lag),
       1000 * max(lag),
       extract(epoch FROM %(end)s - min(occurrence_at) FILTER (WHERE lag IS NULL))::float8,
       1000 * percentile_cont(0.99) WITHIN GROUP (ORDER BY fired),
       1000 * max(fired)
FROM (SELECT started_at, occurrence_at,
             extract(epoch FROM created_at - occurrence_at)::float8 AS fired,
             CASE WHEN started_at < %(end)s
                  THEN extract(epoch FROM started_at - occurrence_at)::float8 END AS lag
      FROM tickwork.jobs
      WHERE schedule_namespace = %(ns)s
        AND occurrence_at >= %(start)s AND occurrence_at < %(end)s) AS due
"""
_LOUD_FIGURES = """
SELECT count(*) FILTER (WHERE status = 'available')
FROM tickwork.jobs
WHERE schedule_namespace = %(ns)s
"""
_LOUD_WAITING = """
SELECT count(*) FROM tickwork.jobs WHERE schedule_namespace = %(ns)s AND status = 'available'
"""


@dataclass(frozen=True)
class Phase:
    rate: float
    """A's jobs succeeded per second of the window."""
    workers_us: float
    """The worker processes' CPU time in the window per A job started in it."""
    server_us: float | None
    """The PostgreSQL server's (None: not on this host)."""


def _phase(url: str, args: argparse.Namespace, with_quiet: bool) -> Phase:
    """One phase on a fresh database; prints its figures."""
    _prepare(url, args.backlog, args.job_ms, with_quiet)
    with tempfile.TemporaryDirectory(prefix="tickwork-fairness-") as tmp:
        launched = time.monotonic()
        fleet = Fleet.start(url, Path(tmp), PROCESSES)
        try:
            with psycopg.connect(url, autocommit=True) as conn:
                deadline = time.monotonic() + STARTUP_SECONDS
                while _scalar(conn, "SELECT count(*) FROM tickwork.workers") < PROCESSES:
                    fleet.check()
                    if time.monotonic() > deadline:
                        raise SystemExit("the worker processes did not register")
                    time.sleep(0.05)
                registered = time.monotonic() - launched
                start = (_db_now(conn) + timedelta(seconds=args.warmup + 1)).replace(microsecond=0)
                end = start + timedelta(seconds=args.seconds)
                print(
                    f"  {PROCESSES} workers registered {registered:.1f} s after their start; "
                    f"window {start:%H:%M:%S}Z to {end:%H:%M:%S}Z",
                    flush=True,
                )
                _until(conn, fleet, start)
                cpu = Cpu(url, fleet)
                waiting = _scalar(conn, _LOUD_WAITING, {"ns": LOUD})
                _until(conn, fleet, end)
                used = cpu.used()
                waiting -= _scalar(conn, _LOUD_WAITING, {"ns": LOUD})
                _until(conn, fleet, end + timedelta(seconds=SETTLE_SECONDS))
                window = {"start": start, "end": end}
                quiet = conn.execute(_QUIET_FIGURES, {**window, "ns": QUIET}).fetchone()
                loud = conn.execute(_LOUD_FIGURES, {**window, "ns": LOUD}).fetchone()
        finally:
            codes = fleet.stop()
    assert quiet is not None and loud is not None
    if with_quiet:
        _print_quiet(args.seconds, *quiet)
    left = int(loud[0])
    # Started in the window: the waiting jobs it took away, plus the occurrences A's schedule
    # added in it (one a second). Not counted from the finished rows: the history limits'
    # retention deletes A's succeeded jobs beyond the newest 1,000 every few seconds.
    succeeded = started = int(waiting) + args.seconds
    rate: float = started / args.seconds
    ran_out = " (the backlog ran out: the rate is understated)" if left == 0 else ""
    print(
        f"  A ({LOUD}): {started:,} jobs started in the window = {rate:,.0f} jobs/s; "
        f"{left:,} still available at the end{ran_out}"
    )
    workers_s, server_s = used
    phase = Phase(
        rate,
        workers_s / max(succeeded, 1) * 1e6,
        None if server_s is None else server_s / max(succeeded, 1) * 1e6,
    )
    print(f"  CPU in the window per A job started in it: {_cpu(phase)}")
    print(f"  workers stopped (SIGTERM), exit codes {codes}", flush=True)
    return phase


def _cpu(phase: Phase) -> str:
    text = f"workers {phase.workers_us:,.0f} µs"
    if phase.server_us is not None:
        text += f", PostgreSQL {phase.server_us:,.0f} µs"
    return text


def _until(conn: psycopg.Connection[Any], fleet: Fleet, moment: datetime) -> None:
    """Wait until the database clock passes ``moment``; a worker that exits fails the run."""
    while _db_now(conn) < moment:
        fleet.check()
        time.sleep(min(0.2, max(0.0, (moment - _db_now(conn)).total_seconds())))


class Cpu:
    """CPU seconds of the worker processes and of the database server from now on (the
    server's: None when it does not run on this host)."""

    def __init__(self, url: str, fleet: Fleet) -> None:
        self.url = url
        self.pids = [p.pid for p in fleet.processes]
        self.workers = sum(measure.process_cpu(pid) for pid in self.pids)
        self.server = measure.server_cpu(url)

    def used(self) -> tuple[float, float | None]:
        workers = sum(measure.process_cpu(pid) for pid in self.pids) - self.workers
        server = measure.server_cpu(self.url)
        if server is None or self.server is None:
            return workers, None
        return workers, server - self.server


def _print_quiet(
    seconds: int,
    fired: int,
    started: int,
    p50: float | None,
    p99: float | None,
    worst: float | None,
    oldest: float | None,
    fired_p99: float | None,
    fired_max: float | None,
) -> None:
    print(
        f"  B ({QUIET}): {seconds} occurrences due in the window, {fired} jobs fired, "
        f"{started} started by its end, {seconds - started} not started"
    )
    if started:
        print(
            f"  B start lag (started_at - occurrence_at) of the {started} started: "
            f"p50 {p50:,.0f} ms, p99 {p99:,.0f} ms, max {worst:,.0f} ms"
        )
    else:
        print("  B start lag: none of the window's occurrences started by its end")
    if fired_p99 is not None:
        print(
            f"  of which firing (created_at - occurrence_at, the firing transaction's start): "
            f"p99 {fired_p99:,.0f} ms, max {fired_max:,.0f} ms"
        )
    if oldest is not None:
        print(f"  B's oldest job not started had waited {oldest:.1f} s at the window's end")


def _median(phases: list[Phase]) -> Phase:
    servers_us = [p.server_us for p in phases if p.server_us is not None]
    return Phase(
        statistics.median(p.rate for p in phases),
        statistics.median(p.workers_us for p in phases),
        statistics.median(servers_us) if len(servers_us) == len(phases) else None,
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument(
        "--backlog", type=int, default=43_200, help="A's due jobs (default 43200: 12 h of 1 s)"
    )
    parser.add_argument("--job-ms", type=int, default=20, help="each job's sleep (default 20)")
    parser.add_argument("--seconds", type=int, default=30, help="the window (default 30)")
    parser.add_argument(
        "--warmup",
        type=float,
        default=3.0,
        help="seconds from the workers' registration to the window (default 3)",
    )
    parser.add_argument("--alone", action="store_true", help="phase 2 only: A with no B")
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="both phases this many times, in turns first; the medians (default 1)",
    )
    servers.add_arguments(parser)
    args = parser.parse_args()
    if min(args.backlog, args.seconds, args.rounds) < 1 or args.job_ms < 0:
        parser.error("--backlog, --seconds and --rounds at least 1, --job-ms at least 0")
    print(
        f"fairness: A {LOUD!r} {args.backlog:,} due jobs of {args.job_ms} ms, B {QUIET!r} "
        f"every: 1s; {PROCESSES} tickwork worker processes (defaults, --namespaces "
        f"{LOUD},{QUIET}); a window of {args.seconds} s from {args.warmup:g} s after they "
        "registered",
        flush=True,
    )
    began = time.monotonic()
    phases: dict[bool, list[Phase]] = {True: [], False: []}
    for round_ in range(args.rounds):
        # Both phases each round, in turns first, so that neither always runs on a warmer host.
        order = [False] if args.alone else [True, False] if round_ % 2 == 0 else [False, True]
        for with_quiet in order:
            title = "A with B" if with_quiet else "A alone (no B)"
            rounds = f" (round {round_ + 1} of {args.rounds})" if args.rounds > 1 else ""
            print(f"phase {1 if with_quiet else 2}: {title}{rounds}", flush=True)
            with servers.database_server(args.database_url) as url:
                phases[with_quiet].append(_phase(url, args, with_quiet))
    if phases[True]:
        together, alone = (_median(phases[w]) for w in (True, False))
        medians = f" (medians of {args.rounds})" if args.rounds > 1 else ""
        ratio = f" = {100 * together.rate / alone.rate:.1f} %" if alone.rate else ""
        print(
            f"A's drain with B / alone{medians}: {together.rate:,.0f} / {alone.rate:,.0f} "
            f"jobs/s{ratio}; CPU per A job with B: {_cpu(together)}; alone: {_cpu(alone)}"
        )
    print(f"run time {time.monotonic() - began:.0f} s")


if __name__ == "__main__":
    main()
