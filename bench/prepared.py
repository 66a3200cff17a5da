"""Prepared statements: each hot statement's time with server-side prepared statements off and on.

    python bench/prepared.py --runs 3

On a connection made as a worker makes its pool's (``connections.async_pool``, ``prepare``
off, then on; rounds alternate, each on new connections), times the statements a worker and
an App send most, client-side, round trip included:

* claim: ``job_claim`` of --batch jobs from a backlog, committed;
* complete: ``job_complete_many`` of those jobs, committed;
* enqueue: ``job_insert``, one job (``App.enqueue``), ten times as often as the others;
* enqueue_many: ``job_insert_many`` of 100 jobs (``App.enqueue_many``), as often;
* firing pass: ``firing.run_once`` over --schedules schedules due at once (every 60 s: each
  pass at the next minute; each must fire them all), its statements together.

Each round first runs every statement more often than psycopg's threshold
(``connections.PREPARE_THRESHOLD``) and PostgreSQL's five custom plans before it chooses a
generic one, as a worker that has run a while has: only the later ones are timed. Prints, per
statement and mode over --runs rounds each, the median time (a shared machine's noise is in
it) and the mean CPU time of the PostgreSQL server process that ran it (read from /proc before
and after each run: the steadier figure), and on/off of both.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

import measure
import servers

import tickwork
from tickwork.db import connections, migrate, store
from tickwork.db import jobs as jobs_db
from tickwork.maintenance.firing import service as firing
from tickwork.maintenance.firing.config import FireReport
from tickwork.model import NewJob
from tickwork.schedules.definition import ScheduleDefinition
from tickwork.schedules.options import JobTemplate

KIND = "bench.noop"
NAMESPACE = "bench"
WARM = 12
"""Runs of a statement before it is timed: past psycopg's threshold and PostgreSQL's custom
plans."""
START = datetime(2030, 1, 1, tzinfo=UTC)

Timings = dict[str, list[tuple[float, float]]]
"""Per statement, each timed run's seconds and its server process's CPU seconds."""


async def _timed(
    conn: connections.AsyncConnection,
    times: list[tuple[float, float]],
    call: Callable[[], Awaitable[object]],
) -> None:
    pid = conn.info.backend_pid
    cpu, started = measure.process_cpu(pid), time.perf_counter()
    await call()
    times.append((time.perf_counter() - started, measure.process_cpu(pid) - cpu))


async def _claims(conn: connections.AsyncConnection, batch: int, rounds: int, out: Timings) -> None:
    claim = jobs_db.claim_jobs("bench", ["default"], {KIND: 5}, batch, 30.0, None)
    for i in range(WARM + rounds):
        claimed: list[object] = []

        async def one_claim(claimed: list[object] = claimed) -> None:
            claimed.extend(await store.arun(conn, claim))

        warm = i < WARM
        await _timed(conn, [] if warm else out["claim"], one_claim)
        done = jobs_db.complete_jobs(claimed, None)  # type: ignore[arg-type]
        await _timed(
            conn, [] if warm else out["complete"], lambda done=done: store.arun(conn, done)
        )


async def _enqueues(conn: connections.AsyncConnection, rounds: int, out: Timings) -> None:
    one = jobs_db.insert_job(NewJob(kind=KIND, queue="default", payload={"n": 1}), None)
    many = jobs_db.insert_jobs(
        NewJob(kind=KIND, queue="default", payload={}), [{"n": n} for n in range(100)], None
    )
    for i in range(WARM + 10 * rounds):  # ten times as many: each is short
        warm = i < WARM
        await _timed(conn, [] if warm else out["enqueue"], lambda: store.arun(conn, one))
        await _timed(conn, [] if warm else out["enqueue_many"], lambda: store.arun(conn, many))


async def _firing(
    conn: connections.AsyncConnection, rounds: int, schedules: int, out: Timings
) -> None:
    for i in range(WARM + rounds):
        at = START + timedelta(minutes=i)
        reports: list[FireReport] = []

        async def fire(at: datetime = at, reports: list[FireReport] = reports) -> None:
            reports.append(await firing.run_once(conn, (NAMESPACE,), at))

        await _timed(conn, [] if i < WARM else out["firing pass"], fire)
        if (report := reports[0]).fired != schedules:
            raise SystemExit(f"a firing pass fired {report.fired} jobs, not {schedules}")


async def _round(url: str, prepare: bool, args: argparse.Namespace, out: Timings) -> None:
    app = tickwork.App(url)
    jobs = (WARM + args.rounds) * args.batch
    for offset in range(0, jobs, 10_000):
        app.enqueue_many(KIND, [{}] * min(10_000, jobs - offset))
    app.close()
    pool = connections.async_pool(url, min_size=1, max_size=1, prepare=prepare)
    await pool.open(wait=True)
    try:
        async with pool.connection() as conn:
            await conn.set_autocommit(True)
            await _claims(conn, args.batch, args.rounds, out)
            await _enqueues(conn, args.rounds, out)
            await conn.execute("DELETE FROM tickwork.jobs")
            await conn.execute(
                "UPDATE tickwork.schedules SET next_run_at = %s WHERE namespace = %s",
                (START, NAMESPACE),
            )
            await _firing(conn, args.rounds, args.schedules, out)
            await conn.execute("DELETE FROM tickwork.jobs")
    finally:
        await pool.close()


def _schedules(url: str, count: int) -> None:
    app = tickwork.App(url)
    template = JobTemplate(kind=KIND)
    app.sync_schedules(
        NAMESPACE,
        [
            ScheduleDefinition(name=f"s{i}", job=template, every=timedelta(seconds=60))
            for i in range(count)
        ],
        prune=True,
    )
    app.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3, help="rounds of each mode, alternating")
    parser.add_argument("--rounds", type=int, default=20, help="timed runs per statement")
    parser.add_argument("--batch", type=int, default=500, help="jobs per claim")
    parser.add_argument("--schedules", type=int, default=500, help="schedules per firing pass")
    servers.add_arguments(parser)
    args = parser.parse_args()
    results: dict[bool, Timings] = {}
    with servers.database_server(args.database_url) as url:
        migrate.apply(url)
        _schedules(url, args.schedules)
        for _ in range(args.runs):
            for prepare in (False, True):
                out = results.setdefault(prepare, {})
                for name in ("claim", "complete", "enqueue", "enqueue_many", "firing pass"):
                    out.setdefault(name, [])
                asyncio.run(_round(url, prepare, args, out))
    print(
        f"median ms per statement, {args.runs} rounds of {args.rounds} each, claim batch "
        f"{args.batch}, {args.schedules} schedules per firing pass:"
    )
    for name, off in results[False].items():
        on = results[True][name]
        off_ms, on_ms = (statistics.median(t[0] for t in r) * 1e3 for r in (off, on))
        off_cpu, on_cpu = (statistics.fmean(t[1] for t in r) * 1e3 for r in (off, on))
        cpu = f"{on_cpu / off_cpu:.2f}" if off_cpu else "?"
        print(
            f"  {name:13} prepared off {off_ms:7.2f} ms (server CPU {off_cpu:6.2f} ms), "
            f"on {on_ms:7.2f} ms ({on_cpu:6.2f} ms): on/off = {on_ms / off_ms:.2f} (CPU {cpu})"
        )


if __name__ == "__main__":
    main()
