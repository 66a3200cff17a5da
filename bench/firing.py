"""Firing: how fast due schedules become jobs, and how late.

    python bench/firing.py --schedules 1000 --processes 2
    python bench/firing.py --every-second 200 --seconds 30 --processes 2

Cron mode (``--schedules S``): S schedules ``M * * * *`` all due at the same minute M (the
first one far enough ahead for the sync and the workers' start), fired by P worker processes
(spawned) offering the benchmark's namespace. Prints the sync time, how many occurrences were
fired and when the last job became visible, occurrences fired per second, and the firing lag.

Every-second mode (``--every-second S --seconds N``): S schedules ``every: 1s`` fired for N
seconds; also counts the occurrences of the window that have no job (there must be none).

Lag is due → job committed: ``pg_xact_commit_timestamp(jobs.xmin) - jobs.occurrence_at`` on
the database clock, so it includes the whole firing transaction. The private server is started
with ``track_commit_timestamp = on`` for that; on a server given by ``--database-url``
without it, the figure falls back to ``jobs.created_at`` (the start of the firing
transaction) and says so. "Last job visible" is the benchmark polling the jobs table every
few milliseconds. The jobs are created, not run: no process serves their kind, so the figures are
firing alone (``bench/throughput.py`` measures running jobs).

Runs on a database of its own: on the server of ``--database-url``, or on a private PostgreSQL
with its default durability (see servers.py).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import psycopg
import servers

import tickwork
from tickwork.db import migrate
from tickwork.schedules.definition import JobTemplate, ScheduleDefinition
from tickwork.settings import WorkerSettings
from tickwork.worker.runner import Worker

NAMESPACE = "bench-firing"
KIND = "bench.tick"
OWNER = "bench"
WORKER_PREFIX = "bench-firing-"
STARTUP_SECONDS = 10.0
"""Time allowed for the worker processes to start (spawn, imports, pools)."""
SYNC_RATE = 10_000
"""Definitions synced per second, assumed when choosing the due minute (measured: ~15,000)."""
GRACE = timedelta(minutes=1)
"""How long after the due time the benchmark waits for missing jobs."""
POLL_SECONDS = 0.005


def _serve(url: str, name: str) -> None:
    """A worker process that fires the benchmark's namespace and runs nothing."""
    settings = WorkerSettings(
        database_url=url, app="bench", name=name, namespaces=(NAMESPACE,), concurrency=1
    )
    worker = Worker(tickwork.App(url), settings)

    async def main() -> None:
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, worker.stop)
        await worker.run()

    asyncio.run(main())


@contextmanager
def _workers(url: str, processes: int) -> Iterator[None]:
    """P worker processes, registered (so started) before the body runs; stopped after."""
    ctx = multiprocessing.get_context("spawn")
    started = [
        ctx.Process(target=_serve, args=(url, f"{WORKER_PREFIX}{i}")) for i in range(processes)
    ]
    for p in started:
        p.start()
    try:
        deadline = time.monotonic() + STARTUP_SECONDS * 3
        with psycopg.connect(url, autocommit=True) as conn:
            while _scalar(conn, _REGISTERED, {"prefix": WORKER_PREFIX + "%"}) < processes:
                if time.monotonic() > deadline or not all(p.is_alive() for p in started):
                    raise SystemExit("the worker processes did not start")
                time.sleep(0.05)
        yield
    finally:
        for p in started:
            if p.pid is not None and p.is_alive():
                os.kill(p.pid, signal.SIGTERM)
        for p in started:
            p.join()


_REGISTERED = "SELECT count(*) FROM tickwork.workers WHERE name LIKE %(prefix)s"


def _scalar(conn: psycopg.Connection[Any], query: str, params: Any = None) -> Any:
    row = conn.execute(query, params).fetchone()
    assert row is not None
    return row[0]


def _reset(url: str) -> None:
    migrate.apply(url)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DELETE FROM tickwork.jobs WHERE schedule_namespace = %s", (NAMESPACE,))
        conn.execute("DELETE FROM tickwork.schedules WHERE namespace = %s", (NAMESPACE,))
        conn.execute("DELETE FROM tickwork.schedule_namespaces WHERE namespace = %s", (NAMESPACE,))
        conn.execute("DELETE FROM tickwork.workers WHERE name LIKE %s", (WORKER_PREFIX + "%",))


