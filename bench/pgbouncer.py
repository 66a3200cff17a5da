"""Through PgBouncer: drain rate, firing lag and what polling costs, against a direct connection.

    python bench/pgbouncer.py --jobs 20000 --processes 2

Starts a private PostgreSQL (default durability, ``track_commit_timestamp`` and
``pg_stat_statements`` on) and Debian's pgbouncer in ``pool_mode = transaction`` in front of it
(see servers.py), then runs the same P worker processes with the worker's default settings
(they also fire the benchmark's schedule namespace) in three setups, one after the other:

* ``direct``: ``--database-url`` is PostgreSQL itself; the workers LISTEN on it;
* ``pgbouncer poll``: ``--database-url`` goes through pgbouncer with ``--pooler transaction``
  and no ``--listen-url``: no notifications, the workers poll every ``--poll-seconds``;
* ``pgbouncer+listen``: the same, with ``--listen-url`` a direct connection for LISTEN.

For each setup it prints:

* drain: N no-op jobs enqueued before the workers start, jobs/s from the first claim to the
  last success (as bench/throughput.py measures it);
* firing lag: S ``every: 1s`` schedules fired for T seconds, due time to the commit of the
  job's insert, p50/p99 (as bench/firing.py's every-second mode measures it);
* idle cost: with nothing to do, the statements each idle worker sends per second (counted by
  pg_stat_statements, BEGIN and COMMIT included) and how many of them are claims;
* wake-up: one job enqueued (``App.enqueue``) to idle workers, K times at a random phase of
  the poll interval, its queue latency (run_at, the start of the enqueue's transaction, to the
  claim), p50/p99.

Runs on a database of its own (see servers.py); with ``--database-url``, pgbouncer is started
in front of that server, and without pg_stat_statements there the idle cost is not shown.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import random
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import firing
import psycopg
import servers
import throughput

from tickwork.db import migrate
from tickwork.schedules.definition import ScheduleDefinition
from tickwork.schedules.options import JobTemplate
from tickwork.settings import WorkerSettings
from tickwork.worker.runner import Worker

PREFIX = "bench-pgbouncer-"
KIND = throughput.KIND
STARTUP_SECONDS = 60.0
_CLAIM = "%WITH busy AS MATERIALIZED%"
"""A fragment of the claim statement's text (query job_claim), to count claims."""


@dataclass(frozen=True)
class Setup:
    name: str
    database_url: str
    pooler: str = "none"
    listen_url: str = ""


@dataclass
class Figures:
    drain: float = 0.0
    noticed: float = 0.0
    lag_p50: float = 0.0
    lag_p99: float = 0.0
    idle_statements: float | None = None
    idle_claims: float | None = None
    wake_p50: float = 0.0
    wake_p99: float = 0.0


def _serve(settings: WorkerSettings) -> None:
    """A worker process with the given settings, serving the no-op task, until SIGTERM."""
    worker = Worker(throughput._app(settings.database_url), settings)

    async def main() -> None:
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, worker.stop)
        await worker.run()

    asyncio.run(main())


def _settings(setup: Setup, name: str) -> WorkerSettings:
    return WorkerSettings(
        database_url=setup.database_url,
        app="bench",
        name=name,
        namespaces=(firing.NAMESPACE,),
        pooler=setup.pooler,
        listen_url=setup.listen_url,
    )


def _scalar(conn: psycopg.Connection[Any], query: str, params: Any = None) -> Any:
    row = conn.execute(query, params).fetchone()
    assert row is not None
    return row[0]


@contextmanager
def _fleet(direct: str, setup: Setup, processes: int) -> Iterator[list[WorkerSettings]]:
    """P worker processes of ``setup``, registered (and LISTENing, when they do) before the
    body runs; stopped with SIGTERM after."""
    ctx = multiprocessing.get_context("spawn")
    all_settings = [_settings(setup, f"{PREFIX}{i}") for i in range(processes)]
    started = [ctx.Process(target=_serve, args=(s,)) for s in all_settings]
    for p in started:
        p.start()
    try:
        listening = processes if all_settings[0].notifications_url else 0
        deadline = time.monotonic() + STARTUP_SECONDS
        with psycopg.connect(direct, autocommit=True) as conn:
            while (
                _scalar(
                    conn,
                    "SELECT count(*) FROM tickwork.workers WHERE name LIKE %s",
                    (PREFIX + "%",),
                )
                < processes
                or _scalar(
                    conn,
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                    " AND query LIKE 'LISTEN %%' AND state = 'idle'",
                )
                < listening
            ):
                if time.monotonic() > deadline or not all(p.is_alive() for p in started):
                    raise SystemExit(f"the worker processes of {setup.name} did not start")
                time.sleep(0.05)
        yield all_settings
    finally:
        for p in started:
            if p.pid is not None and p.is_alive():
                os.kill(p.pid, signal.SIGTERM)
        for p in started:
            p.join()


