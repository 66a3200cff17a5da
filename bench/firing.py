"""Firing: how fast due schedules become jobs, and how late.

    python bench/firing.py --schedules 1000 --processes 2
    python bench/firing.py --every-second 200 --seconds 30 --processes 2
    python bench/firing.py --schedules 1000000 --namespaces 100 --spread 60 --processes 2

Cron mode (``--schedules S``): S schedules ``SEC M * * * *`` all due at the same second (the
first one far enough ahead for the sync and the workers' start), fired by P worker processes
(spawned) offering the benchmark's namespace. Prints the sync time, how many occurrences were
fired and when the last job became visible, occurrences fired per second, and the firing lag.

At scale (``--namespaces K`` and/or ``--spread T`` with ``--schedules S``): S schedules in K
namespaces, hourly, their due times spread over T seconds of one minute (``SEC M * * * *``;
with T = 60 the whole minute from its start, with less the first T seconds that fit after the
build), fired by P worker processes each offering all K namespaces. The rows are
built in SQL, not one sync call: each namespace is synced (``sync_schedules``) with the T
schedules of its seconds, then ``INSERT ... SELECT generate_series`` copies those rows under the
other names (a spec holds no name, so each copy is the row sync writes for it; the benchmark
checks a sample against the definitions). Prints the build time, how many fired within a
minute of the first due time, the lag, occurrences fired per second, and each worker's memory
(RSS when the schedules are due, and its peak).

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
with its default durability (see servers.py). At scale the private server's shared_buffers
and max_wal_size are sized for the load (``SCALE_SERVER``, printed; ``--postgres-defaults``
runs it with PostgreSQL's own), and the run prints the WAL written while firing (per occurrence,
its records and full-page images: after each checkpoint a page's first change writes the whole
page), the checkpoints taken, and the tables' sizes.
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

import measure
import psycopg
import servers

import tickwork
from tickwork.db import migrate
from tickwork.schedules.definition import ScheduleDefinition
from tickwork.schedules.options import JobTemplate
from tickwork.settings import WorkerSettings
from tickwork.worker.runner import Worker

NAMESPACE = "bench-firing"
KIND = "bench.tick"
OWNER = "bench"
WORKER_PREFIX = "bench-firing-"
STARTUP_SECONDS = 10.0
"""Time allowed for the worker processes to start (spawn, imports, pools)."""
MARGIN_SECONDS = 2.0
"""The first due time is this long after the expected end of the sync (the workers are
registered by then, so their firing loops are up)."""
SYNC_RATE = 10_000
"""Definitions synced per second, assumed when choosing the due minute (measured: ~15,000)."""
SCALE_SERVER = {"shared_buffers": "2GB", "max_wal_size": "8GB"}
"""The private server at scale, sized for the load as a production server would be: at 1M
schedules the schedules table, its indexes and a minute's jobs (~1.5 GB) stay in shared
buffers, and a minute of firing (~1.1 GB of WAL) passes without a checkpoint. With
PostgreSQL's defaults (``--postgres-defaults``: 128MB, 1GB) pages go back and forth to the
kernel's cache and each checkpoint (five in the minute) starts a new round of full-page
images: 2.8 GB of WAL instead of 1.1."""
GRACE = timedelta(minutes=1)
"""How long after the due time the benchmark waits for missing jobs."""
POLL_SECONDS = 0.005


def _serve(url: str, name: str, namespaces: tuple[str, ...]) -> None:
    """A worker process that fires the benchmark's namespaces and runs nothing."""
    settings = WorkerSettings(
        database_url=url, app="bench", name=name, namespaces=namespaces, concurrency=1
    )
    worker = Worker(tickwork.App(url), settings)

    async def main() -> None:
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, worker.stop)
        await worker.run()

    asyncio.run(main())