def _sync(url: str, definitions: list[ScheduleDefinition], *, quiet: bool = False) -> float:
    """Sync ``definitions`` into the benchmark's namespace; returns the seconds it took."""
    app = tickwork.App(url)
    try:
        started = time.perf_counter()
        report = app.sync_schedules(NAMESPACE, definitions, owner=OWNER)
        took = time.perf_counter() - started
    finally:
        app.close()
    assert len(report.created) == len(definitions), report
    if quiet:
        return took
    print(
        f"  sync: {len(definitions):,} definitions in {took:.2f} s "
        f"({len(definitions) / took:,.0f}/s, one sync_schedules call)"
    )
    return took


@dataclass(frozen=True)
class Figures:
    fired: int
    p50_ms: float
    p99_ms: float
    max_ms: float
    first: datetime
    last: datetime
    source: str
    """The column standing for "job created": the commit time, or created_at."""


_FIGURES = """
SELECT count(*),
       coalesce(1000 * percentile_cont(0.5) WITHIN GROUP (ORDER BY lag), 0),
       coalesce(1000 * percentile_cont(0.99) WITHIN GROUP (ORDER BY lag), 0),
       coalesce(1000 * max(lag), 0),
       min(created), max(created)
FROM (SELECT created, extract(epoch FROM created - occurrence_at)::float8 AS lag
      FROM (SELECT {created} AS created, occurrence_at
            FROM tickwork.jobs
            WHERE schedule_namespace = %(ns)s
              AND occurrence_at >= %(start)s AND occurrence_at < %(end)s) AS jobs) AS fired
"""
_COMMITTED = "pg_xact_commit_timestamp(xmin)"
_CREATED = "created_at"


def _lag_source(conn: psycopg.Connection[Any]) -> str:
    on = _scalar(conn, "SELECT current_setting('track_commit_timestamp') = 'on'")
    return _COMMITTED if on else _CREATED


def _figures(conn: psycopg.Connection[Any], start: datetime, end: datetime) -> Figures:
    source = _lag_source(conn)
    row = conn.execute(
        _FIGURES.format(created=source), {"ns": NAMESPACE, "start": start, "end": end}
    ).fetchone()
    assert row is not None
    return Figures(*row, source=source)


def _count(conn: psycopg.Connection[Any], start: datetime, end: datetime) -> int:
    return int(
        _scalar(
            conn,
            "SELECT count(*) FROM tickwork.jobs WHERE schedule_namespace = %(ns)s"
            " AND occurrence_at >= %(start)s AND occurrence_at < %(end)s",
            {"ns": NAMESPACE, "start": start, "end": end},
        )
    )


def _db_now(conn: psycopg.Connection[Any]) -> datetime:
    now: datetime = _scalar(conn, "SELECT clock_timestamp()")
    return now


def _wait_for(
    conn: psycopg.Connection[Any], start: datetime, end: datetime, expected: int, until: datetime
) -> tuple[int, datetime]:
    """Poll until ``expected`` jobs of occurrences in [start, end) are visible, or the
    database clock passes ``until``; returns the count and when it was last read."""
    while True:
        seen, now = _count(conn, start, end), _db_now(conn)
        if seen >= expected or now > until:
            return seen, now
        time.sleep(POLL_SECONDS)


def _print_lag(figures: Figures) -> None:
    what = "commit" if figures.source == _COMMITTED else "jobs.created_at (commit time not tracked)"
    print(
        f"  lag (due -> {what}): p50 {figures.p50_ms:.1f} ms, "
        f"p99 {figures.p99_ms:.1f} ms, max {figures.max_ms:.1f} ms"
    )


@dataclass(frozen=True)
class CronRun:
    schedules: int
    fired: int
    visible_after: float
    """Seconds from the due time to the last job seen."""
    figures: Figures

    @property
    def rate(self) -> float:
        return self.fired / self.visible_after