def _percentile(values: list[float], fraction: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))]


def _drain(conn: psycopg.Connection[Any], jobs: int) -> float:
    """Wait until the jobs are drained; jobs/s from the first claim to the last success."""
    deadline = time.monotonic() + 600
    while not throughput._drained(conn):
        if time.monotonic() > deadline:
            raise SystemExit("the jobs were not drained within 10 minutes")
        time.sleep(0.05)
    row = conn.execute(
        "SELECT extract(epoch FROM max(finished_at) - min(started_at))::float8,"
        " count(*) FILTER (WHERE status = 'succeeded') FROM tickwork.jobs"
    ).fetchone()
    assert row is not None
    seconds, succeeded = row
    if succeeded != jobs:
        raise SystemExit(f"only {succeeded} of {jobs} jobs succeeded")
    return float(succeeded / seconds)


def _idle(
    conn: psycopg.Connection[Any], processes: int, seconds: float
) -> tuple[float, float] | None:
    """Statements and claims per second per idle worker (None without pg_stat_statements)."""
    try:
        conn.execute("SELECT pg_stat_statements_reset()")
    except psycopg.Error:
        return None
    time.sleep(seconds)
    row = conn.execute(
        "SELECT coalesce(sum(calls), 0)::float8,"
        " coalesce(sum(calls) FILTER (WHERE query LIKE %s), 0)::float8"
        " FROM pg_stat_statements"
        " WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())"
        " AND query NOT LIKE '%%pg_stat_statements%%'",
        (_CLAIM,),
    ).fetchone()
    assert row is not None
    return row[0] / processes / seconds, row[1] / processes / seconds


def _wake(
    conn: psycopg.Connection[Any], direct: str, samples: int, poll_seconds: float
) -> list[float]:
    """Queue latencies (ms) of single jobs enqueued to idle workers at a random phase of
    their poll interval."""
    app = throughput._app(direct)
    latencies = []
    try:
        for _ in range(samples):
            time.sleep(random.uniform(0, poll_seconds))
            job_id = app.enqueue(KIND, {})
            deadline = time.monotonic() + 60
            while True:
                latency = _scalar(
                    conn,
                    "SELECT 1000 * extract(epoch FROM started_at - run_at)::float8"
                    " FROM tickwork.jobs WHERE id = %s",
                    (job_id,),
                )
                if latency is not None:
                    break
                if time.monotonic() > deadline:
                    raise SystemExit(f"job {job_id} was not claimed within 60 s")
                time.sleep(0.002)
            latencies.append(latency)
    finally:
        app.close()
    return latencies


def _lag(direct: str, schedules: int, seconds: int) -> tuple[float, float, float]:
    """Sync S every-second schedules, wait for their first job (how long the workers take to
    notice a sync: a notification, or their next look), then fire them for T seconds: returns
    that delay (s) and the firing lag (due -> commit) p50/p99 in ms."""
    firing._reset(direct)
    definitions = [
        ScheduleDefinition(
            name=f"e{i:06d}", job=JobTemplate(kind="bench.tick"), every=timedelta(seconds=1)
        )
        for i in range(schedules)
    ]
    with psycopg.connect(direct, autocommit=True) as conn:
        synced = firing._db_now(conn)
        firing._sync(direct, definitions)
        deadline = time.monotonic() + 120
        while not _scalar(
            conn,
            "SELECT EXISTS (SELECT 1 FROM tickwork.jobs WHERE schedule_namespace = %s)",
            (firing.NAMESPACE,),
        ):
            if time.monotonic() > deadline:
                raise SystemExit("firing: no job within 120 s of the sync")
            time.sleep(0.005)
        noticed = (firing._db_now(conn) - synced).total_seconds()
        start = firing._db_now(conn).replace(microsecond=0) + timedelta(seconds=1)
        end = start + timedelta(seconds=seconds)
        expected = schedules * seconds
        seen, _ = firing._wait_for(conn, start, end, expected, end + firing.GRACE)
        figures = firing._figures(conn, start, end)
    if seen != expected:
        raise SystemExit(f"firing: {seen} of {expected} occurrences fired")
    firing._reset(direct)
    return noticed, figures.p50_ms, figures.p99_ms