@contextmanager
def _workers(
    url: str, processes: int, namespaces: tuple[str, ...] = (NAMESPACE,)
) -> Iterator[list[int]]:
    """P worker processes, registered (so started) before the body runs; stopped after.
    Yields their process ids."""
    ctx = multiprocessing.get_context("spawn")
    started = [
        ctx.Process(target=_serve, args=(url, f"{WORKER_PREFIX}{i}", namespaces))
        for i in range(processes)
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
        yield [p.pid for p in started if p.pid is not None]
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


def _reset(url: str, namespaces: tuple[str, ...] = (NAMESPACE,)) -> None:
    migrate.apply(url)
    with psycopg.connect(url, autocommit=True) as conn:
        ns = list(namespaces)
        conn.execute("DELETE FROM tickwork.jobs WHERE schedule_namespace = ANY(%s)", (ns,))
        conn.execute("DELETE FROM tickwork.schedules WHERE namespace = ANY(%s)", (ns,))
        conn.execute("DELETE FROM tickwork.schedule_namespaces WHERE namespace = ANY(%s)", (ns,))
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


def _count(
    conn: psycopg.Connection[Any],
    start: datetime,
    end: datetime,
    namespaces: tuple[str, ...] = (NAMESPACE,),
) -> int:
    return int(
        _scalar(
            conn,
            "SELECT count(*) FROM tickwork.jobs WHERE schedule_namespace = ANY(%(ns)s)"
            " AND occurrence_at >= %(start)s AND occurrence_at < %(end)s",
            {"ns": list(namespaces), "start": start, "end": end},
        )
    )


def _db_now(conn: psycopg.Connection[Any]) -> datetime:
    now: datetime = _scalar(conn, "SELECT clock_timestamp()")
    return now


def _wait_for(
    conn: psycopg.Connection[Any],
    start: datetime,
    end: datetime,
    expected: int,
    until: datetime,
    namespaces: tuple[str, ...] = (NAMESPACE,),
) -> tuple[int, datetime]:
    """Poll until ``expected`` jobs of occurrences in [start, end) are visible, or the
    database clock passes ``until``; returns the count and when it was last read. While
    many are missing, polls so that counting takes at most 5 % of the time (a count of
    hundreds of thousands of rows takes a quarter of a second of the server's CPU, which
    the workers measured need)."""
    while True:
        began = time.perf_counter()
        seen, now = _count(conn, start, end, namespaces), _db_now(conn)
        if seen >= expected or now > until:
            return seen, now
        counting = time.perf_counter() - began
        time.sleep(POLL_SECONDS if expected - seen < 10_000 else max(0.5, 20 * counting))


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
    """S schedules due at the same second, fired by P worker processes: the figures."""
    _reset(url)
    with _workers(url, processes), psycopg.connect(url, autocommit=True) as conn:
        lead = timedelta(seconds=MARGIN_SECONDS + schedules / SYNC_RATE)
        now = _db_now(conn)
        due = (now + lead).replace(microsecond=0) + timedelta(seconds=1)
        expression = f"{due.second} {due.minute} * * * *"
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
            raise SystemExit(
                f"only {waiting} schedules wait for {due:%H:%M:%S}Z: the sync was late"
            )
        ahead = (due - _db_now(conn)).total_seconds()
        if not quiet:
            print(f"  due at {due:%H:%M:%S}Z ({ahead:.1f} s after the sync)")
        end = due + timedelta(seconds=1)
        seen, visible = _wait_for(conn, due, end, schedules, due + GRACE)
        figures = _figures(conn, due, end)
    return CronRun(schedules, seen, (visible - due).total_seconds(), figures)


def run_cron(url: str, schedules: int, processes: int) -> None:
    print(f"firing, cron: {schedules:,} schedules due at the same second, P={processes}")
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


BUILD_RATE = 20_000
"""Schedule rows built per second, assumed when choosing the due minute (measured here:
about 40,000; a busy machine is slower)."""

_COPY = """
INSERT INTO tickwork.schedules (
    namespace, name, revision, suspended, spec, fixed_delay, next_run_at, missed_before,
    created_at, updated_at)
SELECT t.namespace, 's' || lpad(i::text, 7, '0'), t.revision, t.suspended, t.spec,
       t.fixed_delay, t.next_run_at, t.missed_before, t.created_at, t.updated_at
FROM generate_series(%(first)s::integer, %(last)s::integer) AS i
JOIN tickwork.schedules t
  ON t.namespace = %(ns)s AND t.name = 's' || lpad((i %% %(spread)s::integer)::text, 7, '0')
"""


def _definition(index: int, due: datetime, spread: int) -> ScheduleDefinition:
    """Hourly, due ``index % spread`` seconds after the first due time ``due``."""
    return ScheduleDefinition(
        name=f"s{index:07d}",
        job=JobTemplate(kind=KIND),
        schedule=f"{due.second + index % spread} {due.minute} * * * *",
    )


def _first_due(now: datetime, lead: timedelta, spread: int) -> datetime:
    """The first second after ``lead`` from which ``spread`` seconds fit in its minute."""
    due = (now + lead).replace(microsecond=0) + timedelta(seconds=1)
    if due.second + spread > 60:
        due = due.replace(second=0) + timedelta(minutes=1)
    return due


def _build(
    url: str, namespaces: tuple[str, ...], per_namespace: int, spread: int, due: datetime
) -> None:
    """Each namespace: its ``spread`` first schedules through ``sync_schedules``, the rest
    copied from them in SQL. Checks a sample of copies against what sync would write."""
    started = time.perf_counter()
    app = tickwork.App(url)
    try:
        for ns in namespaces:
            templates = [_definition(i, due, spread) for i in range(min(spread, per_namespace))]
            app.sync_schedules(ns, templates, owner=OWNER)
    finally:
        app.close()
    synced = time.perf_counter()
    with psycopg.connect(url) as conn:
        for ns in namespaces:
            conn.execute(
                _COPY, {"ns": ns, "first": spread, "last": per_namespace - 1, "spread": spread}
            )
        conn.commit()
        copied = time.perf_counter()
        conn.execute("ANALYZE tickwork.schedules")
        conn.commit()
        for index in (spread, per_namespace // 2, per_namespace - 1):
            if index < spread:
                continue
            definition = _definition(index, due, spread)
            row = conn.execute(
                "SELECT spec, next_run_at, revision FROM tickwork.schedules"
                " WHERE namespace = %s AND name = %s",
                (namespaces[-1], definition.name),
            ).fetchone()
            expected = (definition.to_spec(), due + timedelta(seconds=index % spread), 1)
            if row is None or tuple(row) != expected:
                raise SystemExit(f"copied row {definition.name} is not what sync writes: {row}")
        for ns in namespaces:  # as a sync does: the workers look again
            conn.execute("SELECT pg_notify('tickwork_schedules', %s)", (ns,))
        conn.commit()
    total = per_namespace * len(namespaces)
    took = time.perf_counter() - started
    print(
        f"  build: {total:,} schedules in {took:.1f} s ({total / took:,.0f}/s; "
        f"sync of {min(spread, per_namespace) * len(namespaces):,} {synced - started:.1f} s, "
        f"copies {copied - synced:.1f} s, ANALYZE {time.perf_counter() - copied:.1f} s)"
    )


def _rss(pid: int) -> tuple[int, int]:
    """A process's resident set now and at its peak, in MiB (Linux /proc)."""
    fields = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            fields[key] = value.split()
    return int(fields["VmRSS"][0]) // 1024, int(fields["VmHWM"][0]) // 1024


_SCALE_FIGURES = """
SELECT count(*),
       count(*) FILTER (WHERE committed < %(minute_end)s),
       coalesce(1000 * percentile_cont(0.5) WITHIN GROUP (ORDER BY lag), 0),
       coalesce(1000 * percentile_cont(0.99) WITHIN GROUP (ORDER BY lag), 0),
       coalesce(1000 * max(lag), 0),
       max(committed)
FROM (SELECT committed, extract(epoch FROM committed - occurrence_at)::float8 AS lag
      FROM (SELECT {created} AS committed, occurrence_at
            FROM tickwork.jobs
            WHERE schedule_namespace = ANY(%(namespaces)s)
              AND occurrence_at >= %(start)s AND occurrence_at < %(end)s) AS jobs) AS fired
"""


_SIZE = "SELECT pg_total_relation_size(%s::regclass)"
_WAL = """
SELECT pg_current_wal_lsn() - '0/0'::pg_lsn, checkpoints_timed + checkpoints_req,
       wal_records, wal_fpi
FROM pg_stat_bgwriter, pg_stat_wal
"""


def run_scale(
    url: str, schedules: int, namespaces: int, spread: int, processes: int, statements: bool
) -> None:
    if not 1 <= spread <= 60:
        raise SystemExit("--spread: seconds within the due minute, 1 to 60")
    names = tuple(f"{NAMESPACE}-{k:03d}" for k in range(namespaces))
    per_namespace = max(schedules // namespaces, 1)
    total = per_namespace * namespaces
    _reset(url, names)
    print(
        f"firing at scale: {total:,} schedules in {namespaces} namespaces, due over "
        f"{spread} s of one minute, P={processes} (each offering every namespace)"
    )
    with _workers(url, processes, names) as pids, psycopg.connect(url, autocommit=True) as conn:
        idle = [_rss(pid)[0] for pid in pids]
        lead = timedelta(seconds=STARTUP_SECONDS + total / BUILD_RATE)
        due = _first_due(_db_now(conn), lead, spread)
        _build(url, names, per_namespace, spread, due)
        ahead = (due - _db_now(conn)).total_seconds()
        if ahead < 1:
            raise SystemExit(f"the build ended {-ahead:.1f} s after the due time {due:%H:%M}Z")
        print(f"  due from {due:%H:%M:%S}Z over {spread} s ({ahead:.1f} s after the build)")
        if statements and not measure.statements_enable(conn):
            print("--statements: the server does not preload pg_stat_statements")
            statements = False
        before = measure.statements(conn) if statements else {}
        wal_before = conn.execute(_WAL).fetchone()
        began = time.monotonic()
        while _db_now(conn) < due + timedelta(seconds=spread / 2):
            time.sleep(0.2)
        at_due = [_rss(pid)[0] for pid in pids]
        end = due + timedelta(seconds=spread)
        minute_end = due + timedelta(minutes=1)
        _, visible = _wait_for(conn, due, end, total, due + GRACE, names)
        peaks = [_rss(pid)[1] for pid in pids]
        spent = (
            measure.statements_between(before, measure.statements(conn), 8) if statements else []
        )
        seconds = time.monotonic() - began
        wal_after = conn.execute(_WAL).fetchone()
        sizes = ", ".join(
            f"{table} {_scalar(conn, _SIZE, (f'tickwork.{table}',)) / 2**20:,.0f} MiB"
            for table in ("schedules", "jobs")
        )
        source = _lag_source(conn)
        row = conn.execute(
            _SCALE_FIGURES.format(created=source),
            {"namespaces": list(names), "start": due, "end": end, "minute_end": minute_end},
        ).fetchone()
    assert row is not None
    fired, in_minute, p50, p99, worst, last = row
    status = "all fired" if in_minute == total else f"MISSING {total - in_minute} in the minute"
    after = ((last or visible) - due).total_seconds()
    print(f"  fired within the minute: {in_minute:,} of {total:,} ({status}); {fired:,} in all")
    print(f"  last job committed {after:.3f} s after the first due time")
    print(f"  rate: {fired / max(after, spread):,.0f} occurrences/s (over the spread or longer)")
    _print_lag(Figures(fired, p50, p99, worst, due, last or visible, source))
    for i in range(len(pids)):
        print(
            f"  worker {i} RSS: {idle[i]} MiB started, {at_due[i]} MiB mid-window, "
            f"peak {peaks[i]} MiB"
        )
    assert wal_before is not None and wal_after is not None
    print(f"  tables with their indexes: {sizes}")
    wal = wal_after[0] - wal_before[0]
    print(
        f"  database from the due time until the last job: {wal / 2**20:,.0f} MiB of WAL"
        f" ({wal / max(fired, 1):,.0f} bytes an occurrence; {wal_after[2] - wal_before[2]:,}"
        f" records, {wal_after[3] - wal_before[3]:,} full-page images),"
        f" {wal_after[1] - wal_before[1]} checkpoints"
    )
    if spent:
        print(f"  statements from the due time until the last job ({seconds:.0f} s), by time:")
        measure.print_statements(spent, seconds)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--schedules", type=int, metavar="S", help="cron mode (default 1000)")
    mode.add_argument("--every-second", type=int, metavar="S", help="S schedules every: 1s")
    parser.add_argument("--seconds", type=int, default=30, help="every-second mode (default 30)")
    parser.add_argument("--processes", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument(
        "--namespaces", type=int, help="at scale: schedules spread over K namespaces"
    )
    parser.add_argument(
        "--spread", type=int, help="at scale: due times spread over T seconds of the minute"
    )
    parser.add_argument(
        "--statements",
        action="store_true",
        help="at scale: where the database's time went (pg_stat_statements, preloaded by the"
        " private server)",
    )
    parser.add_argument(
        "--postgres-defaults",
        action="store_true",
        help="at scale: the private server with PostgreSQL's own shared_buffers and"
        " max_wal_size (128MB, 1GB), not sized for the load",
    )
    servers.add_arguments(parser)
    args = parser.parse_args()

    def run(url: str) -> None:
        if args.every_second:
            run_every_second(url, args.every_second, args.seconds, args.processes)
        elif args.namespaces or args.spread:
            schedules = args.schedules or 1000
            run_scale(
                url,
                schedules,
                args.namespaces or 1,
                args.spread or 1,
                args.processes,
                args.statements,
            )
        else:
            run_cron(url, args.schedules or 1000, args.processes)

    sized = {}
    if (args.namespaces or args.spread) and not args.postgres_defaults:
        sized = SCALE_SERVER
        if not args.database_url:
            print("private server: " + " ".join(f"{k}={v}" for k, v in sized.items()))
    with servers.database_server(
        args.database_url,
        track_commit_timestamp="on",
        **measure.preload(args.statements),
        **sized,
    ) as url:
        run(url)


if __name__ == "__main__":
    main()