def measure_cron(url: str, schedules: int, processes: int, *, quiet: bool = False) -> CronRun:
    """S schedules due in the same minute, fired by P worker processes: the figures."""
    _reset(url)
    with _workers(url, processes), psycopg.connect(url, autocommit=True) as conn:
        lead = timedelta(seconds=STARTUP_SECONDS + schedules / SYNC_RATE)
        now = _db_now(conn)
        due = (now + lead).replace(second=0, microsecond=0) + timedelta(minutes=1)
        expression = f"{due.minute} * * * *"
        definitions = [
            ScheduleDefinition(name=f"s{i:06d}", job=JobTemplate(kind=KIND), schedule=expression)
            for i in range(schedules)
        ]
        _sync(url, definitions, quiet=quiet)
        waiting = _scalar(
            conn,
            "SELECT count(*) FROM tickwork.schedules WHERE namespace = %s AND next_run_at = %s",
            (NAMESPACE, due),
        )
        if waiting != schedules:
            raise SystemExit(f"only {waiting} schedules wait for {due:%H:%M}Z: the sync was late")
        ahead = (due - _db_now(conn)).total_seconds()
        if not quiet:
            print(f"  due at {due:%H:%M:%S}Z ({ahead:.1f} s after the sync)")
        end = due + timedelta(seconds=1)
        seen, visible = _wait_for(conn, due, end, schedules, due + GRACE)
        figures = _figures(conn, due, end)
    return CronRun(schedules, seen, (visible - due).total_seconds(), figures)


def run_cron(url: str, schedules: int, processes: int) -> None:
    print(f"firing, cron: {schedules:,} schedules due in the same minute, P={processes}")
    run = measure_cron(url, schedules, processes)
    status = "all fired" if run.fired == schedules else f"MISSING {schedules - run.fired}"
    print(
        f"  fired: {run.fired:,} of {schedules:,} ({status}); "
        f"last visible {run.visible_after:.3f} s after due"
    )
    print(f"  rate: {run.rate:,.0f} occurrences/s (due to last job visible)")
    _print_lag(run.figures)


def run_every_second(url: str, schedules: int, seconds: int, processes: int) -> None:
    _reset(url)
    print(f"firing, every second: {schedules:,} schedules every: 1s for {seconds} s, P={processes}")
    with _workers(url, processes), psycopg.connect(url, autocommit=True) as conn:
        definitions = [
            ScheduleDefinition(
                name=f"e{i:06d}", job=JobTemplate(kind=KIND), every=timedelta(seconds=1)
            )
            for i in range(schedules)
        ]
        _sync(url, definitions)
        # The window starts at a whole second after the sync, when every schedule is due.
        start = _db_now(conn).replace(microsecond=0) + timedelta(seconds=2)
        end = start + timedelta(seconds=seconds)
        expected = schedules * seconds
        seen, visible = _wait_for(conn, start, end, expected, end + GRACE)
        figures = _figures(conn, start, end)
        per_schedule = conn.execute(
            "SELECT coalesce(min(n), 0), coalesce(max(n), 0) FROM ("
            " SELECT count(*) AS n FROM tickwork.jobs WHERE schedule_namespace = %(ns)s"
            " AND occurrence_at >= %(start)s AND occurrence_at < %(end)s"
            " GROUP BY schedule_name) AS c",
            {"ns": NAMESPACE, "start": start, "end": end},
        ).fetchone()
    assert per_schedule is not None
    missing = expected - seen
    after = (visible - (end - timedelta(seconds=1))).total_seconds()
    print(
        f"  window {start:%H:%M:%S}Z to {end:%H:%M:%S}Z: {seen:,} of {expected:,} occurrences "
        f"fired, {missing} missing; per schedule {per_schedule[0]} to {per_schedule[1]} "
        f"(expected {seconds})"
    )
    print(f"  last job visible {after:.3f} s after the last due second")
    print(f"  rate: {seen / seconds:,.0f} occurrences/s sustained")
    _print_lag(figures)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--schedules", type=int, metavar="S", help="cron mode (default 1000)")
    mode.add_argument("--every-second", type=int, metavar="S", help="S schedules every: 1s")
    parser.add_argument("--seconds", type=int, default=30, help="every-second mode (default 30)")
    parser.add_argument("--processes", type=int, default=2, help="worker processes (default 2)")
    servers.add_arguments(parser)
    args = parser.parse_args()

    def run(url: str) -> None:
        if args.every_second:
            run_every_second(url, args.every_second, args.seconds, args.processes)
        else:
            run_cron(url, args.schedules or 1000, args.processes)

    with servers.database_server(args.database_url, track_commit_timestamp="on") as url:
        run(url)


if __name__ == "__main__":
    main()