def run_setup(direct: str, setup: Setup, args: argparse.Namespace) -> Figures:
    print(f"{setup.name}:")
    figures = Figures()
    migrate.apply(direct)
    with psycopg.connect(direct, autocommit=True) as conn:
        conn.execute("TRUNCATE tickwork.jobs CASCADE")
        conn.execute("DELETE FROM tickwork.workers")
        app = throughput._app(direct)
        for offset in range(0, args.jobs, 10_000):
            count = min(10_000, args.jobs - offset)
            app.enqueue_many(KIND, [{"n": n} for n in range(offset, offset + count)])
        app.close()
        with _fleet(direct, setup, args.processes) as fleet:
            figures.drain = _drain(conn, args.jobs)
            print(f"  drain: {args.jobs:,} jobs, {figures.drain:,.0f} jobs/s")
            idle = _idle(conn, args.processes, args.idle_seconds)
            if idle is None:
                print("  idle cost: not measured (no pg_stat_statements on this server)")
            else:
                figures.idle_statements, figures.idle_claims = idle
                print(
                    f"  idle cost: {idle[0]:.2f} statements/s per idle worker, of which "
                    f"{idle[1]:.2f} claims/s (over {args.idle_seconds:g} s)"
                )
            wake = _wake(conn, direct, args.samples, fleet[0].poll_seconds)
            figures.wake_p50, figures.wake_p99 = _percentile(wake, 0.5), _percentile(wake, 0.99)
            print(
                f"  wake-up of an idle worker: p50 {figures.wake_p50:.1f} ms, "
                f"p99 {figures.wake_p99:.1f} ms, max {max(wake):.1f} ms ({len(wake)} jobs, "
                f"poll interval {fleet[0].poll_seconds:g} s)"
            )
            noticed, figures.lag_p50, figures.lag_p99 = _lag(direct, args.schedules, args.seconds)
            figures.noticed = noticed
            print(
                f"  firing: the new schedules' first job {noticed:.2f} s after their sync; lag "
                f"(due -> commit), {args.schedules} every-second schedules for {args.seconds} s:"
                f" p50 {figures.lag_p50:.1f} ms, p99 {figures.lag_p99:.1f} ms"
            )
    return figures


def _summary(results: dict[str, Figures]) -> None:
    print(
        f"{'setup':<18} {'drain jobs/s':>12} {'sync seen':>9} {'lag p50':>9} {'lag p99':>9} "
        f"{'idle stmt/s':>11} {'claims/s':>9} {'wake p50':>9} {'wake p99':>9}"
    )
    for name, f in results.items():
        idle = "-" if f.idle_statements is None else f"{f.idle_statements:.2f}"
        claims = "-" if f.idle_claims is None else f"{f.idle_claims:.2f}"
        print(
            f"{name:<18} {f.drain:>12,.0f} {f.noticed:>8.2f}s {f.lag_p50:>7.1f}ms "
            f"{f.lag_p99:>7.1f}ms {idle:>11} {claims:>9} {f.wake_p50:>7.0f}ms {f.wake_p99:>7.0f}ms"
        )
    direct = results["direct"].drain
    for name, f in results.items():
        if name != "direct":
            print(f"drain {name} / direct: {f.drain / direct:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=20_000, help="no-op jobs drained (20000)")
    parser.add_argument("--processes", type=int, default=2, help="worker processes (2)")
    parser.add_argument("--schedules", type=int, default=50, help="every-second schedules (50)")
    parser.add_argument("--seconds", type=int, default=20, help="seconds they fire (20)")
    parser.add_argument("--idle-seconds", type=float, default=30, help="idle window counted (30)")
    parser.add_argument("--samples", type=int, default=50, help="single jobs woken up (50)")
    servers.add_arguments(parser)
    args = parser.parse_args()
    system = {"track_commit_timestamp": "on", "shared_preload_libraries": "pg_stat_statements"}
    with servers.database_server(args.database_url, **system) as direct:
        with psycopg.connect(direct, autocommit=True) as conn:
            try:
                conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            except psycopg.Error as exc:
                print(f"pg_stat_statements unavailable ({exc.diag.message_primary}): no idle cost")
        with servers.pgbouncer(direct) as bouncer:
            setups = [
                Setup("direct", direct),
                Setup("pgbouncer poll", bouncer, pooler="transaction"),
                Setup("pgbouncer+listen", bouncer, pooler="transaction", listen_url=direct),
            ]
            results = {setup.name: run_setup(direct, setup, args) for setup in setups}
    _summary(results)


if __name__ == "__main__":
    main()
